import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import { createEvaluator } from "./alerts/evaluator.ts";
import { resolveAlertOptions } from "./alerts/options.ts";
import { holdLease } from "./cluster/lease.ts";
import { loadConfig } from "./config.ts";
import { testDialects } from "./testing/dialects.ts";
import { ADMIN_TOKEN, startTestApp, type TestApp } from "./testing/harness.ts";

const dialects = await testDialects();

for (const { dialect, skip } of dialects) {
  describe(`evaluator leadership across replicas (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect);
    });
    after(() => t?.close());

    it("only the lease holder runs a cycle; another takes over when it stops renewing", async () => {
      const { db, metrics } = t.app;
      const ttl = 90_000;
      // Two evaluators over one database, as two replicas would have.
      const replica = (holder: string) =>
        createEvaluator({
          db: db.db,
          metrics,
          now: t.clock.now,
          log: pino({ level: "silent" }),
          options: resolveAlertOptions(),
          leader: () => holdLease(db.db, "alert-evaluator-test", holder, t.clock.now(), ttl),
        });
      const a = replica("a");
      const b = replica("b");
      assert.ok(await a.tick(), "a takes the lease and evaluates");
      assert.equal(await b.tick(), undefined, "b waits");
      t.clock.advance(30_000);
      assert.ok(await a.tick(), "a renews");
      assert.equal(await b.tick(), undefined);
      // a stops (crash): after the lease runs out, b evaluates.
      t.clock.advance(ttl);
      assert.ok(await b.tick(), "b takes over");
      assert.equal(await a.tick(), undefined, "a, back, does not evaluate beside b");
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
