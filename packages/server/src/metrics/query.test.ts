import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code } from "@connectrpc/connect";
import { ErrorInfoSchema } from "@svc/sdk/gen/google/rpc/error_details_pb";
import type { QueryVMMonitoringResponse } from "@svc/sdk/gen/svc/monitoring/v1/monitoring_pb";
import { rejectsWith } from "../../testing/assert.ts";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import { pushAll, rwSeries } from "../../testing/remote-write.ts";
import type { Querier, Queryable } from "../storage/interface.ts";
import { createMetricsBackend } from "./backend.ts";
import { createProjectLimiter } from "./concurrency.ts";
import { resolveMetricsOptions } from "./options.ts";
import { coverage } from "./quality.ts";
import { planRange, queryVmMonitoring } from "./query.ts";

const [sqlite] = await testDialects();
const S = 1000;
const DAY = 86_400;

describe("planRange()", () => {
  const o = resolveMetricsOptions();
  const now = Date.UTC(2026, 10, 1, 12, 0, 7);
  const nowS = Math.floor(now / 1000);
  const req = (startS: number, endS: number, step: number) => ({
    name: "projects/p/locations/dc-1/vms/v",
    metricIds: ["cpu_utilization_pct"],
    startTimeUnix: BigInt(startS),
    endTimeUnix: BigInt(endS),
    stepSeconds: step,
  });
  const reasonOf = (fn: () => unknown) => {
    try {
      fn();
    } catch (e) {
      return e as { reason: string; metadata: Record<string, string>; message: string };
    }
    assert.fail("expected a refusal");
  };

  it("refuses 7 days at 60 s with a suggested step, and serves 7 days at 1800 s", () => {
    const e = reasonOf(() => planRange(req(nowS - 7 * DAY, nowS, 60), now, o));
    assert.equal(e.reason, "POINT_BUDGET_EXCEEDED");
    assert.equal(e.metadata.maxPoints, "10000");
    assert.equal(e.metadata.suggestedStepSeconds, "90");
    assert.ok(Number(e.metadata.requestedPoints) > 10_000);
    const p = planRange(req(nowS - 7 * DAY, nowS, 1800), now, o);
    assert.equal((p.endS - p.startS) / 1800 + 1 <= 10_000, true);
    // The suggestion itself fits.
    const s = planRange(req(nowS - 7 * DAY, nowS, 90), now, o);
    assert.ok((s.endS - s.startS) / 90 + 1 <= 10_000);
  });

  it("aligns to the step and clamps to now and to retention", () => {
    const p = planRange(req(nowS - 3600 - 7, nowS + 500, 60), now, o);
    assert.equal(p.startS % 60, 0);
    assert.equal(p.endS % 60, 0);
    assert.ok(p.startS >= nowS - 3600 - 7 && p.startS - (nowS - 3600 - 7) < 60);
    assert.equal(p.endS, Math.floor(nowS / 60) * 60);
    const c = planRange(req(nowS - 30 * DAY, nowS, 3600), now, o);
    assert.ok(c.startS >= nowS - 7 * DAY);
    assert.equal(
      reasonOf(() => planRange(req(nowS - 30 * DAY, nowS - 20 * DAY, 60), now, o)).reason,
      "RANGE_OUTSIDE_RETENTION",
    );
  });

  it("refuses a step under 30 s and a reversed range, naming the field", () => {
    assert.match(reasonOf(() => planRange(req(nowS - 60, nowS, 29), now, o)).message, /^stepSeconds/);
    assert.match(reasonOf(() => planRange(req(nowS, nowS - 60, 30), now, o)).message, /^endTimeUnix/);
  });
});

describe("coverage()", () => {
  it("counts expected and present points and reports runs of missing steps", () => {
    const c = coverage([0, 30, 120, 150], 0, 210, 30);
    assert.equal(c.expectedPoints, 8);
    assert.equal(c.presentPoints, 4);
    assert.deepEqual(c.gaps, [
      { startTimeUnix: 60, endTimeUnix: 90 },
      { startTimeUnix: 180, endTimeUnix: 210 },
    ]);
  });
});

