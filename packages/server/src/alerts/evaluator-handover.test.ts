import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import { waitFor } from "../../testing/assert.ts";
import { testDialects } from "../../testing/dialects.ts";
import { startTestApp, type TestApp } from "../../testing/harness.ts";
import { cpuRuleSpec } from "../../testing/rules.ts";
import { createShardLeases, type ShardLeases, shardOf } from "../cluster/shards.ts";
import { createEvaluator, type Evaluator } from "./evaluator.ts";
import { resolveAlertOptions } from "./options.ts";

/** Long enough that nothing here waits for a cycle: what happens does so at start or at a renewal. */
const INTERVAL = 60_000;
const COUNT = 4;
const PROJECTS = ["ho-a", "ho-b", "ho-c", "ho-d", "ho-e", "ho-f"];

/**
 * Issue 48: a starting evaluator takes and evaluates its shards at once, and a stopping one's shards
 * are taken and evaluated by another at its next lease renewal (a sixth of a cycle), not at its next cycle.
 */
for (const { dialect, skip } of await testDialects()) {
  describe(`evaluator hand-over between replicas (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    const running: Evaluator[] = [];
    before(async () => {
      t = await startTestApp(dialect);
      for (const id of PROJECTS) {
        const p = await t.seedProject(id, ["vm-1"]);
        await t.clients(p.owner.session).alerts.saveAlertRule({
          projectName: p.projectName,
          id: randomUUID(),
          requestId: randomUUID(),
          expectedVersion: "0",
          spec: cpuRuleSpec(),
        });
      }
    });
    after(async () => {
      for (const e of running) await e.stop();
      await t?.close();
    });

    /** An evaluator replica whose batch writes (one per shard with projects) are recorded with their time. */
    function replica(name: string) {
      const leases = createShardLeases({
        db: t.app.db.db,
        holder: `${dialect.name}-handover-${name}`,
        intervalMs: INTERVAL,
        count: COUNT,
      });
      const written = new Map<number, number>();
      const shards: ShardLeases = {
        count: leases.count,
        renewIntervalMs: leases.renewIntervalMs,
        get status() {
          return leases.status;
        },
        acquire: (nowMs, o) => leases.acquire(nowMs, o),
        release: () => leases.release(),
        async fence(tx, shard, nowMs) {
          const ok = await leases.fence(tx, shard, nowMs);
          if (ok) written.set(shard, Date.now());
          return ok;
        },
      };
      const evaluator = createEvaluator({
        db: t.app.db.db,
        metrics: t.app.metrics,
        now: () => Date.now(),
        log: pino({ level: "silent" }),
        options: resolveAlertOptions({ evaluationIntervalMs: INTERVAL }),
        shards,
      });
      running.push(evaluator);
      return { evaluator, leases, written };
    }

    it("evaluates at start, and takes over a stopped replica's shards at its next renewal", async () => {
      const withProjects = new Set(PROJECTS.map((p) => shardOf(p, COUNT)));
      const a = replica("a");
      a.evaluator.start();
      // Half a cycle: the first cycle runs at start, not after an interval.
      await waitFor("a's first cycle", INTERVAL / 2, async () =>
        a.written.size === withProjects.size ? true : undefined,
      );
      assert.equal(a.leases.status.held, COUNT);

      // b starts while a holds every shard: b is a member at once, with nothing free to take.
      const b = replica("b");
      b.evaluator.start();
      await waitFor("b's first renewal", INTERVAL / 2, async () =>
        b.leases.status.unowned !== undefined ? true : undefined,
      );
      assert.equal(b.leases.status.held, 0);
      assert.equal(b.written.size, 0);

      // a stops as on SIGTERM (app.close: stop, then release): b takes and evaluates every shard at its
      // next renewal (a sixth of the cycle), well before its own next cycle.
      await a.evaluator.stop();
      await a.leases.release();
      const released = Date.now();
      await waitFor("b to evaluate a's shards", INTERVAL / 2, async () =>
        b.written.size === withProjects.size ? true : undefined,
      );
      assert.ok(Math.min(...b.written.values()) >= released, "b evaluated them after the release");
      assert.equal(b.leases.status.held, COUNT);
      assert.equal(b.leases.status.unowned, 0);
      await b.evaluator.stop();
      await b.leases.release();
    });
  });
}
