import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../testing/dialects.ts";
import { engineSkipReason, type RunningEngine, startEngine } from "../../testing/engines.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import { pushAll, rwSeries } from "../../testing/remote-write.ts";
import type { Config } from "../config.ts";

const S = 1000;

/**
 * ListVMMonitoring with `inventoryOnly: true` lists VMs without querying metrics (docs/api.md): the
 * metrics store is never read. Every read goes through the app's MetricsBackend, whose methods the test
 * counts (on the embedded store also `querier()`, where every read of the store starts), on the embedded
 * store and on the remote backend over VictoriaMetrics, each with SQLite and PostgreSQL; a listing with
 * metrics shows the counts see reads at all.
 */
const backends = [
  { name: "embedded", skip: undefined },
  { name: "remote, VictoriaMetrics", skip: engineSkipReason("victoria-metrics") },
] as const;

for (const { dialect, skip } of await testDialects()) {
  for (const backend of backends) {
    describe(`inventoryOnly listings read no metrics (${backend.name}, ${dialect.name})`, {
      skip: skip ?? backend.skip,
    }, () => {
      let t: TestApp;
      let engine: RunningEngine | undefined;
      let p: SeededProject;
      /** Calls of each MetricsBackend method (and the embedded store's querier()). */
      const reads = new Map<string, number>();
      const total = () => [...reads.values()].reduce((a, b) => a + b, 0);
      before(async () => {
        let overrides: Partial<Config> = {};
        if (backend.name !== "embedded") {
          engine = await startEngine("victoria-metrics");
          overrides = {
            metricsBackend: "remote",
            remoteMetrics: { remoteWriteUrl: engine.remoteWriteUrl, queryUrl: engine.queryUrl, headers: {} },
          };
        }
        t = await startTestApp(dialect, overrides);
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
        await engine?.flush();
        const count = (name: string) => reads.set(name, (reads.get(name) ?? 0) + 1);
        const metrics = t.app.metrics as unknown as Record<string, unknown>;
        for (const [name, v] of Object.entries(metrics)) {
          if (typeof v !== "function") continue;
          const f = v as (...args: unknown[]) => unknown;
          metrics[name] = (...args: unknown[]) => {
            count(name);
            return f.apply(t.app.metrics, args);
          };
        }
        if (backend.name === "embedded") {
          const store = t.app.tsdb;
          const querier = store.querier.bind(store);
          store.querier = () => {
            count("tsdb.querier");
            return querier();
          };
        }
      });
      after(async () => {
        await t?.close();
        await engine?.stop();
      });

      const list = (inventoryOnly: boolean, pageToken = "") =>
        t.clients(p.owner.session).monitoring.listVMMonitoring({
          projectName: p.projectName,
          pageSize: 2,
          pageToken,
          inventoryOnly,
        });

      it("a listing with metrics reads the store (the counts see reads)", async () => {
        reads.clear();
        const r = await list(false);
        assert.ok((reads.get("latest") ?? 0) > 0, JSON.stringify([...reads]));
        if (backend.name === "embedded") assert.ok((reads.get("tsdb.querier") ?? 0) > 0);
        assert.ok(r.vms.some((v) => v.cpuUtilizationPct !== undefined));
      });

      it("inventoryOnly pages through every VM without one store read", async () => {
        reads.clear();
        const first = await list(true);
        const second = await list(true, first.nextPageToken ?? "");
        assert.equal(total(), 0, JSON.stringify([...reads]));
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
}
