import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { testDialects } from "../../testing/dialects.ts";
import { startTestApp, type TestApp } from "../../testing/harness.ts";

async function invalid(p: Promise<unknown>, field: RegExp): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    const err = ConnectError.from(e);
    assert.equal(err.code, Code.InvalidArgument, err.message);
    assert.match(err.rawMessage, field);
    return true;
  });
}

for (const { dialect, skip } of await testDialects()) {
  describe(`inventory (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect);
      await t.admin.projects.createProject({ projectId: "inv", displayName: "Inventory" });
    });
    after(() => t?.close());
    const base = {
      parent: "projects/inv",
      location: "dc-1",
      distribution: "debian-12",
      vcpus: 2,
      memoryBytes: 1n << 30n,
    };

    it("creates VMs with full names and validates each field by name", async () => {
      const vm = await t.admin.vms.createVM({ ...base, vmId: "app-1", monitoringLevel: "EXPANDED" });
      assert.equal(vm.name, "projects/inv/locations/dc-1/vms/app-1");
      assert.equal(vm.state, "RUNNING");
      await invalid(t.admin.vms.createVM({ ...base, vmId: "Bad_Id" }), /^vmId: /);
      await invalid(t.admin.vms.createVM({ ...base, vmId: "x-1", vcpus: 0 }), /^vcpus: /);
      await invalid(t.admin.projects.createProject({ projectId: "X" }), /^projectId: /);
      await assert.rejects(
        t.admin.vms.createVM({ ...base, vmId: "app-1" }),
        (e: unknown) => ConnectError.from(e).code === Code.AlreadyExists,
      );
    });

    it("offers expanded monitoring only for the supported distributions in dc-1", async () => {
      await invalid(
        t.admin.vms.createVM({ ...base, vmId: "e-1", location: "dc-2", monitoringLevel: "EXPANDED" }),
        /^monitoringLevel: .*dc-1/,
      );
      await invalid(
        t.admin.vms.createVM({ ...base, vmId: "e-2", distribution: "rocky-9", monitoringLevel: "EXPANDED" }),
        /^monitoringLevel: .*debian-12/,
      );
      const ok = await t.admin.vms.createVM({
        ...base,
        vmId: "e-3",
        distribution: "ubuntu-24.04",
        monitoringLevel: "EXPANDED",
      });
      assert.equal(ok.monitoringLevel, "EXPANDED");
    });

    it("records state events; a stop needs a reason", async () => {
      const vm = (await t.admin.vms.createVM({ ...base, vmId: "s-1" })).name;
      await invalid(t.admin.vms.recordVMStateEvent({ vm, state: "STOPPED" }), /^stopReason: /);
      await invalid(
        t.admin.vms.recordVMStateEvent({ vm, state: "RUNNING", stopReason: "USER" }),
        /^stopReason: /,
      );
      await t.admin.vms.recordVMStateEvent({
        vm,
        state: "STOPPED",
        stopReason: "MAINTENANCE",
        timeUnix: 1_800_000_000n,
      });
      assert.equal((await t.admin.vms.getVM({ name: vm })).state, "STOPPED");
      const events = await t.admin.vms.listVMStateEvents({ vm });
      assert.deepEqual(
        events.events.map((e) => [e.state, e.stopReason, e.timeUnix]),
        [["STOPPED", "MAINTENANCE", 1_800_000_000n]],
      );
    });

    it("keeps maintenance windows and refuses VMs of another project", async () => {
      await t.admin.projects.createProject({ projectId: "inv-two" });
      const foreign = (await t.admin.vms.createVM({ ...base, parent: "projects/inv-two", vmId: "f-1" })).name;
      await invalid(
        t.admin.vms.createMaintenanceWindow({
          parent: "projects/inv",
          vms: [foreign],
          startTimeUnix: 10n,
          endTimeUnix: 20n,
        }),
        /^vms\[0\]: /,
      );
      await invalid(
        t.admin.vms.createMaintenanceWindow({ parent: "projects/inv", startTimeUnix: 20n, endTimeUnix: 10n }),
        /^endTimeUnix: /,
      );
      const w = await t.admin.vms.createMaintenanceWindow({
        parent: "projects/inv",
        startTimeUnix: 10n,
        endTimeUnix: 20n,
        reason: "kernel",
      });
      assert.match(w.name, /^projects\/inv\/maintenanceWindows\//);
      assert.equal((await t.admin.vms.listMaintenanceWindows({ parent: "projects/inv" })).windows.length, 1);
    });

    it("hides deleted VMs from the monitoring listing", async () => {
      const vm = (await t.admin.vms.createVM({ ...base, vmId: "gone-1" })).name;
      await t.admin.vms.deleteVM({ name: vm });
      const user = await t.admin.users.createUser({
        email: "inv-owner@example.com",
        password: "correct horse battery",
      });
      await t.admin.projects.setMember({ project: "projects/inv", user: user.name, role: "viewer" });
      const { sessionToken } = await t
        .clients()
        .sessions.login({ email: "inv-owner@example.com", password: "correct horse battery" });
      const list = await t
        .clients(sessionToken)
        .monitoring.listVMMonitoring({ projectName: "projects/inv", inventoryOnly: true });
      assert.ok(!list.vms.some((v) => v.name === vm));
      assert.ok(list.vms.length >= 3);
    });
  });
}
