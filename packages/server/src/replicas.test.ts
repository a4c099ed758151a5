import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import { testDialects } from "../testing/dialects.ts";
import { ADMIN_TOKEN, startTestApp, type TestApp } from "../testing/harness.ts";
import { createEvaluator } from "./alerts/evaluator.ts";
import { resolveAlertOptions } from "./alerts/options.ts";
import { createShardLeases } from "./cluster/shards.ts";
import { loadConfig } from "./config.ts";
import type { MetricsBackend } from "./metrics/backend.ts";

const dialects = await testDialects();

for (const { dialect, skip } of dialects) {
  describe(`evaluation shared across replicas (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    before(async () => {
      // No evaluator role: the app's own evaluator must not take the shards the test's replicas share.
      t = await startTestApp(dialect, { roles: new Set(["api", "ingest", "notifier"]) });
    });
    after(() => t?.close());

    it("each project is evaluated by one replica per cycle; a dead replica's projects are taken over with no second OPENED and no lost transition", async () => {
      const { db, metrics } = t.app;
      const interval = 30_000;
      // Two evaluators over one database, as two replicas would have, each with its shard leases.
      const replica = (holder: string) => {
        const shards = createShardLeases({ db: db.db, holder, intervalMs: interval, count: 8 });
        const evaluator = createEvaluator({
          db: db.db,
          metrics,
          now: t.clock.now,
          log: pino({ level: "silent" }),
          options: resolveAlertOptions(),
          shards,
        });
        return Object.assign(evaluator, { shards });
      };
      const a = replica("a");
      const b = replica("b");
      // Projects with an unexpected-stop rule on their VM, each VM stopped unexpectedly: every
      // instance fires at its first evaluation.
      const projects = Array.from({ length: 6 }, (_, i) => `shard-p${i}`);
      const vms: string[] = [];
      for (const projectId of projects) {
        const p = await t.seedProject(projectId, ["vm-1"]);
        vms.push(p.vms[0]);
        await t.clients(p.owner.session).alerts.saveAlertRule({
          projectName: p.projectName,
          id: randomUUID(),
          requestId: randomUUID(),
          expectedVersion: "0",
          spec: {
            displayName: "stopped",
            metricId: "vm_unexpected_stop",
            operator: "GREATER_THAN",
            threshold: 0,
            sustainedSeconds: 0,
            severity: "CRITICAL",
            allVms: true,
            repeatIntervalSeconds: 0,
          },
        });
        await t.admin.vms.recordVMStateEvent({
          vm: p.vms[0],
          state: "STOPPED",
          stopReason: "UNEXPECTED",
          timeUnix: BigInt(Math.floor(t.clock.now() / 1000) - 10),
        });
      }
      const evaluatedBy = async (...replicas: (typeof a)[]) => {
        const reports = [];
        for (const r of replicas) reports.push(await r.tick());
        // Between cycles each replica renews its leases every sixth of one (the evaluator's timer).
        for (let k = 0; k < 6; k++) {
          t.clock.advance(interval / 6);
          for (const r of replicas) await r.shards.acquire(t.clock.now());
        }
        return reports.map((r) => r?.projects ?? 0);
      };
      const events = async () =>
        (
          await db.db
            .selectFrom("incident_events as e")
            .innerJoin("incidents as i", "i.id", "e.incident_id")
            .select(["i.project_id", "e.kind"])
            .orderBy("e.time")
            .execute()
        ).map((e) => `${e.project_id} ${e.kind}`);

      // a starts alone and takes every shard; b joins; a hands half over after its next cycle.
      assert.deepEqual(await evaluatedBy(a), [projects.length]);
      for (let i = 0; i < 3; i++) await evaluatedBy(a, b);
      const split = await evaluatedBy(a, b);
      assert.equal(split[0] + split[1], projects.length, `each project once per cycle: ${split}`);
      assert.ok(split[0] > 0 && split[1] > 0, `both replicas evaluate: ${split}`);
      assert.deepEqual(
        (await events()).sort(),
        projects.map((p) => `${p} OPENED`).sort(),
        "one OPENED per instance, though both replicas evaluated them",
      );

      // b dies (no release). A VM of each project recovers: a takes b's shards within a cycle
      // and resolves every incident, b's projects' too, without opening any again.
      for (const vm of vms)
        await t.admin.vms.recordVMStateEvent({
          vm,
          state: "RUNNING",
          stopReason: "",
          timeUnix: BigInt(Math.floor(t.clock.now() / 1000) - 1),
        });
      const after: number[] = [];
      for (let i = 0; i < 3; i++) after.push((await evaluatedBy(a))[0]);
      assert.equal(after[2], projects.length, `a evaluates every project by the third cycle: ${after}`);
      const got = await events();
      for (const p of projects)
        assert.deepEqual(
          got.filter((e) => e.startsWith(`${p} `)),
          [`${p} OPENED`, `${p} RESOLVED`],
          p,
        );
    });

    it("a replica that takes a shard back reads the instances another replica changed meanwhile", async () => {
      const { db, metrics } = t.app;
      const interval = 30_000;
      await db.db.deleteFrom("leases").execute();
      const p = await t.seedProject("retake", ["vm-1"]);
      await t.clients(p.owner.session).alerts.saveAlertRule({
        projectName: p.projectName,
        id: randomUUID(),
        requestId: randomUUID(),
        expectedVersion: "0",
        spec: {
          displayName: "stopped",
          metricId: "vm_unexpected_stop",
          operator: "GREATER_THAN",
          threshold: 0,
          sustainedSeconds: 0,
          severity: "CRITICAL",
          allVms: true,
          repeatIntervalSeconds: 0,
        },
      });
      const replica = (holder: string) => {
        const shards = createShardLeases({ db: db.db, holder, intervalMs: interval, count: 1 });
        const evaluator = createEvaluator({
          db: db.db,
          metrics,
          now: t.clock.now,
          log: pino({ level: "silent" }),
          options: resolveAlertOptions(),
          shards,
        });
        return Object.assign(evaluator, { shards });
      };
      const a = replica("retake-a");
      const b = replica("retake-b");
      const vmState = (state: "STOPPED" | "RUNNING") =>
        t.admin.vms.recordVMStateEvent({
          vm: p.vms[0],
          state,
          stopReason: state === "STOPPED" ? "UNEXPECTED" : "",
          timeUnix: BigInt(Math.floor(t.clock.now() / 1000) - 1),
        });
      const events = async () =>
        (
          await db.db
            .selectFrom("incident_events as e")
            .innerJoin("incidents as i", "i.id", "e.incident_id")
            .select("e.kind")
            .where("i.project_id", "=", "retake")
            .orderBy("e.time")
            .execute()
        ).map((e) => e.kind);
      await vmState("STOPPED");
      t.clock.advance(2000);
      assert.ok(((await a.tick())?.projects ?? 0) >= 1);
      assert.deepEqual(await events(), ["OPENED"]);
      // a stalls past its lease: b takes the shard and sees the VM recover.
      t.clock.advance(3 * interval);
      await vmState("RUNNING");
      t.clock.advance(2000);
      assert.ok(((await b.tick())?.projects ?? 0) >= 1);
      assert.deepEqual(await events(), ["OPENED", "RESOLVED"]);
      // The VM stops again; b stops; a takes the shard back. What a wrote before (FIRING) is stale: it
      // must read the resolved instance and open a new incident.
      await vmState("STOPPED");
      await b.shards.release();
      t.clock.advance(2000);
      assert.ok(((await a.tick())?.projects ?? 0) >= 1);
      assert.deepEqual(await events(), ["OPENED", "RESOLVED", "OPENED"]);
      await a.shards.release();
    });

    it("a replica whose shard is taken over during its cycle writes nothing of it (the fence)", async () => {
      const { db, metrics } = t.app;
      const interval = 30_000;
      // The previous test's replicas' leases are not this test's.
      await db.db.deleteFrom("leases").execute();
      const p = await t.seedProject("fence", ["vm-1"]);
      await t.clients(p.owner.session).alerts.saveAlertRule({
        projectName: p.projectName,
        id: randomUUID(),
        requestId: randomUUID(),
        expectedVersion: "0",
        spec: {
          displayName: "CPU",
          metricId: "cpu_utilization_pct",
          operator: "GREATER_THAN",
          threshold: 90,
          sustainedSeconds: 0,
          severity: "WARNING",
          allVms: true,
          repeatIntervalSeconds: 0,
        },
      });
      // One shard, so both replicas want the same one. While a reads the store, its lease runs out and
      // b takes the shard and evaluates it.
      let during: (() => Promise<unknown>) | undefined;
      const replica = (holder: string, store: MetricsBackend) =>
        createEvaluator({
          db: db.db,
          metrics: store,
          now: t.clock.now,
          log: pino({ level: "silent" }),
          options: resolveAlertOptions(),
          shards: createShardLeases({ db: db.db, holder, intervalMs: interval, count: 1 }),
        });
      const stalling: MetricsBackend = {
        ...metrics,
        async select(...args) {
          const hook = during;
          during = undefined;
          await hook?.();
          return metrics.select(...args);
        },
      };
      const a = replica("fence-a", stalling);
      const b = replica("fence-b", metrics);
      const aAt = t.clock.now();
      let bReport: Awaited<ReturnType<typeof b.tick>>;
      during = async () => {
        t.clock.advance(3 * interval);
        bReport = await b.tick();
      };
      const aReport = await a.tick(aAt);
      assert.ok((bReport?.projects ?? 0) >= 1, "b took the shard and evaluated its projects");
      assert.equal(aReport?.fencedOut, 1, "a's batch was refused");
      const rule = await db.db
        .selectFrom("alert_rules")
        .select("last_eval_time")
        .where("project_id", "=", "fence")
        .executeTakeFirstOrThrow();
      assert.equal(rule.last_eval_time, bReport?.atMs, "the last evaluation is b's, not a's");
      assert.notEqual(bReport?.atMs, aAt);
    });
  });
}

describe("roles", () => {
  const sqlite = dialects[0].dialect;
  let ingestOnly: TestApp;
  let apiOnly: TestApp;
  before(async () => {
    ingestOnly = await startTestApp(sqlite, { roles: new Set(["ingest"]) });
    apiOnly = await startTestApp(sqlite, { roles: new Set(["api"]) });
  });
  after(async () => {
    await ingestOnly?.close();
    await apiOnly?.close();
  });

  it("an ingest replica answers remote write and no RPC; an api replica the reverse", async () => {
    const rpc = (base: string) =>
      fetch(`${base}/svc.admin.v1.ProjectService/ListProjects`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "connect-protocol-version": "1",
          authorization: `Bearer ${ADMIN_TOKEN}`,
        },
        body: "{}",
      });
    const write = (base: string) => fetch(`${base}/v1/ingest/prometheus/api/v1/write`, { method: "POST" });
    assert.equal((await rpc(ingestOnly.baseUrl)).status, 404);
    assert.equal((await write(ingestOnly.baseUrl)).status, 401, "the ingest route is there (no credential)");
    assert.equal((await rpc(apiOnly.baseUrl)).status, 200);
    assert.equal((await write(apiOnly.baseUrl)).status, 404);
    assert.equal((await fetch(`${ingestOnly.baseUrl}/healthz`)).status, 200, "health on every replica");
  });

  it("refuses an evaluator shard count that is not an integer from 1 to 1024, by name", () => {
    const dir = ingestOnly.app.config.dataDir;
    for (const bad of ["0", "2.5", "1025", "many"])
      assert.throws(
        () => loadConfig({ SVC_EVALUATOR_SHARDS: bad, SVC_DATA_DIR: dir }),
        /SVC_EVALUATOR_SHARDS/,
      );
    assert.equal(loadConfig({ SVC_EVALUATOR_SHARDS: "12", SVC_DATA_DIR: dir }).evaluatorShards, 12);
    assert.equal(loadConfig({ SVC_DATA_DIR: dir }).evaluatorShards, 60);
  });

  it("refuses an unknown role by name", () => {
    assert.throws(
      () => loadConfig({ SVC_ROLES: "api,cron", SVC_DATA_DIR: ingestOnly.app.config.dataDir }),
      /cron/,
    );
    assert.deepEqual(
      [...loadConfig({ SVC_ROLES: "api, notifier", SVC_DATA_DIR: ingestOnly.app.config.dataDir }).roles],
      ["api", "notifier"],
    );
  });
});
