import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { createSvcClients, type SvcClients } from "@svc/sdk";
import pg from "pg";
import { DEFAULT_SHARDS, shardOf } from "../../packages/server/src/cluster/shards.ts";
import { waitFor } from "../../packages/server/testing/assert.ts";
import type { testDialects } from "../../packages/server/testing/dialects.ts";
import { type EngineKind, engineSkipReason } from "../../packages/server/testing/engines.ts";
import { cpuRuleSpec } from "../../packages/server/testing/rules.ts";
import { EVALUATION_INTERVAL_S, type ReplicaCluster, startReplicaCluster } from "./cluster.ts";
import { startCollector } from "./collector.ts";

const S = 1000;
/** The evaluation cycle (cluster.ts: 6 s), ms. */
const I = EVALUATION_INTERVAL_S * S;
const PROJECTS = 24;
const REPLICAS = 3;

/** Every evaluation of every project as seen in alert_rules.last_eval_time, sampled every 100 ms. */
function evaluationLog(databaseUrl: string) {
  const db = new pg.Client({ connectionString: databaseUrl });
  const seen = new Map<string, number[]>();
  let stopped = false;
  let loop: Promise<void> = Promise.resolve();
  return {
    seen,
    async start() {
      await db.connect();
      loop = (async () => {
        while (!stopped) {
          const { rows } = await db.query<{ project_id: string; t: string | null }>(
            "select project_id, max(last_eval_time) as t from alert_rules group by project_id",
          );
          for (const r of rows) {
            if (r.t === null) continue;
            const list = seen.get(r.project_id) ?? [];
            if (list.at(-1) !== Number(r.t)) list.push(Number(r.t));
            seen.set(r.project_id, list);
          }
          await new Promise((r) => setTimeout(r, 100));
        }
      })();
    },
    /** Per project, the longest time without an evaluation within [fromMs, toMs]. */
    gaps(fromMs: number, toMs: number): Map<string, number> {
      const out = new Map<string, number>();
      for (const [p, times] of seen) {
        const before = times.filter((t) => t <= fromMs).at(-1);
        const inside = times.filter((t) => t > fromMs && t <= toMs);
        const points = [...(before === undefined ? [] : [before]), ...inside];
        let gap = 0;
        for (let i = 1; i < points.length; i++) gap = Math.max(gap, points[i] - points[i - 1]);
        const last = points.at(-1);
        gap = last === undefined ? toMs - fromMs : Math.max(gap, toMs - last);
        out.set(p, gap);
      }
      return out;
    },
    async close() {
      stopped = true;
      await loop;
      await db.end();
    },
  };
}

/** Shards each replica (by pid in its holder name) holds, from the leases table. */
async function holders(db: pg.Client): Promise<Map<number, string>> {
  const { rows } = await db.query<{ name: string; holder: string; expire_time: string }>(
    "select name, holder, expire_time from leases where name like 'alert-evaluator/shard/%'",
  );
  const now = Date.now();
  const out = new Map<number, string>();
  for (const r of rows) if (Number(r.expire_time) > now) out.set(Number(r.name.split("/").pop()), r.holder);
  return out;
}
const pidOf = (holder: string) => Number(holder.split(":")[1]);

/**
 * Traffic through the balancer while replicas restart: three collectors writing (each from its own
 * address, so the balancer spreads them) and a reader querying one VM after another over the RPC API.
 */
