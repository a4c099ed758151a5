import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../../testing/dialects.ts";
import { ENGINE_KINDS, engineSkipReason, type RunningEngine, startEngine } from "../../../testing/engines.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../../testing/harness.ts";
import { pushAll, rwSeries } from "../../../testing/remote-write.ts";
import { metricIds, vmSelector } from "../metric-ids.ts";

/**
 * The whole app with SVC_METRICS_BACKEND=remote against each real engine: a collector writes through
 * svc's remote-write endpoint, and QueryVMMonitoring and svc's Prometheus API answer from the engine.
 */
const [sqlite] = await testDialects();
const S = 1000;

for (const kind of ENGINE_KINDS) {
  describe(`the app with SVC_METRICS_BACKEND=remote on ${kind}`, { skip: engineSkipReason(kind) }, () => {
    let engine: RunningEngine;
    let t: TestApp;
    let p: SeededProject;
    let key: string;

    before(async () => {
      engine = await startEngine(kind);
      t = await startTestApp(
        sqlite.dialect,
        {
          metricsBackend: "remote",
          remoteMetrics: {
            remoteWriteUrl: engine.remoteWriteUrl,
            queryUrl: engine.queryUrl,
            headers: {},
            // A down engine fails a write after 0.3 s of retries instead of 10 s.
            writeRetryBudgetMs: 300,
            writeBackoffMs: 50,
          },
        },
        // The engine keeps real time: VictoriaMetrics drops samples outside its retention window.
        { wallClock: true },
      );
      p = await t.seedProject("rmt", ["vm-a", "vm-b"]);
      const created = await t.clients(p.owner.session).keys.createKey({
        parent: p.projectName,
        displayName: "reader",
        capabilities: ["monitoring.read"],
        requestId: randomUUID(),
      });
      assert.ok(created.secret);
      key = created.secret;
    });
    after(async () => {
      await t?.close();
      await engine?.stop();
    });

    it("opens no embedded TSDB and reports the engine in /readyz", async () => {
      assert.throws(() => t.app.tsdb, /SVC_METRICS_BACKEND=remote: the embedded TSDB is not opened/);
      const res = await fetch(`${t.baseUrl}/readyz`);
      assert.equal(res.status, 200);
      assert.equal(((await res.json()) as { checks: Record<string, string> }).checks.metrics, "ok");
    });

    it("agrees: QueryVMMonitoring = svc's PromQL API, both answered from the engine", async () => {
      const vm = p.vms[0];
      const step = 30;
      const t0 = Math.floor((Date.now() - 600 * S) / (step * S)) * step * S;
      let counter = 5000;
      const n = 8;
      for (let i = 0; i <= n; i++) {
        const ts = t0 + i * step * S + 123;
        counter += (10 + i * 7) * 0.01 * step * 2; // (10 + 7i) % of 2 vCPUs
        await pushAll(t.baseUrl, t.app.config.collectorToken, [
          rwSeries("svc_vm_cpu_seconds_total", { vm }, [[ts, counter]]),
          rwSeries("svc_vm_vcpus", { vm }, [[ts, 2]]),
        ]);
      }
      await engine.flush();
      const startS = t0 / S + 2 * step;
      const endS = t0 / S + (n + 1) * step;
      const rpc = await t.clients(key).monitoring.queryVMMonitoring({
        name: vm,
        metricIds: ["cpu_utilization_pct"],
        startTimeUnix: BigInt(startS),
        endTimeUnix: BigInt(endS),
        stepSeconds: step,
      });
      const fromRpc = rpc.series[0].points.map((pt) => [Number(pt.timeUnix), pt.value]);
      assert.equal(fromRpc.length, n);
      for (const [i, [, v]] of fromRpc.entries())
        assert.ok(Math.abs(v - (10 + (i + 1) * 7)) < 1e-9, `point ${i}`);

      const def = metricIds.get("cpu_utilization_pct");
      assert.ok(def);
      const u = new URL(`${t.baseUrl}/v1/monitoring/projects/rmt/prometheus/api/v1/query_range`);
      u.searchParams.set("query", def.promql(vmSelector(vm), step, 30));
      u.searchParams.set("start", String(startS));
      u.searchParams.set("end", String(endS));
      u.searchParams.set("step", String(step));
      const body = (await (await fetch(u, { headers: { Authorization: `Bearer ${key}` } })).json()) as {
        data: { result: { metric: Record<string, string>; values: [number, string][] }[] };
      };
      assert.equal(body.data.result.length, 1, JSON.stringify(body));
      assert.equal(body.data.result[0].metric.project_id, undefined);
      const fromApi = body.data.result[0].values.map(([ts, v]) => [ts, Number(v)]);
      assert.deepEqual(
        fromApi.map(([ts]) => ts),
        fromRpc.map(([ts]) => ts),
      );
      for (let i = 0; i < fromApi.length; i++) assert.ok(Math.abs(fromApi[i][1] - fromRpc[i][1]) < 1e-9);

      // The engine holds the samples svc wrote, with the tenant label svc added.
      const direct = new URL(`${engine.queryUrl}/api/v1/query`);
      direct.searchParams.set("query", `count_over_time(svc_vm_cpu_utilization_pct{project_id="rmt"}[20m])`);
      const held = (await (await fetch(direct)).json()) as { data: { result: unknown[] } };
      assert.equal(held.data.result.length, 1);
    });

    it("answers a write 503 while the engine is down, and takes the writer's retry once it is back", async () => {
      const vm = p.vms[1];
      const ts = Math.floor(Date.now() / S) * S - 60 * S;
      const batch = [rwSeries("svc_vm_memory_total_bytes", { vm }, [[ts, 4096]])];
      await engine.down();
      try {
        await assert.rejects(
          pushAll(t.baseUrl, t.app.config.collectorToken, batch),
          /remote write answered 503/,
        );
        const ready = await fetch(`${t.baseUrl}/readyz`);
        assert.equal(ready.status, 503);
      } finally {
        await engine.up();
      }
      await pushAll(t.baseUrl, t.app.config.collectorToken, batch);
      await pushAll(t.baseUrl, t.app.config.collectorToken, batch);
      await engine.flush();
      const direct = new URL(`${engine.queryUrl}/api/v1/query`);
      direct.searchParams.set("query", `count_over_time(svc_vm_memory_total_bytes{project_id="rmt"}[5m])`);
      direct.searchParams.set("time", String(ts / S + 1));
      const held = (await (await fetch(direct)).json()) as {
        data: { result: { value: [number, string] }[] };
      };
      assert.equal(held.data.result[0]?.value[1], "1");
    });
  });
}
