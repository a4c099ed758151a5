import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { newCpuRule } from "../../testing/alert-rules.ts";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import { labelsFromRecord } from "../storage/interface.ts";

const S = 1000;

/**
 * `allVms: true` watches the project's VMs as they are at each evaluation, not as they were when the
 * rule was saved (docs/alerts.md): a VM created after the save is evaluated and can fire.
 */
for (const { dialect, skip } of await testDialects()) {
  describe(`allVms covers VMs created after the save (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let p: SeededProject;
    before(async () => {
      t = await startTestApp(dialect);
      p = await t.seedProject("later", ["vm-1"]);
    });
    after(() => t?.close());

    async function cpu(vm: string, fromMs: number, toMs: number, value: number) {
      const a = t.app.tsdb.appender();
      const labels = labelsFromRecord({
        __name__: "svc_vm_cpu_utilization_pct",
        project_id: "later",
        vm,
        vm_id: vm.slice(vm.lastIndexOf("/") + 1),
        location: "dc-1",
        source: "hypervisor",
      });
      for (let ts = fromMs; ts < toMs; ts += 30 * S) a.append(labels, ts, value);
      await a.commit();
    }

    it("a VM created after an allVms rule was saved and applied is evaluated and fires", async () => {
      const owner = t.clients(p.owner.session);
      const t0 = t.clock.ms + 3600 * S;
      t.clock.ms = t0;
      const rule = await owner.alerts.saveAlertRule(newCpuRule(p.projectName));
      await t.app.evaluator.applyPending(t0);
      await cpu(p.vms[0], t0 - 300 * S, t0 + 300 * S, 20);
      await t.app.evaluator.runCycle(t0);
      const before = await owner.alerts.getAlertRule({ name: rule.name, includeInstances: true });
      assert.equal(before.syncStatus, "APPLIED");
      assert.deepEqual(before.instances, [], "vm-1 below the threshold: nothing pending or firing");

      // The new VM exists only now, after the rule's revision was applied and evaluated once.
      const vm = await t.admin.vms.createVM({
        parent: p.projectName,
        vmId: "vm-new",
        location: "dc-1",
        distribution: "debian-12",
        vcpus: 2,
        memoryBytes: 4n << 30n,
      });
      await cpu(vm.name, t0 - 60 * S, t0 + 300 * S, 97);
      t.clock.ms = t0 + 30 * S;
      await t.app.evaluator.runCycle(t0 + 30 * S);

      const now = await owner.alerts.getAlertRule({ name: rule.name, includeInstances: true });
      assert.equal(now.appliedVersion, before.appliedVersion, "no new revision was needed");
      const byVm = new Map(now.instances.map((i) => [i.vmName, i]));
      assert.equal(byVm.get(p.vms[0]), undefined);
      const fresh = byVm.get(vm.name);
      assert.equal(fresh?.state, "FIRING", "the VM created later is watched");
      assert.ok(fresh.incident);
      const incident = await owner.incidents.getIncident({ name: fresh.incident });
      assert.equal(incident.state, "OPEN");
      assert.equal(incident.vmName, vm.name);
    });
  });
}
