import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";

const S = 1000;

/**
 * Issue 43, item 6: a stopped VM sends nothing, so its instance's "no data" is expected and is not
 * counted in a rule's instanceCounts.noData (docs/api.md#svcmonitoringv1alertservice); a running VM's is.
 */
for (const { dialect, skip } of await testDialects()) {
  describe(`a stopped VM's no data is not a rule's warning (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let p: SeededProject;
    before(async () => {
      t = await startTestApp(dialect);
      p = await t.seedProject("nodata", ["vm-1", "vm-2"]);
    });
    after(() => t?.close());

    it("counts no data on the running VM only", async () => {
      const owner = t.clients(p.owner.session);
      const rule = await owner.alerts.saveAlertRule({
        projectName: p.projectName,
        id: randomUUID(),
        requestId: randomUUID(),
        expectedVersion: "0",
        spec: {
          displayName: "CPU high",
          metricId: "cpu_utilization_pct",
          operator: "GREATER_THAN",
          threshold: 90,
          sustainedSeconds: 0,
          severity: "WARNING",
          allVms: true,
          destinationNames: [],
        },
      });
      // Neither VM sends a sample: both instances have no data.
      const now = t.clock.ms;
      await t.app.evaluator.runCycle(now);
      const before = await owner.alerts.getAlertRule({ name: rule.name, includeInstances: true });
      assert.equal(before.instances.filter((i) => i.flag === "NO_DATA").length, 2, "both flagged");
      assert.equal(before.instanceCounts?.noData, 2);
      await t.admin.vms.recordVMStateEvent({
        vm: p.vms[1],
        state: "STOPPED",
        stopReason: "USER",
        timeUnix: BigInt(Math.floor(now / S) + 1),
      });
      await t.app.evaluator.runCycle(now + 30 * S);
      const after = await owner.alerts.getAlertRule({ name: rule.name, includeInstances: true });
      const flagged = after.instances.filter((i) => i.flag === "NO_DATA").map((i) => i.vmName);
      assert.equal(after.instanceCounts?.noData, flagged.filter((v) => v !== p.vms[1]).length);
      assert.equal(after.instanceCounts?.noData, 1, "the running VM's no data only");
      const listed = (await owner.alerts.listAlertRules({ projectName: p.projectName })).rules[0];
      assert.equal(listed.instanceCounts?.noData, 1);
    });
  });
}
