import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { TimeSeries } from "@svc/remotewrite";
import { createSvcClients, type SvcClients, verifyWebhook } from "@svc/sdk";
import pg from "pg";
import { checkScaled } from "../../deploy/check-scaled.ts";
import { DEFAULT_SHARDS, shardLeaseName, shardOf } from "../../packages/server/src/cluster/shards.ts";
import { metricIds, vmSelector } from "../../packages/server/src/metrics/metric-ids.ts";
import { waitFor } from "../../packages/server/testing/assert.ts";
import { testDialects } from "../../packages/server/testing/dialects.ts";
import { type EngineKind, engineSkipReason } from "../../packages/server/testing/engines.ts";
import {
  type HttpsPeer,
  makeCertificate,
  type Received,
  startHttpsPeer,
} from "../../packages/server/testing/https-peer.ts";
import { pushAll, rwSeries } from "../../packages/server/testing/remote-write.ts";
import { NOTIFY_LEASE_S, type ReplicaCluster, startReplicaCluster } from "./cluster.ts";
import { startCollector } from "./collector.ts";
import { rollingSuite } from "./rolling.ts";
import { pidOfConnection } from "./sockets.ts";

const S = 1000;
/** Deadlines far beyond what a slow machine needs; the tests wait for outcomes, not for time. */
const PATIENCE_MS = 60_000;
const PROJECT = "replicas";

/** A message for a failed assertion (protobuf messages hold bigints). */
const show = (v: unknown) => JSON.stringify(v, (_k, x) => (typeof x === "bigint" ? String(x) : x));

/**
 * The black-box tests through a round-robin load balancer in front of two replicas on one PostgreSQL,
 * with `kind` as the metrics engine (issue 18, item 5): RPCs, the Prometheus API, discovery and export
 * agreeing with each other, an alert fired by the evaluator of one replica and delivered once, and a
 * replica SIGKILLed under a writing collector and an in-flight delivery.
 */
