import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, type ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "@svc/sdk/gen/google/rpc/error_details_pb";
import { newCpuRule } from "../../testing/alert-rules.ts";
import { rejectsWith } from "../../testing/assert.ts";
import { testDialects } from "../../testing/dialects.ts";
import { type PromFixture, S, startPromFixture } from "../../testing/promapi-fixture.ts";

/**
 * A VM's name is used whole (docs/api.md): a short or partial name is never resolved to a VM, on any
 * surface that takes one. Each refusal names the field.
 */
for (const { dialect, skip } of await testDialects()) {
  describe(`a VM name is used whole (${dialect.name})`, { skip }, () => {
    let f: PromFixture;
    before(async () => {
      f = await startPromFixture({}, { dialect });
    });
    after(() => f?.close());

    // vm-1 of projects/mine, shortened the ways a client might.
    const partial = [
      "vm-1",
      "dc-1/vms/vm-1",
      "vms/vm-1",
      "projects/mine/vms/vm-1",
      "locations/dc-1/vms/vm-1",
      "projects/mine/locations/dc-1/vms/vm-1/",
      " projects/mine/locations/dc-1/vms/vm-1",
    ];
    const whole = "projects/mine/locations/dc-1/vms/vm-1";
    const field = (e: ConnectError) => e.findDetails(ErrorInfoSchema)[0]?.metadata.field;

    it("QueryVMMonitoring refuses a partial name as invalid_argument naming `name`, and serves the whole one", async () => {
      const monitoring = f.t.clients(f.mine.key).monitoring;
      const q = (name: string) =>
        monitoring.queryVMMonitoring({
          name,
          metricIds: ["cpu_utilization_pct"],
          startTimeUnix: BigInt((f.endMs - 1800 * S) / S),
          endTimeUnix: BigInt(f.endMs / S),
          stepSeconds: 60,
        });
      for (const name of partial) {
        const e = await rejectsWith(q(name), Code.InvalidArgument, "INVALID_FIELD");
        assert.equal(field(e), "name", name);
      }
      const ok = await q(whole);
      assert.ok(ok.series[0]?.points.length, "the whole name is served");
    });

    it("ListVMMonitoring refuses a project given by its bare id, naming `projectName`", async () => {
      const monitoring = f.t.clients(f.mine.key).monitoring;
      for (const projectName of ["mine", "projects/mine/", "mine/vms"]) {
        const e = await rejectsWith(
          monitoring.listVMMonitoring({ projectName, inventoryOnly: true }),
          Code.InvalidArgument,
          "INVALID_FIELD",
        );
        assert.equal(field(e), "projectName", projectName);
      }
      const ok = await monitoring.listVMMonitoring({ projectName: f.mine.projectName, inventoryOnly: true });
      assert.deepEqual(
        ok.vms.map((v) => v.name),
        f.mine.vms,
      );
    });

    it("SaveAlertRule refuses a partial name in vmNames, naming the entry, and saves the whole one", async () => {
      const alerts = f.t.clients(f.mine.owner.session).alerts;
      for (const name of partial) {
        const e = await rejectsWith(
          alerts.saveAlertRule(newCpuRule(f.mine.projectName, { allVms: false, vmNames: [name] })),
          Code.InvalidArgument,
          "INVALID_FIELD",
        );
        assert.equal(field(e), "spec.vmNames[0]", name);
      }
      assert.equal((await alerts.listAlertRules({ projectName: f.mine.projectName })).rules.length, 0);
      const saved = await alerts.saveAlertRule(
        newCpuRule(f.mine.projectName, { allVms: false, vmNames: [whole] }),
      );
      assert.deepEqual(saved.spec?.vmNames, [whole]);
      await alerts.deleteAlertRule({ name: saved.name });
    });

    it("the Prometheus API selects a VM only by its whole name in `vm`, and a project only by its whole path", async () => {
      const at = String(f.endMs / S);
      const vmsOf = async (selector: string) => {
        const r = await f.get("mine", "api/v1/query", { query: `svc_vm_vcpus{${selector}}`, time: at });
        assert.equal(r.status, 200, r.text);
        return (r.json.data.result as { metric: { vm: string } }[]).map((s) => s.metric.vm);
      };
      for (const name of partial) assert.deepEqual(await vmsOf(`vm=${JSON.stringify(name)}`), [], name);
      assert.deepEqual(await vmsOf(`vm=${JSON.stringify(whole)}`), [whole]);
      // The project in the query base URL is `projects/<id>` whole: a bare id is no API.
      const bare = await fetch(`${f.t.baseUrl}/v1/monitoring/mine/prometheus/api/v1/query?query=1`, {
        headers: { authorization: `Bearer ${f.mine.key}` },
      });
      assert.equal(bare.status, 404);
      await bare.arrayBuffer();
    });
  });
}
