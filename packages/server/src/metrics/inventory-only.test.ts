import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import { pushAll, rwSeries } from "../../testing/remote-write.ts";

const S = 1000;

/**
 * ListVMMonitoring with `inventoryOnly: true` lists VMs without querying metrics (docs/api.md): the
 * metrics store is never opened for reading. Every read of the embedded store starts with
 * `querier()`, so the test counts those on the app's store; a listing with metrics shows the count
 * sees reads at all.
 */
for (const { dialect, skip } of await testDialects()) {
  describe(`inventoryOnly listings read no metrics (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let p: SeededProject;
    let reads = 0;
    before(async () => {
      t = await startTestApp(dialect);
      p = await t.seedProject("inventory", ["vm-1", "vm-2", "vm-3"]);
      const nowMs = t.clock.now();
      const points: [number, number][] = [];
      for (let i = 10; i >= 0; i--) points.push([nowMs - i * 30 * S, 100 + (10 - i) * 15]);
      await pushAll(
        t.baseUrl,
        t.app.config.collectorToken,
        p.vms.flatMap((vm) => [
          rwSeries("svc_vm_cpu_seconds_total", { vm }, points),
          rwSeries(
            "svc_vm_vcpus",
            { vm },
            points.map(([ts]) => [ts, 2]),
          ),
        ]),
      );
      const store = t.app.tsdb;
      const querier = store.querier.bind(store);
      store.querier = () => {
        reads++;
        return querier();
      };
    });
    after(() => t?.close());

    const list = (inventoryOnly: boolean, pageToken = "") =>
      t.clients(p.owner.session).monitoring.listVMMonitoring({
        projectName: p.projectName,
        pageSize: 2,
        pageToken,
        inventoryOnly,
      });

    it("a listing with metrics reads the store (the count sees reads)", async () => {
      reads = 0;
      const r = await list(false);
      assert.ok(reads > 0);
      assert.ok(r.vms.some((v) => v.cpuUtilizationPct !== undefined));
    });

    it("inventoryOnly pages through every VM without one store read", async () => {
      reads = 0;
      const first = await list(true);
      const second = await list(true, first.nextPageToken ?? "");
      assert.equal(reads, 0);
      const vms = [...first.vms, ...second.vms];
      assert.deepEqual(
        vms.map((v) => [v.name, v.state]),
        p.vms.map((n) => [n, "RUNNING"]),
      );
      assert.ok(
        vms.every((v) => v.cpuUtilizationPct === undefined && v.quality === undefined),
        "no metric and no quality in an inventory listing",
      );
    });
  });
}