export async function replicaSuite(kind: EngineKind): Promise<void> {
  const postgres = (await testDialects())[1];
  const skip = engineSkipReason(kind) ?? postgres.skip;

  // A deadline for a hung step (a bug), far beyond the suite's usual minute.
  describe(`two replicas on PostgreSQL and ${kind}, behind a load balancer`, {
    skip,
    timeout: 300_000,
  }, () => {
    const tls = makeCertificate();
    const dir = mkdtempSync(join(tmpdir(), "svc-replica-suite-"));
    const caFile = join(dir, "ca.pem");
    writeFileSync(caFile, tls.cert);
    let c: ReplicaCluster;
    let peer: HttpsPeer;
    let owner: SvcClients;
    let reader: SvcClients;
    let readKey: string;
    let vmA: string;
    let vmB: string;
    /** Released at the end: requests the receiver was told to hold. */
    let release: () => void = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });

    before(async () => {
      peer = await startHttpsPeer(tls);
      c = await startReplicaCluster(kind, postgres.dialect, { caFile });
      const admin = createSvcClients({ baseUrl: c.lb.url, token: c.adminToken, maxRetries: 0 }).admin;
      await admin.projects.createProject({ projectId: PROJECT, displayName: "two replicas" });
      [vmA, vmB] = await Promise.all(
        ["vm-a", "vm-b"].map(
          async (vmId) =>
            (
              await admin.vms.createVM({
                parent: `projects/${PROJECT}`,
                vmId,
                location: "dc-1",
                distribution: "debian-12",
                vcpus: 2,
                memoryBytes: 4n << 30n,
              })
            ).name,
        ),
      );
      const email = "owner@example.com";
      const password = `pw-${randomUUID()}`;
      const user = await admin.users.createUser({ email, password, displayName: "Owner" });
      await admin.projects.setMember({ project: `projects/${PROJECT}`, user: user.name, role: "owner" });
      const { sessionToken } = await createSvcClients({ baseUrl: c.lb.url, maxRetries: 0 }).sessions.login({
        email,
        password,
      });
      owner = createSvcClients({ baseUrl: c.lb.url, token: sessionToken, maxRetries: 0 });
      const sa = await owner.serviceAccounts.createServiceAccount({
        parent: `projects/${PROJECT}`,
        displayName: "scraper",
        template: "Metrics scraper",
      });
      const key = await owner.keys.createKey({
        parent: sa.name,
        displayName: "scraper key",
        capabilities: ["monitoring.read"],
        requestId: randomUUID(),
      });
      assert.ok(key.secret);
      readKey = key.secret;
      reader = createSvcClients({ baseUrl: c.lb.url, token: readKey, maxRetries: 0 });
    });
    after(async () => {
      release();
      await c?.close();
      await peer?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    /** A webhook destination to the receiver's /<path>. */
    async function webhook(path: string) {
      const created = await owner.destinations.createDestination({
        projectName: `projects/${PROJECT}`,
        displayName: path,
        kind: "WEBHOOK",
        url: `${peer.url}/${path}`,
        requestId: randomUUID(),
      });
      return { created, destination: created.destination?.name ?? "" };
    }
    /** Remote write through the load balancer with the collector's token. */
    const push = (series: TimeSeries[]) => pushAll(c.lb.url, c.collectorToken, series);
    /** svc's Prometheus API through the load balancer with the read key. */
    async function promApi<T>(path: string, params: Record<string, string | string[]>): Promise<T> {
      const u = new URL(`${c.lb.url}/v1/monitoring/projects/${PROJECT}/prometheus/api/v1/${path}`);
      for (const [k, v] of Object.entries(params))
        for (const x of Array.isArray(v) ? v : [v]) u.searchParams.append(k, x);
      const res = await fetch(u, { headers: { Authorization: `Bearer ${readKey}` } });
      const body = (await res.json()) as { status: string; data: T };
      assert.equal(res.status, 200, show(body));
      return body.data;
    }
    /** What a scraper gets: discovery, then every shard it lists, as Prometheus builds the URLs. */
    async function scrape(): Promise<string> {
      const auth = { headers: { Authorization: `Bearer ${readKey}` } };
      const sd = await fetch(`${c.lb.url}/v1/monitoring/projects/${PROJECT}/scrape-targets`, auth);
      assert.equal(sd.status, 200);
      const groups = (await sd.json()) as { targets: string[]; labels: Record<string, string> }[];
      const shards = await Promise.all(
        groups.map(async (g) => {
          const { __scheme__: scheme, __metrics_path__: path, __param_shard: shard } = g.labels;
          const res = await fetch(`${scheme}://${g.targets[0]}${path}?shard=${shard}`, auth);
          assert.equal(res.status, 200);
          return res.text();
        }),
      );
      return shards.join("");
    }
    /** The exported samples of `metric` for `vm`: [ms, value] (svc's timestamps, honour_timestamps). */
    const exported = (text: string, metric: string, vm: string): [number, number][] =>
      text
        .split("\n")
        .filter((l) => l.startsWith(`${metric}{`) && l.includes(`vm="${vm}"`))
        .map((l) => {
          const [, value, ts] = l.slice(l.lastIndexOf("}") + 1).split(" ");
          return [Number(ts), Number(value)];
        });

    it("serves RPCs through the load balancer from both replicas, and each answers /readyz", async () => {
      const { vms } = await reader.monitoring.listVMMonitoring({ projectName: `projects/${PROJECT}` });
      assert.deepEqual(vms.map((v) => v.name).sort(), [vmA, vmB]);
      // Set up through the balancer, so both replicas wrote some of it and read what the other wrote.
      assert.ok(
        c.lb.served.every((n) => n > 0),
        `requests per replica: ${c.lb.served}`,
      );
      for (const r of c.replicas) {
        const ready = await fetch(`${r.origin}/readyz`);
        assert.equal(ready.status, 200);
        assert.deepEqual(((await ready.json()) as { checks: unknown }).checks, {
          database: "ok",
          metrics: "ok",
        });
      }
    });

    it("passes docs/deploy.md's check of the scaled layout (deploy/check-scaled.ts)", async () => {
      const said: string[] = [];
      await checkScaled(
        {
          lb: c.lb.url,
          replicas: c.replicas.map((r) => r.origin),
          adminToken: c.adminToken,
          collectorToken: c.collectorToken,
        },
        (line) => said.push(line),
      );
      assert.equal(said.at(-1), "ok: both replicas answer from one PostgreSQL and one metrics engine");
    });

    it("agrees: QueryVMMonitoring = the Prometheus API = the export shards = ListVMMonitoring", async () => {
      const def = metricIds.get("cpu_utilization_pct");
      assert.ok(def);
      const step = 30;
      // The shape of metrics/prometheus.test.ts: a grid-aligned range, samples 123 ms off the grid.
      const t0 = Math.floor((Date.now() - 230 * S) / (step * S)) * step * S;
      let counter = 5000;
      const n = 6;
      const scraped = new Map<number, number>();
      for (let i = 0; i <= n; i++) {
        const ts = t0 + i * step * S + 123;
        counter += (10 + i * 7) * 0.01 * step * 2; // (10 + 7i) % of 2 vCPUs
        await push([
          rwSeries("svc_vm_cpu_seconds_total", { vm: vmA }, [[ts, counter]]),
          rwSeries("svc_vm_vcpus", { vm: vmA }, [[ts, 2]]),
        ]);
        await c.engine.flush();
        // A scrape sees only the newest sample: scrape after each, as a scraper every interval would.
        for (const [ms, v] of exported(await scrape(), "svc_vm_cpu_utilization_pct", vmA)) scraped.set(ms, v);
      }
      const startS = t0 / S + 2 * step;
      const endS = t0 / S + (n + 1) * step;

      const rpc = await reader.monitoring.queryVMMonitoring({
        name: vmA,
        metricIds: ["cpu_utilization_pct"],
        startTimeUnix: BigInt(startS),
        endTimeUnix: BigInt(endS),
        stepSeconds: step,
      });
      const fromRpc = rpc.series[0].points.map((pt) => [Number(pt.timeUnix), pt.value]);
      assert.equal(fromRpc.length, n, show(rpc));
      const api = await promApi<{ result: { metric: Record<string, string>; values: [number, string][] }[] }>(
        "query_range",
        { query: def.promql(vmSelector(vmA), step, 30), start: `${startS}`, end: `${endS}`, step: `${step}` },
      );
      assert.equal(api.result.length, 1, show(api));
      assert.equal(api.result[0].metric.project_id, undefined);
      const fromApi = api.result[0].values.map(([ts, v]) => [ts, Number(v)]);
      // The scraped copy, windowed as the metric's PromQL does: avg_over_time over (t − step, t].
      const fromScrape = fromRpc.map(([t]) => {
        const inWindow = [...scraped].filter(([ms]) => ms > (t - step) * S && ms <= t * S).map(([, v]) => v);
        return [t, inWindow.reduce((a, b) => a + b, 0) / inWindow.length];
      });
      const close = (a: number[][], b: number[][], what: string) => {
        assert.deepEqual(
          a.map(([ts]) => ts),
          b.map(([ts]) => ts),
          what,
        );
        for (let i = 0; i < a.length; i++)
          assert.ok(Math.abs(a[i][1] - b[i][1]) < 1e-9, `${what} @${a[i][0]}`);
      };
      close(fromRpc, fromApi, "RPC vs PromQL API");
      close(fromRpc, fromScrape, "RPC vs the export shards");
      for (const [i, [, v]] of fromRpc.entries()) assert.ok(Math.abs(v - (10 + (i + 1) * 7)) < 1e-9);
      // The newest value: ListVMMonitoring's = the last exported sample.
      const { vms } = await reader.monitoring.listVMMonitoring({ projectName: `projects/${PROJECT}` });
      const newest = [...scraped].sort(([a], [b]) => a - b).at(-1);
      assert.equal(newest?.[0], t0 + n * step * S + 123);
      assert.equal(vms.find((v) => v.name === vmA)?.cpuUtilizationPct, newest?.[1]);
    });

    it("answers the Prometheus API's query, series and labels from the engine, without the tenant label", async () => {
      // The samples of the agreement test.
      const at = `${Math.floor(Date.now() / S)}`;
      const instant = await promApi<{
        result: { metric: Record<string, string>; value: [number, string] }[];
      }>("query", { query: `svc_vm_vcpus{vm="${vmA}"}`, time: at });
      assert.deepEqual(
        instant.result.map((r) => [r.metric.vm, r.metric.project_id, r.value[1]]),
        [[vmA, undefined, "2"]],
      );
      const series = await promApi<Record<string, string>[]>("series", {
        "match[]": "svc_vm_cpu_utilization_pct",
        start: `${Number(at) - 600}`,
        end: at,
      });
      assert.deepEqual(
        series.map((s) => [s.__name__, s.vm, s.project_id]),
        [["svc_vm_cpu_utilization_pct", vmA, undefined]],
      );
      const labels = await promApi<string[]>("labels", { start: `${Number(at) - 600}`, end: at });
      assert.ok(labels.includes("vm") && labels.includes("__name__"), show(labels));
      assert.ok(!labels.includes("project_id"), show(labels));
    });

    it("fires a rule saved through the balancer from the collector's samples on one evaluator, and delivers its incident once", async () => {
      const { created, destination } = await webhook("alerts");
      const rule = await owner.alerts.saveAlertRule({
        projectName: `projects/${PROJECT}`,
        id: randomUUID(),
        requestId: randomUUID(),
        expectedVersion: "0",
        spec: {
          displayName: "CPU high",
          metricId: "cpu_utilization_pct",
          operator: "GREATER_THAN",
          threshold: 90,
          sustainedSeconds: 0,
          severity: "CRITICAL",
          vmNames: [vmB],
          destinationNames: [destination],
        },
      });
      // The collector: 97 % of 2 vCPUs for a minute, up to now.
      const start = Date.now();
      let counter = 1000;
      let last = start - 90 * S;
      const cpu = async (ts: number, pct: number) => {
        counter += pct * 0.01 * ((ts - last) / S) * 2;
        last = ts;
        await push([
          rwSeries("svc_vm_cpu_seconds_total", { vm: vmB }, [[ts, counter]]),
          rwSeries("svc_vm_vcpus", { vm: vmB }, [[ts, 2]]),
        ]);
      };
      for (const ago of [60, 30, 0]) await cpu(start - ago * S, 97);
      await c.engine.flush();
      const near = (v: number | undefined, want: number) => v !== undefined && Math.abs(v - want) < 1e-6;

      const incident = await waitFor("the rule to fire", PATIENCE_MS, async () => {
        const { incidents } = await reader.incidents.listIncidents({
          projectName: `projects/${PROJECT}`,
          rule: rule.name,
        });
        return incidents[0];
      });
      assert.ok(near(incident.firingValue, 97), show(incident));
      const delivery = await waitFor("the incident's delivery to be sent", PATIENCE_MS, async () => {
        const { deliveries } = await owner.destinations.listDeliveries({
          projectName: `projects/${PROJECT}`,
          destination,
        });
        return deliveries.find((d) => d.state === "SENT");
      });
      // Evaluation goes on at one replica: a newer sample becomes the incident's last value, and still
      // nothing fires or is sent again.
      await cpu(Math.max(Date.now(), last + S), 99);
      await c.engine.flush();
      await waitFor("a later cycle to see 99 %", PATIENCE_MS, async () => {
        const got = await reader.incidents.getIncident({ name: incident.name });
        return near(got.lastValue, 99) ? got : undefined;
      });
      const db = new pg.Client({ connectionString: c.databaseUrl });
      await db.connect();
      try {
        // The project's shard is held by a replica (cluster/shards.ts).
        const { rows } = await db.query<{ holder: string }>("select holder from leases where name = $1", [
          shardLeaseName(shardOf(PROJECT, DEFAULT_SHARDS)),
        ]);
        assert.equal(rows.length, 1);
        const pids = c.replicas.map((r) => r.child.pid);
        assert.ok(
          pids.some((pid) => rows[0].holder.includes(`:${pid}:`)),
          `${rows[0].holder} is a replica`,
        );
      } finally {
        await db.end();
      }
      const { incidents } = await reader.incidents.listIncidents({
        projectName: `projects/${PROJECT}`,
        rule: rule.name,
      });
      assert.equal(incidents.length, 1, show(incidents));
      const full = await reader.incidents.getIncident({ name: incident.name });
      assert.deepEqual(
        full.events.map((e) => [e.kind, e.actor]),
        [["OPENED", "evaluator"]],
      );
      const requests = peer.received.filter((r) => r.path === "/alerts");
      assert.deepEqual(
        requests.map((r) => r.headers["webhook-id"]),
        [delivery.deliveryId],
        "one request, one webhook-id",
      );
      const v = verifyWebhook(requests[0].body, requests[0].headers, created.webhookSecret);
      const payload = v.payload as { type: string; incident: { name: string; firingValue: number } };
      assert.deepEqual([payload.type, payload.incident.name], ["incident.opened", incident.name]);
      assert.ok(near(payload.incident.firingValue, 97));
    });

    /** A VM of 2 vCPUs created through the balancer (each test its own, so others' series stay as they were). */
    async function createVm(vmId: string): Promise<string> {
      const admin = createSvcClients({ baseUrl: c.lb.url, token: c.adminToken, maxRetries: 0 }).admin;
      const vm = await admin.vms.createVM({
        parent: `projects/${PROJECT}`,
        vmId,
        location: "dc-1",
        distribution: "debian-12",
        vcpus: 2,
        memoryBytes: 4n << 30n,
      });
      return vm.name;
    }
    /** A hypervisor collector's batch for `vm` (counter and vCPUs), written past the balancer to replica `i`. */
    const cpuVia = (i: number, vm: string, ts: number, counter: number) =>
      pushAll(c.replicas[i].origin, c.collectorToken, [
        rwSeries("svc_vm_cpu_seconds_total", { vm }, [[ts, counter]]),
        rwSeries("svc_vm_vcpus", { vm }, [[ts, 2]]),
      ]);
    /** What svc's Prometheus API stores for `metric` of `vm` from `fromMs` on: [ms, value] (a range selector reads raw samples). */
    async function stored(metric: string, vm: string, fromMs: number): Promise<[number, number][]> {
      const at = Math.ceil(Date.now() / S) + 1;
      const got = await promApi<{ result: { values: [number, string][] }[] }>("query", {
        query: `${metric}{vm="${vm}"}[${at - Math.floor(fromMs / S) + 1}s]`,
        time: `${at}`,
      });
      return (got.result[0]?.values ?? []).map(([ts, v]) => [Math.round(ts * S), Number(v)]);
    }
    /** Replica `i`'s svc_ingest_cpu_utilization_refused_total by reason, from its /metrics (the operator token). */
    async function refusedUtilization(i: number): Promise<Record<string, number>> {
      const res = await fetch(`${c.replicas[i].origin}/metrics`, {
        headers: { Authorization: `Bearer ${c.adminToken}` },
      });
      assert.equal(res.status, 200);
      const out: Record<string, number> = {};
      for (const m of (await res.text()).matchAll(
        /^svc_ingest_cpu_utilization_refused_total\{reason="([a-z_]+)"\} (\S+)$/gm,
      ))
        out[m[1]] = Number(m[2]);
      return out;
    }

    it("a writer moved between replicas and back: no derived CPU point is missing or averaged across the moves", async () => {
      const vm = await createVm("vm-moved");
      // A collector every 30 s, its timestamps in the recent past; samples 0–3 through replica 0, 4–5
      // through replica 1, which has never seen the VM (it reads the previous sample back), and 6–7
      // through replica 0 again, whose memory holds sample 3, 90 s old: it reads sample 5 back too.
      const step = 30 * S;
      const t0 = Math.floor(Date.now() / S) * S - 10 * step;
      const pct = (i: number) => 10 + 5 * i;
      const via = (i: number) => (i >= 4 && i < 6 ? 1 : 0);
      let counter = 100;
      for (let i = 0; i < 8; i++) {
        if (i > 0) counter += pct(i) * 0.01 * (step / S) * 2;
        // The 30 s a collector waits between two batches, compressed: VictoriaMetrics serves a sample
        // about a second after it acknowledged it (docs/deploy.md); what a move reads back is older.
        if (i > 0 && via(i) !== via(i - 1)) await c.engine.flush();
        await cpuVia(via(i), vm, t0 + i * step, counter);
      }
      await c.engine.flush();
      const points = await stored("svc_vm_cpu_utilization_pct", vm, t0);
      const missing = [1, 2, 3, 4, 5, 6, 7].filter((i) => !points.some(([ms]) => ms === t0 + i * step));
      process.stderr.write(
        `writer moved (${kind}): ${points.length} derived CPU points stored of 7 intervals, ${missing.length} missing${missing.length ? ` (intervals ${missing.join(", ")})` : ""}, across 2 moves (replica 0 → 1 → 0)\n`,
      );
      // One point per interval (the first sample has none before it), each the interval's own.
      assert.deepEqual(
        points.map(([ms]) => (ms - t0) / step),
        [1, 2, 3, 4, 5, 6, 7],
        `derived points: ${show(points)}`,
      );
      for (const [ms, v] of points) {
        const i = (ms - t0) / step;
        assert.ok(Math.abs(v - pct(i)) < 1e-6, `interval ${i}: ${v} %, want ${pct(i)} %`);
      }
    });

    it("two writers with conflicting counters through two replicas: the impossible utilizations are refused, named and counted; none over 100 % is stored", async () => {
      // Writer X through replica 0 sends a counter near 5,000 s at 20 % of 2 vCPUs; writer Y through
      // replica 1 sends the same VM's counter 15 s after each of X's, near 900,000 s (vmUp) or 100 s
      // (vmDown), at 30 %. Replica 1 reads X's newer sample back before each of Y's (its last interval
      // there, 15 s from X's sample, is shorter than Y's 30 s wait), so each of Y's utilizations is
      // 14,800 % (vmUp: over_capacity) or a counter that fell 4,900 s and whose 100 s read as a reset
      // is 333 % (vmDown: counter_backwards). Replica 0 derives X's from X's own samples.
      const [vmUp, vmDown] = [await createVm("vm-conflict-up"), await createVm("vm-conflict-down")];
      const before = await Promise.all([0, 1].map(refusedUtilization));
      const step = 30 * S;
      const t0 = Math.floor(Date.now() / S) * S - 10 * step;
      const n = 4;
      for (let i = 0; i < n; i++) {
        for (const vm of [vmUp, vmDown]) await cpuVia(0, vm, t0 + i * step, 5000 + i * 0.2 * 30 * 2);
        await c.engine.flush();
        await cpuVia(1, vmUp, t0 + i * step + step / 2, 900_000 + i * 0.3 * 30 * 2);
        await cpuVia(1, vmDown, t0 + i * step + step / 2, 100 + i * 0.3 * 30 * 2);
        await c.engine.flush();
      }
      const after = await Promise.all([0, 1].map(refusedUtilization));
      const delta = [0, 1].map((r) =>
        Object.fromEntries(
          ["over_capacity", "counter_backwards"].map((k) => [k, (after[r][k] ?? 0) - (before[r][k] ?? 0)]),
        ),
      );
      process.stderr.write(
        `conflicting writers (${kind}): refused per replica ${show(delta)} (want 0/0 on replica 0, ${n}/${n} on replica 1)\n`,
      );
      assert.deepEqual(
        delta,
        [
          { over_capacity: 0, counter_backwards: 0 },
          { over_capacity: n, counter_backwards: n },
        ],
        "refusals per replica",
      );
      for (const vm of [vmUp, vmDown]) {
        // Every raw counter sample of both writers is kept; no utilization over 100 % is.
        assert.equal((await stored("svc_vm_cpu_seconds_total", vm, t0)).length, 2 * n, vm);
        // Only X's utilizations are: 20 % for each of its intervals.
        const points = await stored("svc_vm_cpu_utilization_pct", vm, t0);
        process.stderr.write(
          `conflicting writers (${kind}): ${vm}: ${points.length} utilization points stored, largest ${Math.max(...points.map(([, v]) => v))} %\n`,
        );
        for (const [ms, v] of points) assert.ok(v >= 0 && v <= 100, `${vm} @${ms - t0}: ${v} % stored`);
        assert.deepEqual(
          points.map(([ms, v]) => [(ms - t0) / step, Math.round(v * 1e6) / 1e6]),
          Array.from({ length: n - 1 }, (_, i) => [i + 1, 20]),
          vm,
        );
      }
    });

    it("SIGKILL of a replica: no acknowledged sample is lost, and the other replica completes its in-flight delivery", async () => {
      const { created, destination } = await webhook("held");
      // The receiver holds the first request (the attempt in flight) and answers later ones.
      let answering = false;
      peer.respond = (r) =>
        r.path === "/held" && !answering ? { status: 204, hold: held } : { status: 204 };

      // Two collectors, each kept on one replica by its address (127.0.0.2 and .3 hash to 0 and 1).
      const collectors = [
        { localAddress: "127.0.0.2", vm: vmA },
        { localAddress: "127.0.0.3", vm: vmB },
      ].map((o) =>
        startCollector({
          ...o,
          url: c.lb.url,
          token: c.collectorToken,
          metric: "svc_vm_memory_total_bytes",
        }),
      );
      const ackedBy = (n: number) =>
        waitFor(`${n} acknowledged batches from each collector`, PATIENCE_MS, async () => {
          for (const w of collectors) assert.equal(w.refusal(), undefined, "a batch was refused");
          return collectors.every((w) => w.acked.length >= n) ? true : undefined;
        });
      let victim = -1;
      try {
        await ackedBy(5);
        assert.deepEqual(
          collectors.map((w) => [...new Set(w.acked.map(([, , r]) => r))]),
          [["0"], ["1"]],
          "each collector stays on its replica",
        );
        const sent = await owner.destinations.sendTestNotification({ name: destination });
        const inFlight = await waitFor("the delivery to reach the receiver", PATIENCE_MS, async () =>
          peer.received.find((r) => r.path === "/held"),
        );
        assert.equal(inFlight.headers["webhook-id"], sent.deliveryId);
        const pids = c.replicas.map((r) => r.child.pid ?? 0);
        const sender = pidOfConnection(inFlight.remotePort, pids);
        assert.ok(sender !== undefined, "one of the replicas holds the request's connection");
        victim = pids.indexOf(sender);
        const killedAt = Date.now();
        await c.kill(victim);
        answering = true;
        // Both collectors go on through the balancer, now to the survivor alone. (Past the one answer
        // per collector that may still have been on its way from the killed replica.)
        const dead = collectors.map((w) => w.acked.length + 1);
        await ackedBy(Math.max(...dead) + 20);
        for (const [i, w] of collectors.entries())
          assert.deepEqual(
            [...new Set(w.acked.slice(dead[i]).map(([, , r]) => r))],
            [String(1 - victim)],
            "after the kill, the survivor acknowledges",
          );

        const resumed: Received = await waitFor(
          `the survivor to retry the delivery after its ${NOTIFY_LEASE_S} s lease`,
          NOTIFY_LEASE_S * S + PATIENCE_MS,
          async () => peer.received.filter((r) => r.path === "/held")[1],
        );
        process.stderr.write(
          `kill -9 (${kind}): the killed replica's claimed delivery retried by the survivor ${resumed.atMs - killedAt} ms after the kill (claim lease ${NOTIFY_LEASE_S} s)\n`,
        );
        assert.equal(resumed.headers["webhook-id"], sent.deliveryId, "the same webhook-id");
        assert.notEqual(resumed.headers["svc-attempt-id"], inFlight.headers["svc-attempt-id"]);
        verifyWebhook(resumed.body, resumed.headers, created.webhookSecret);
        const done = await waitFor("the delivery to be SENT", PATIENCE_MS, async () => {
          const d = await owner.destinations.getDelivery({
            name: `${destination}/deliveries/${sent.deliveryId}`,
          });
          return d.state === "SENT" ? d : undefined;
        });
        // The killed attempt left no record; the survivor's is the one answered.
        assert.deepEqual(
          done.attempts.map((a) => [a.status, a.responseCode, a.attemptId]),
          [["SENT", 204, resumed.headers["svc-attempt-id"]]],
        );
      } finally {
        await Promise.all(collectors.map((w) => w.stop()));
      }

      // Every acknowledged sample is in the engine, read through the surviving replica: the ones the
      // killed replica acknowledged, and the ones it was sent and never answered (retried, then taken).
      await c.engine.flush();
      for (const w of collectors) {
        const vm = w === collectors[0] ? vmA : vmB;
        const from = w.acked[0][0];
        const at = Math.ceil(Date.now() / S) + 1;
        const got = await promApi<{ result: { values: [number, string][] }[] }>("query", {
          query: `svc_vm_memory_total_bytes{vm="${vm}"}[${at - Math.floor(from / S) + 1}s]`,
          time: `${at}`,
        });
        assert.equal(got.result.length, 1, show(got));
        const stored = new Map(got.result[0].values.map(([ts, v]) => [Math.round(ts * S), Number(v)]));
        const lost = w.acked.filter(([ts, v]) => stored.get(ts) !== v);
        assert.deepEqual(lost, [], `of ${w.acked.length} acknowledged (${w.retried()} attempts retried)`);
      }
    });

    it("the survivor takes over the killed replica's evaluation shards: the open incident resolves, with no second OPENED", async () => {
      const survivor = c.replicas.find((r) => r.child.exitCode === null && r.child.signalCode === null);
      assert.ok(survivor, "one replica is still running");
      const db = new pg.Client({ connectionString: c.databaseUrl });
      await db.connect();
      try {
        // Every shard is the survivor's within three cycles of the killed replica's last renewal.
        await waitFor("the survivor to hold every evaluation shard", PATIENCE_MS, async () => {
          const { rows } = await db.query<{ holder: string }>(
            "select holder from leases where name like 'alert-evaluator/shard/%'",
          );
          return rows.length === DEFAULT_SHARDS &&
            rows.every((r) => r.holder.includes(`:${survivor.child.pid}:`))
            ? true
            : undefined;
        });
      } finally {
        await db.end();
      }
      // The incident the CPU rule opened before the kill: vmB recovers, and it resolves.
      const { incidents } = await reader.incidents.listIncidents({ projectName: `projects/${PROJECT}` });
      const open = incidents.find((i) => i.state === "OPEN");
      assert.ok(open, show(incidents));
      // Two counter samples 10 s apart, 1 CPU-second on 2 vCPUs between them: 5 %.
      const now = Date.now();
      for (const [ts, counter] of [
        [now - 10 * S, 1e9],
        [now, 1e9 + 1],
      ])
        await push([
          rwSeries("svc_vm_cpu_seconds_total", { vm: vmB }, [[ts, counter]]),
          rwSeries("svc_vm_vcpus", { vm: vmB }, [[ts, 2]]),
        ]);
      await c.engine.flush();
      const resolved = await waitFor("the incident to resolve on the survivor", PATIENCE_MS, async () => {
        const got = await reader.incidents.getIncident({ name: open.name });
        return got.state === "RESOLVED" ? got : undefined;
      });
      assert.deepEqual(
        resolved.events.map((e) => e.kind),
        ["OPENED", "RESOLVED"],
        "one OPENED, and the recovery seen",
      );
      const after = await reader.incidents.listIncidents({ projectName: `projects/${PROJECT}` });
      assert.equal(after.incidents.filter((i) => i.rule === open.rule).length, 1, show(after));
    });
  });

  rollingSuite(kind, postgres);
}