describe("QueryVMMonitoring", () => {
  let t: TestApp;
  let p: SeededProject;
  let other: SeededProject;
  let t0: number; // ms, first sample
  let nowMs: number;
  const util = (i: number) => 10 + (i % 7) * 5; // %, never 0: any 0 in a response would be invented
  const gapIdx = (i: number) => i >= 40 && i < 50; // samples never delivered
  before(async () => {
    t = await startTestApp(sqlite.dialect);
    p = await t.seedProject("query", ["vm-a", "vm-b", "vm-c"]);
    other = await t.seedProject("query-other", ["vm-x"]);
    nowMs = t.clock.now();
    t0 = nowMs - 120 * 30 * S;
    const token = t.app.config.collectorToken;
    const cpu: [number, number][] = [];
    const disk: [number, number][] = [];
    const memT: [number, number][] = [];
    const memF: [number, number][] = [];
    let c = 1000;
    for (let i = 0; i <= 120; i++) {
      if (i > 0) c += (util(i) / 100) * 30 * 2;
      if (gapIdx(i)) continue;
      const ts = t0 + i * 30 * S;
      cpu.push([ts, c]);
      // A counter reset (restart) at i = 80.
      disk.push([ts, i < 80 ? 1000 * i : 1000 * (i - 80) + 500]);
      memT.push([ts, 4000]);
      memF.push([ts, 1000 + i]);
    }
    const a = p.vms[0];
    await pushAll(t.baseUrl, token, [
      rwSeries("svc_vm_cpu_seconds_total", { vm: a }, cpu),
      rwSeries("svc_vm_disk_read_bytes_total", { vm: a, device: "vda" }, disk),
      rwSeries("svc_vm_memory_total_bytes", { vm: a }, memT),
      rwSeries("svc_vm_memory_free_bytes", { vm: a }, memF),
    ]);
    // vm-b: telemetry stopped 10 minutes ago.
    await pushAll(t.baseUrl, token, [
      rwSeries(
        "svc_vm_cpu_seconds_total",
        { vm: p.vms[1] },
        cpu.filter(([ts]) => ts <= nowMs - 600 * S),
      ),
    ]);
  });
  after(() => t?.close());

  const q = (name: string, metricIds: string[], startS: number, endS: number, stepSeconds: number) =>
    t.clients(p.owner.session).monitoring.queryVMMonitoring({
      name,
      metricIds,
      startTimeUnix: BigInt(startS),
      endTimeUnix: BigInt(endS),
      stepSeconds,
    });
  const noZeros = (r: QueryVMMonitoringResponse) => {
    for (const s of r.series)
      for (const pt of s.points) assert.notEqual(pt.value, 0, `${s.metricId} has a 0`);
  };

  it("serves utilization at 30 s with the gap absent (never 0) and reported", async () => {
    const r = await q(p.vms[0], ["cpu_utilization_pct"], t0 / S, nowMs / S, 30);
    assert.equal(r.startTimeUnix, BigInt(t0 / S));
    assert.equal(r.endTimeUnix, BigInt(nowMs / S));
    assert.equal(r.stepSeconds, 30);
    assert.equal(r.series.length, 1);
    const s = r.series[0];
    assert.equal(s.unit, "%");
    assert.equal(s.source, "HYPERVISOR");
    noZeros(r);
    const byT = new Map(s.points.map((pt) => [Number(pt.timeUnix), pt.value]));
    for (let i = 1; i <= 120; i++) {
      const ts = t0 / S + i * 30;
      // A utilization point needs the previous sample; after the 5.5-minute hole there is none.
      if (gapIdx(i) || i === 50) assert.equal(byT.has(ts), false, `point at i=${i} must be absent`);
      else assert.ok(Math.abs((byT.get(ts) ?? Number.NaN) - util(i)) < 1e-9, `i=${i}: ${byT.get(ts)}`);
    }
    const sq = r.quality?.series[0];
    assert.ok(sq);
    assert.equal(sq.presentPoints, 120 - 11);
    assert.equal(sq.expectedPoints, 120);
    assert.deepEqual(
      sq.gaps.map((g) => [Number(g.startTimeUnix), Number(g.endTimeUnix)]),
      [[t0 / S + 40 * 30, t0 / S + 50 * 30]],
    );
    assert.equal(sq.stale, false);
    assert.equal(r.quality?.stale, false);
    assert.equal(r.quality?.partial, false);
    assert.equal(r.quality?.lastObservedUnix, BigInt(nowMs / S));
  });

  it("averages gauges over each step window at 1800 s, so every sample counts", async () => {
    const r = await q(p.vms[0], ["cpu_utilization_pct", "memory_used_bytes"], t0 / S, nowMs / S, 1800);
    noZeros(r);
    const cpu = r.series.find((s) => s.metricId === "cpu_utilization_pct");
    assert.ok(cpu && cpu.points.length > 0);
    for (const pt of cpu.points) {
      const end = Number(pt.timeUnix);
      const inWindow: number[] = [];
      for (let i = 1; i <= 120; i++) {
        const ts = t0 / S + i * 30;
        if (!gapIdx(i) && i !== 50 && ts > end - 1800 && ts <= end) inWindow.push(util(i));
      }
      const mean = inWindow.reduce((a, b) => a + b, 0) / inWindow.length;
      assert.ok(Math.abs(pt.value - mean) < 1e-9, `${end}: ${pt.value} vs ${mean}`);
    }
  });

  it("computes rates from counters with the reset handled (no negative rate)", async () => {
    const r = await q(p.vms[0], ["disk_read_bytes_per_sec"], t0 / S, nowMs / S, 60);
    assert.equal(r.series.length, 1);
    assert.deepEqual(r.series[0].labels, { device: "vda" });
    assert.equal(r.series[0].unit, "bytes/s");
    for (const pt of r.series[0].points) {
      assert.ok(pt.value > 0, `rate ${pt.value} at ${pt.timeUnix}`);
      const i = (Number(pt.timeUnix) - t0 / S) / 30;
      if (i !== 80 && !gapIdx(i) && !gapIdx(i - 1)) assert.ok(Math.abs(pt.value - 1000 / 30) < 1e-6);
    }
  });

  it("keeps stale, missing and failed metrics distinct", async () => {
    const r = await q(
      p.vms[1],
      ["cpu_utilization_pct", "memory_used_bytes", "memory_available_bytes"],
      t0 / S,
      nowMs / S,
      30,
    );
    noZeros(r);
    const quality = r.quality;
    assert.ok(quality);
    // Stale: there is data, it stopped 10 minutes before the end.
    assert.equal(quality.stale, true);
    assert.equal(quality.lastObservedUnix, BigInt(nowMs / S - 600));
    const cpu = quality.series.find((s) => s.metricId === "cpu_utilization_pct");
    assert.equal(cpu?.stale, true);
    assert.ok(cpu && cpu.presentPoints > 0 && cpu.presentPoints < cpu.expectedPoints);
    assert.deepEqual(cpu.gaps.at(-1)?.endTimeUnix, BigInt(nowMs / S));
    // Missing: never reported; no series, no points, all of it a gap.
    assert.equal(r.series.filter((s) => s.metricId === "memory_used_bytes").length, 0);
    const mem = quality.series.find((s) => s.metricId === "memory_used_bytes");
    assert.equal(mem?.presentPoints, 0);
    assert.ok(mem && mem.expectedPoints > 0 && mem.gaps.length === 1);
    // Error: an expanded-only metric (the guest agent's view of memory) on a BASELINE VM.
    assert.equal(quality.partial, true);
    assert.deepEqual(
      quality.errors.map((e) => [e.metricId, e.code, e.reason]),
      [["memory_available_bytes", "failed_precondition", "EXPANDED_MONITORING_REQUIRED"]],
    );
  });

  it("never changes past utilization when the VM is resized", async () => {
    const vm = p.vms[2];
    const base = nowMs - 40 * 30 * S;
    const cpu: [number, number][] = [];
    for (let i = 0; i <= 20; i++) cpu.push([base + i * 30 * S, 100 + i * 30]); // one core busy of 2 → 50 %
    await pushAll(t.baseUrl, t.app.config.collectorToken, [
      rwSeries("svc_vm_cpu_seconds_total", { vm }, cpu),
      rwSeries(
        "svc_vm_vcpus",
        { vm },
        cpu.map(([ts]) => [ts, 2]),
      ),
    ]);
    const range = [base / S, (base + 20 * 30 * S) / S] as const;
    const before = await q(vm, ["cpu_utilization_pct", "vcpus"], range[0], range[1], 30);
    assert.ok(before.series[0].points.every((pt) => Math.abs(pt.value - 50) < 1e-9));
    const later: [number, number][] = [];
    for (let i = 21; i <= 40; i++) later.push([base + i * 30 * S, 100 + 20 * 30 + (i - 20) * 30]);
    await pushAll(t.baseUrl, t.app.config.collectorToken, [
      rwSeries("svc_vm_cpu_seconds_total", { vm }, later),
      rwSeries(
        "svc_vm_vcpus",
        { vm },
        later.map(([ts]) => [ts, 4]),
      ),
    ]);
    await t.admin.vms.updateVM({ name: vm, vcpus: 4 });
    const after = await q(vm, ["cpu_utilization_pct", "vcpus"], range[0], range[1], 30);
    assert.deepEqual(after.series, before.series);
    const now = await q(vm, ["cpu_utilization_pct"], (base + 21 * 30 * S) / S, nowMs / S, 30);
    assert.ok(now.series[0].points.every((pt) => Math.abs(pt.value - 25) < 1e-9));
  });

  it("refuses unknown metricIds (saying which) and another project's VM (saying nothing of it)", async () => {
    const e = await rejectsWith(
      q(p.vms[0], ["cpu_utilization_pct", "cpu_pct"], t0 / S, nowMs / S, 30),
      Code.InvalidArgument,
      "UNKNOWN_METRIC",
    );
    assert.equal(e.findDetails(ErrorInfoSchema)[0]?.metadata.metricId, "cpu_pct");
    const f = await rejectsWith(
      q(other.vms[0], ["cpu_utilization_pct"], t0 / S, nowMs / S, 30),
      Code.PermissionDenied,
      "PROJECT_BOUNDARY",
    );
    // Authorization comes first (issue 35): the refusal is the same whether the VM exists or not.
    const missing = await rejectsWith(
      q(`${other.vms[0]}-missing`, ["cpu_utilization_pct"], t0 / S, nowMs / S, 30),
      Code.PermissionDenied,
      "PROJECT_BOUNDARY",
    );
    assert.equal(missing.message, f.message);
    assert.doesNotMatch(f.message, /vm-x/);
    await rejectsWith(
      q(p.vms[0], ["cpu_utilization_pct"], nowMs / S - 7 * DAY, nowMs / S, 60),
      Code.InvalidArgument,
      "POINT_BUDGET_EXCEEDED",
    );
    const ok = await q(p.vms[0], ["cpu_utilization_pct"], nowMs / S - 7 * DAY, nowMs / S, 1800);
    assert.equal(ok.stepSeconds, 1800);
  });

  it("answers 429 with Retry-After when the project's query slots and queue are full", async () => {
    const o = { maxConcurrent: 4, maxQueued: 8 };
    let release!: () => void;
    const hold = new Promise<void>((r) => {
      release = r;
    });
    const held = Array.from({ length: o.maxConcurrent + o.maxQueued }, () =>
      t.app.limiter.run("query", () => hold).catch(() => undefined),
    );
    const res = await fetch(`${t.baseUrl}/svc.monitoring.v1.MonitoringService/QueryVMMonitoring`, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        "Connect-Protocol-Version": "1",
        Authorization: `Bearer ${p.owner.session}`,
      },
      body: JSON.stringify({
        name: p.vms[0],
        metricIds: ["cpu_utilization_pct"],
        startTimeUnix: String(t0 / S),
        endTimeUnix: String(nowMs / S),
        stepSeconds: 30,
      }),
    });
    assert.equal(res.status, 429);
    assert.equal(res.headers.get("retry-after"), "2");
    assert.equal(((await res.json()) as { code: string }).code, "resource_exhausted");
    release();
    await Promise.all(held);
  });

  it("stops at the deadline and reports the metrics it could not read", async () => {
    let clock = nowMs;
    // The store read (one for all metrics) takes 11 s on this clock: the deadline (10 s) passes
    // during it, so the query stops and reports every metric it could not serve.
    const slowStore: Queryable = {
      querier() {
        const q = t.app.tsdb.querier();
        return {
          ...q,
          select(...args: Parameters<Querier["select"]>) {
            clock += 11_000;
            return q.select(...args);
          },
          labelNames: (...a: Parameters<Querier["labelNames"]>) => q.labelNames(...a),
          labelValues: (...a: Parameters<Querier["labelValues"]>) => q.labelValues(...a),
        };
      },
    };
    const slow = createMetricsBackend({ storage: slowStore, now: () => clock });
    const r = await queryVmMonitoring(
      {
        db: t.app.db.db,
        metrics: slow,
        limiter: createProjectLimiter(),
        now: () => clock,
        options: resolveMetricsOptions(),
      },
      {
        name: p.vms[0],
        metricIds: ["cpu_utilization_pct", "memory_used_bytes"],
        startTimeUnix: BigInt(t0 / S),
        endTimeUnix: BigInt(nowMs / S),
        stepSeconds: 30,
      },
    );
    assert.equal(r.series.length, 0);
    assert.equal(r.quality.partial, true);
    assert.deepEqual(
      r.quality.errors.map((e) => [e.metricId, e.code, e.reason]),
      [
        ["cpu_utilization_pct", "deadline_exceeded", "QUERY_TIMEOUT"],
        ["memory_used_bytes", "deadline_exceeded", "QUERY_TIMEOUT"],
      ],
    );
  });
});