function startLoad(c: ReplicaCluster, reader: SvcClients, vms: readonly string[]) {
  const collectors = ["127.0.0.2", "127.0.0.3", "127.0.0.4"].map((localAddress, i) =>
    startCollector({
      url: c.lb.url,
      token: c.collectorToken,
      localAddress,
      metric: "svc_vm_memory_total_bytes",
      vm: vms[i],
    }),
  );
  // A fourth writes a VM's CPU counter every 5 s (a collector's 30 s, shortened as the cycle is): a
  // restart of its replica moves it, and every sample after its first must still have its derived
  // utilization (issue 48). Far slower than the ~1 s VictoriaMetrics takes to serve a sample it took,
  // which the new replica reads back (docs/deploy.md, "Spreading writers").
  const cpuWriter = startCollector({
    url: c.lb.url,
    token: c.collectorToken,
    localAddress: "127.0.0.5",
    metric: "svc_vm_cpu_seconds_total",
    vm: vms[3],
    cpu: { vcpus: 2, pct: 10 },
    pauseMs: 5000,
  });
  const queries = { answered: 0, failed: [] as string[] };
  let running = true;
  const querying = (async () => {
    for (let k = 0; running; k++) {
      const now = Math.floor(Date.now() / S);
      await reader.monitoring
        .queryVMMonitoring({
          name: vms[k % vms.length],
          metricIds: ["cpu_utilization_pct", "memory_used_pct"],
          startTimeUnix: BigInt(now - 600),
          endTimeUnix: BigInt(now),
          stepSeconds: 30,
        })
        .then(
          () => queries.answered++,
          (err: Error) => queries.failed.push(err.message),
        );
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  return {
    collectors,
    cpuWriter,
    queries,
    async stop() {
      running = false;
      await Promise.all([querying, cpuWriter.stop(), ...collectors.map((w) => w.stop())]);
    },
  };
}

/**
 * Issue 48: three replicas sharing the evaluator's shards, every project with a rule. A rolling restart
 * (SIGTERM, start, next) misses no cycle of any project; a kill -9 costs its shards at most one cycle.
 */
export function rollingSuite(kind: EngineKind, postgres: Awaited<ReturnType<typeof testDialects>>[1]) {
  const skip = engineSkipReason(kind) ?? postgres.skip;
  describe(`three replicas on PostgreSQL and ${kind}: restarts and a crash without missed cycles`, {
    skip,
    timeout: 600_000,
  }, () => {
    let c: ReplicaCluster;
    let log: ReturnType<typeof evaluationLog>;
    let db: pg.Client;
    let owner: SvcClients;
    /** Stops the traffic of the rolling restart: the test does, or after() when the test failed. */
    let stopLoad = async () => {};
    const vms: string[] = [];
    const projectIds = Array.from({ length: PROJECTS }, (_, i) => `roll-${i}`);

    before(async () => {
      c = await startReplicaCluster(kind, postgres.dialect, { replicas: REPLICAS });
      const clients = createSvcClients({ baseUrl: c.lb.url, token: c.adminToken, maxRetries: 0 });
      const email = "roller@example.com";
      const password = `pw-${randomUUID()}`;
      const user = await clients.admin.users.createUser({ email, password, displayName: "Roller" });
      for (const projectId of projectIds) {
        await clients.admin.projects.createProject({ projectId, displayName: projectId });
        const vm = await clients.admin.vms.createVM({
          parent: `projects/${projectId}`,
          vmId: "vm-1",
          location: "dc-1",
          distribution: "debian-12",
          vcpus: 2,
          memoryBytes: 4n << 30n,
        });
        vms.push(vm.name);
        await clients.admin.projects.setMember({
          project: `projects/${projectId}`,
          user: user.name,
          role: "owner",
        });
      }
      const { sessionToken } = await createSvcClients({ baseUrl: c.lb.url, maxRetries: 0 }).sessions.login({
        email,
        password,
      });
      owner = createSvcClients({ baseUrl: c.lb.url, token: sessionToken, maxRetries: 0 });
      for (const projectId of projectIds)
        await owner.alerts.saveAlertRule({
          projectName: `projects/${projectId}`,
          id: randomUUID(),
          requestId: randomUUID(),
          expectedVersion: "0",
          spec: cpuRuleSpec(),
        });
      log = evaluationLog(c.databaseUrl);
      await log.start();
      db = new pg.Client({ connectionString: c.databaseUrl });
      await db.connect();
      // Every project evaluated, and every shard held, before anything is restarted.
      await waitFor("every project evaluated twice", 10 * I, async () =>
        projectIds.every((p) => (log.seen.get(p)?.length ?? 0) >= 2) ? true : undefined,
      );
      await waitFor("every shard held", 10 * I, async () =>
        (await holders(db)).size === DEFAULT_SHARDS ? true : undefined,
      );
    });
    after(async () => {
      await stopLoad();
      await log?.close();
      await db?.end();
      await c?.close();
    });

    it("a rolling restart (SIGTERM, start, the next) under remote write and queries misses no evaluation cycle of any project", async () => {
      const load = startLoad(c, owner, vms);
      stopLoad = load.stop;
      // The CPU series three samples old (10 s): VictoriaMetrics took up to 8 s to serve the first samples of
      // a new series (docs/deploy.md), and a replica restarted before then has none to read back.
      await waitFor("the load to be under way", 10 * I, async () =>
        load.queries.answered > 0 &&
        load.collectors.every((w) => w.acked.length > 0) &&
        load.cpuWriter.acked.length >= 3
          ? true
          : undefined,
      );
      const from = Date.now();
      const shareAfter: number[] = [];
      const events: string[] = [];
      const ackedAt = (w: (typeof load.collectors)[number]) => w.acked.length;
      const progress: string[] = [];
      for (let i = 0; i < REPLICAS; i++) {
        const before = { writes: load.collectors.map(ackedAt), queries: load.queries.answered };
        events.push(`stop ${i} at ${Date.now() - from}`);
        await c.stop(i);
        events.push(`stopped ${i} at ${Date.now() - from}`);
        await c.start(i);
        const ready = Date.now();
        events.push(`started ${i} at ${ready - from}`);
        const pid = c.replicas[i].child.pid;
        // Its share: a third of the shards, taken once the others' next cycles give them back.
        await waitFor(`replica ${i} to take its share`, 10 * I, async () =>
          [...(await holders(db)).values()].filter((h) => pidOf(h) === pid).length >=
          DEFAULT_SHARDS / REPLICAS
            ? true
            : undefined,
        );
        shareAfter.push(Date.now() - ready);
        // The load went on through this replica's restart: every writer acknowledged, queries answered.
        const writes = load.collectors.map((w, k) => ackedAt(w) - before.writes[k]);
        const queries = load.queries.answered - before.queries;
        progress.push(`restart ${i}: ${writes.join("/")} batches acknowledged, ${queries} queries answered`);
        assert.ok(writes.every((n) => n > 0) && queries > 0, progress.at(-1));
      }
      // One more cycle after the last start, so its shards' next evaluations are in the log.
      await new Promise((r) => setTimeout(r, 2 * I));
      await load.stop();
      const to = Date.now() - I;
      const gaps = log.gaps(from, to);
      // The CPU writer's derived points, read from the engine: one at every acknowledged sample but the first.
      await c.engine.flush();
      const cpuAcked = load.cpuWriter.acked;
      const at = Math.ceil(Date.now() / S) + 1;
      const q = new URL(`${c.engine.queryUrl}/api/v1/query`);
      q.searchParams.set(
        "query",
        `svc_vm_cpu_utilization_pct{vm="${vms[3]}"}[${at - Math.floor(cpuAcked[0][0] / S) + 1}s]`,
      );
      q.searchParams.set("time", String(at));
      const derived = (await (await fetch(q)).json()) as {
        data: { result: { values: [number, string][] }[] };
      };
      const derivedAt = new Set((derived.data.result[0]?.values ?? []).map(([ts]) => Math.round(ts * S)));
      const missingDerived = cpuAcked.slice(1).filter(([ts]) => !derivedAt.has(ts));
      const movedAt = cpuAcked.filter((a, k) => k > 0 && a[2] !== cpuAcked[k - 1][2]).length;
      process.stderr.write(
        `rolling restart (${kind}): CPU writer ${cpuAcked.length} samples acknowledged, answered by ${movedAt + 1} replica turns, ${missingDerived.length} derived utilization points missing${missingDerived.length ? ` (${missingDerived.map(([ts, , r]) => `${ts - from} ms via ${r}`).join(", ")}; replicas in turn ${cpuAcked.map(([ts, , r]) => `${ts - from}:${r}`).join(" ")})` : ""}\n`,
      );
      const worst = Math.max(...gaps.values());
      process.stderr.write(
        `rolling restart (${kind}): longest time without an evaluation ${worst} ms (cycle ${I} ms); a started replica held its share after ${shareAfter.join(", ")} ms; load: ${progress.join("; ")}; ${load.queries.failed.length} queries failed, ${load.collectors.map((w) => w.retried()).join("/")} write attempts retried\n`,
      );
      process.stderr.write(
        `rolling restart (${kind}): longest time without an evaluation per project (ms): ${[...gaps].map(([p, g]) => `${p}:${g}`).join(" ")}\n`,
      );
      // Clients see no error: writers retry what a stopping replica did not answer (as remote-write
      // clients do) and none is refused; the balancer sends a query a stopped replica refused to the next.
      for (const w of [...load.collectors, load.cpuWriter])
        assert.equal(w.refusal(), undefined, "a batch was refused");
      assert.deepEqual(load.queries.failed, [], "queries failed during the roll");
      assert.deepEqual(
        missingDerived.map(([ts, , r]) => `${ts - from} ms via ${r}`),
        [],
        "derived CPU points missing through the roll",
      );
      assert.equal(gaps.size, PROJECTS);
      // A missed cycle is a gap of two cycles; jitter of a timer and a cycle's length stay far below half.
      for (const [p, gap] of gaps)
        assert.ok(
          gap < 1.5 * I,
          `${p} (shard ${shardOf(p, DEFAULT_SHARDS)}): ${gap} ms without an evaluation; evaluated at ${(log.seen.get(p) ?? []).map((t) => t - from).join(" ")}; ${events.join(", ")}`,
        );
    });

    it("a kill -9 costs the killed replica's shards at most one cycle", async () => {
      const victim = REPLICAS - 1;
      const pid = c.replicas[victim].child.pid;
      const before = await holders(db);
      const itsShards = new Set([...before].filter(([, h]) => pidOf(h) === pid).map(([s]) => s));
      assert.ok(itsShards.size > 0, "the victim holds shards");
      const itsProjects = projectIds.filter((p) => itsShards.has(shardOf(p, DEFAULT_SHARDS)));
      assert.ok(itsProjects.length > 0, "the victim evaluates projects");
      const killed = Date.now();
      await c.kill(victim);
      await waitFor("the survivors to hold every shard", 10 * I, async () =>
        (await holders(db)).size === DEFAULT_SHARDS ? true : undefined,
      );
      await new Promise((r) => setTimeout(r, 2 * I));
      // From the kill to each of its projects' next evaluation by a survivor.
      const after = itsProjects.map((p) => {
        const next = (log.seen.get(p) ?? []).find((t) => t > killed);
        assert.ok(next !== undefined, `${p} evaluated again after the kill`);
        return next - killed;
      });
      const gaps = log.gaps(killed - I, Date.now() - I);
      const worstGap = Math.max(...itsProjects.map((p) => gaps.get(p) ?? 0));
      // Per shard of the victim (that has a project here): the longest time without an evaluation.
      const perShard = new Map<number, number>();
      for (const p of itsProjects) {
        const s = shardOf(p, DEFAULT_SHARDS);
        perShard.set(s, Math.max(perShard.get(s) ?? 0, gaps.get(p) ?? 0));
      }
      process.stderr.write(
        `kill -9 (${kind}): gap per shard of the victim (${itsShards.size} shards held, ${perShard.size} with projects): ${[...perShard].map(([s, g]) => `${s}:${g}`).join(" ")} ms\n`,
      );
      process.stderr.write(
        `kill -9 (${kind}): its shards evaluated again ${Math.max(...after)} ms after the kill; longest time without an evaluation ${worstGap} ms (cycle ${I} ms)\n`,
      );
      for (const [i, ms] of after.entries())
        assert.ok(ms <= I, `${itsProjects[i]}: evaluated again ${ms} ms after the kill (over a cycle)`);
      assert.ok(worstGap <= 2 * I, `${worstGap} ms without an evaluation: more than one missed cycle`);
      await c.start(victim);
    });
  });
}
