import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import { isStaleMarker, type LabelMatcher } from "../storage/interface.ts";
import { testDialects } from "../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../testing/harness.ts";
import { startDemoCollector } from "./demo-collector.ts";

const [sqlite] = await testDialects();
const eq = (name: string, value: string): LabelMatcher => ({ type: "=", name, value });
const HOUR = 3_600_000;

describe("demo collector (simulator through the remote-write endpoint)", () => {
  let t: TestApp;
  let p: SeededProject;
  const progress: string[] = [];
  before(async () => {
    t = await startTestApp(sqlite.dialect);
    p = await t.seedProject("sim", ["a-1", "b-1", "c-1", "d-1"]);
    const c = await startDemoCollector({
      db: t.app.db.db,
      baseUrl: t.baseUrl,
      collectorToken: t.app.config.collectorToken,
      dataDir: t.app.config.dataDir,
      log: pino({ level: "silent" }),
      now: t.clock.now,
      backfillMs: 4 * HOUR,
      onProgress: (l) => progress.push(l),
    });
    c.stop();
  });
  after(() => t?.close());

  it("backfills history with a progress line", () => {
    assert.match(progress[0], /backfill of simulated telemetry for 4 VMs: \d+%/);
    assert.match(progress.at(-1)!, /done \(240 min\)/);
  });

  it("makes every VM's series readable through MetricsBackend, tenant-scoped", async () => {
    const now = t.clock.now();
    for (const vm of p.vms) {
      const util = await t.app.metrics.select(
        "sim",
        [eq("__name__", "svc_vm_cpu_utilization_pct"), eq("vm", vm)],
        now - 4 * HOUR,
        now,
      );
      assert.equal(util.length, 1, vm);
      assert.ok(util[0].timestamps.length > 300, `${vm}: ${util[0].timestamps.length} points`);
      for (let i = 0; i < util[0].values.length; i++) {
        const v = util[0].values[i];
        assert.ok(isStaleMarker(util[0].values, i) || (v >= 0 && v <= 100), `${vm} utilization ${v}`);
      }
    }
    assert.equal(
      (await t.app.metrics.select("other", [eq("__name__", "svc_vm_vcpus")], now - 4 * HOUR, now)).length,
      0,
    );
  });

  it("shows the resize in svc_vm_vcpus without rewriting earlier utilization", async () => {
    const now = t.clock.now();
    const vcpus = await t.app.metrics.select(
      "sim",
      [eq("__name__", "svc_vm_vcpus"), eq("vm", p.vms[0])],
      now - 4 * HOUR,
      now,
    );
    assert.deepEqual(new Set(vcpus[0].values), new Set([2, 4]));
    // Each stored utilization point equals Δcpu / (Δt × vCPUs of that interval): recompute every
    // point from the raw counter and the vCPU series, on both sides of the resize.
    const cpu = (
      await t.app.metrics.select(
        "sim",
        [eq("__name__", "svc_vm_cpu_seconds_total"), eq("vm", p.vms[0])],
        now - 4 * HOUR,
        now,
      )
    )[0];
    const util = (
      await t.app.metrics.select(
        "sim",
        [eq("__name__", "svc_vm_cpu_utilization_pct"), eq("vm", p.vms[0])],
        now - 4 * HOUR,
        now,
      )
    )[0];
    const vcpuAt = new Map<number, number>();
    for (let i = 0; i < vcpus[0].timestamps.length; i++)
      vcpuAt.set(vcpus[0].timestamps[i], vcpus[0].values[i]);
    const utilAt = new Map<number, number>();
    for (let i = 0; i < util.timestamps.length; i++) utilAt.set(util.timestamps[i], util.values[i]);
    const seen = new Set<number>();
    for (let i = 1; i < cpu.timestamps.length; i++) {
      const t1 = cpu.timestamps[i];
      const got = utilAt.get(t1);
      if (got === undefined || isStaleMarker(cpu.values, i) || isStaleMarker(cpu.values, i - 1)) continue;
      const delta = cpu.values[i] >= cpu.values[i - 1] ? cpu.values[i] - cpu.values[i - 1] : cpu.values[i];
      const n = vcpuAt.get(t1)!;
      seen.add(n);
      assert.ok(Math.abs(got - (delta / ((t1 - cpu.timestamps[i - 1]) / 1000) / n) * 100) < 1e-9, `at ${t1}`);
    }
    assert.deepEqual(seen, new Set([2, 4]), "points on both sides of the resize were checked");
  });

  it("records the simulated unexpected stop in the inventory and ends the series with staleness markers", async () => {
    const events = await t.admin.vms.listVMStateEvents({ vm: p.vms[2] });
    assert.deepEqual(
      events.events.map((e) => [e.state, e.stopReason]),
      [
        ["STOPPED", "UNEXPECTED"],
        ["RUNNING", ""],
      ],
    );
    const now = t.clock.now();
    const cpu = await t.app.metrics.select(
      "sim",
      [eq("__name__", "svc_vm_cpu_seconds_total"), eq("vm", p.vms[2])],
      now - 4 * HOUR,
      now,
    );
    let markers = 0;
    for (let i = 0; i < cpu[0].values.length; i++) if (isStaleMarker(cpu[0].values, i)) markers++;
    assert.equal(markers, 1);
  });
});
