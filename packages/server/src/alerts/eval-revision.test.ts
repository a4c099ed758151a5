import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import { newCpuRule } from "../../testing/alert-rules.ts";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import { type DbHandle, openDb } from "../db/database.ts";
import { createEvaluator, type Evaluator } from "./evaluator.ts";
import { resolveAlertOptions } from "./options.ts";
import { purgeDeletedRules } from "./persistence.ts";

const S = 1000;

/**
 * The evaluator keeps its rule list and the projects' VMs under the database's eval revision
 * (migration 0016_eval_revision, docs/decisions.md): a change made through another replica (or by hand)
 * is seen by the next cycle exactly as when every cycle read them.
 */
for (const { dialect, skip } of await testDialects()) {
  describe(`the evaluator's rule list and VMs under the eval revision (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let p: SeededProject;
    // Replica B: its own connection and evaluator, which keeps the rule list and VMs between cycles;
    // replica A is the test app, through which rules and VMs change.
    let b: DbHandle;
    let evB: Evaluator;
    let at: number;
    before(async () => {
      t = await startTestApp(dialect);
      p = await t.seedProject("rev", ["vm-1", "vm-2"]);
      b = await openDb({ databaseUrl: t.app.config.databaseUrl, dataDir: t.app.config.dataDir });
      evB = createEvaluator({
        db: b.db,
        metrics: t.app.metrics,
        now: t.clock.now,
        log: pino({ level: "silent" }),
        options: resolveAlertOptions(),
      });
      at = t.clock.ms + 3600 * S;
    });
    after(async () => {
      await b?.close();
      await t?.close();
    });

    const owner = () => t.clients(p.owner.session);
    /** One cycle of replica B, 30 s after the last: the rules and instances it evaluated. */
    async function cycleOnB() {
      at += 30 * S;
      t.clock.ms = at;
      const r = await evB.runCycle(at);
      return { rules: r.rules, instances: r.instances };
    }
    const revisions = async () =>
      Object.fromEntries(
        (await b.db.selectFrom("eval_revision").select(["id", "revision"]).orderBy("id").execute()).map(
          (r) => [r.id, Number(r.revision)],
        ),
      );

    it("sees rules created, edited, deleted and purged, and VMs added, changed and removed through A", async () => {
      assert.deepEqual(await cycleOnB(), { rules: 0, instances: 0 });
      const r1 = await owner().alerts.saveAlertRule(newCpuRule(p.projectName));
      assert.deepEqual(await cycleOnB(), { rules: 1, instances: 2 }, "a rule created: applied and evaluated");
      assert.deepEqual(await cycleOnB(), { rules: 1, instances: 2 }, "nothing changed: the same");

      // The evaluation's own writes (last_eval_time, the instance rows) leave the revisions as they are.
      const before = await revisions();
      assert.deepEqual(await cycleOnB(), { rules: 1, instances: 2 });
      const evaluated = await b.db
        .selectFrom("alert_rules")
        .select("last_eval_time")
        .where("id", "=", r1.name.split("/").pop() ?? "")
        .executeTakeFirstOrThrow();
      assert.equal(Number(evaluated.last_eval_time), at, "the cycle wrote last_eval_time");
      assert.deepEqual(await revisions(), before, "last_eval_time and the instances do not bump");

      // A VM added, its state changed to DELETED by hand, then removed.
      await t.admin.vms.createVM({
        parent: p.projectName,
        vmId: "vm-3",
        location: "dc-1",
        distribution: "debian-12",
        vcpus: 2,
        memoryBytes: 4n << 30n,
      });
      assert.ok((await revisions())[2] > before[2], "a VM's creation bumps the VMs revision");
      assert.deepEqual(await cycleOnB(), { rules: 1, instances: 3 }, "a VM added");
      await t.app.db.db.updateTable("vms").set({ state: "DELETED" }).where("vm_id", "=", "vm-3").execute();
      assert.deepEqual(await cycleOnB(), { rules: 1, instances: 2 }, "a VM's state changed to DELETED");
      await t.app.db.db.updateTable("vms").set({ state: "RUNNING" }).where("vm_id", "=", "vm-3").execute();
      assert.deepEqual(await cycleOnB(), { rules: 1, instances: 3 }, "and back");
      await t.app.db.db.deleteFrom("vms").where("vm_id", "=", "vm-3").execute();
      assert.deepEqual(await cycleOnB(), { rules: 1, instances: 2 }, "a VM's row removed");
      // A VM's guest sender (written with samples) is not what the evaluator reads: no bump.
      const quiet = await revisions();
      await t.app.db.db
        .updateTable("vms")
        .set({ guest_sender: "agent", guest_seen_time: at })
        .where("vm_id", "=", "vm-1")
        .execute();
      assert.deepEqual(await revisions(), quiet, "guest_sender/guest_seen_time do not bump");

      // A rule edited to watch one VM: B applies the revision and evaluates it.
      const edited = await owner().alerts.saveAlertRule({
        ...newCpuRule(p.projectName, { allVms: false, vmNames: [p.vms[0]] }),
        id: r1.name.split("/").pop() ?? "",
        expectedVersion: r1.version,
      });
      assert.deepEqual(await cycleOnB(), { rules: 1, instances: 1 }, "a rule edited");

      // Deleted, then (while B keeps its list) another created and the deleted one purged by A.
      await owner().alerts.deleteAlertRule({
        name: edited.name,
        expectedVersion: edited.version,
      });
      assert.deepEqual(await cycleOnB(), { rules: 0, instances: 0 }, "a rule deleted");
      await owner().alerts.saveAlertRule(newCpuRule(p.projectName));
      await purgeDeletedRules(t.app.db.db, at + 3600 * S);
      const gone = await b.db
        .selectFrom("alert_rules")
        .select("id")
        .where("id", "=", edited.name.split("/").pop() ?? "")
        .execute();
      assert.deepEqual(gone, [], "purged");
      assert.deepEqual(await cycleOnB(), { rules: 1, instances: 2 }, "created beside another's purge");
      // Purged by hand with nothing else changing: the rule list shrinks.
      await t.app.db.db.deleteFrom("alert_instances").execute();
      await t.app.db.db.deleteFrom("alert_rule_revisions").execute();
      await t.app.db.db
        .deleteFrom("incidents")
        .execute()
        .catch(() => {});
      await t.app.db.db.deleteFrom("alert_rules").execute();
      assert.deepEqual(await cycleOnB(), { rules: 0, instances: 0 }, "every rule's row removed");
    });
  });
}
