import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { labelsFromRecord } from "../storage/interface.ts";
import { ruleMetrics } from "./catalog.ts";
import type { AppliedRule } from "./evaluation.ts";
import { indexSeries } from "./read.ts";
import {
  planReads,
  replanFailedRiders,
  ruleLookbackMs,
  ruleShare,
  SHARED_READ_MAX_LOOKBACK_MS,
} from "./read-plan.ts";
import type { RuleSpec } from "./spec.ts";

const S = 1000;
const T = 1_800_000_000_000;
const o = { maxGapMs: 90 * S, samplingIntervalMs: 30 * S };
const VM1 = "projects/p/locations/dc-1/vms/vm-1";
const VM2 = "projects/p/locations/dc-1/vms/vm-2";
const live = new Set([VM1, VM2]);

function rule(id: string, over: Partial<RuleSpec> = {}): AppliedRule {
  const spec: RuleSpec = {
    displayName: id,
    metricId: "cpu_utilization_pct",
    operator: "GREATER_THAN",
    threshold: 90,
    sustainedSeconds: 120,
    severity: "WARNING",
    allVms: false,
    vmNames: [VM1],
    enabled: true,
    repeatIntervalSeconds: 0,
    destinationNames: [],
    ...over,
  };
  return { id, projectId: "p", version: 1, spec };
}

describe("planReads()", () => {
  it("rules with short lookbacks share one read: the union of their series and VMs over the longest window", () => {
    const cpu = rule("cpu");
    const mem = rule("mem", { metricId: "memory_used_pct", vmNames: [VM2], sustainedSeconds: 600 });
    const plan = planReads([cpu, mem], live, T, o);
    const read = plan.get("cpu");
    assert.ok(read);
    assert.equal(plan.get("mem"), read, "one read for both");
    assert.deepEqual(
      read.metrics.map((m) => m.id),
      ["cpu_utilization_pct", "memory_used_pct"],
    );
    assert.deepEqual([...(read.vmNames ?? [])].sort(), [VM1, VM2]);
    assert.equal(read.fromMs, T - ruleLookbackMs(read.metrics[1], mem.spec, o));
    assert.equal(read.fromMs, T - (600 * S + 90 * S + 30 * S));
  });

  it("an all-VMs rule reads every VM; a long lookback reads apart; inventory rules and rules without a live VM read nothing", () => {
    const all = rule("all", { allVms: true, vmNames: [] });
    const forecast = rule("fc", {
      metricId: "filesystem_used_pct",
      forecast: { horizonSeconds: 14_400, lookbackSeconds: 21_600 },
    });
    const stop = rule("stop", { metricId: "vm_unexpected_stop", threshold: 1 });
    const gone = rule("gone", { vmNames: ["projects/p/locations/dc-1/vms/deleted"] });
    const plan = planReads([all, forecast, stop, gone], live, T, o);
    assert.deepEqual([...plan.keys()].sort(), ["all", "fc"]);
    assert.equal(plan.get("all")?.vmNames, undefined);
    const fc = plan.get("fc");
    assert.notEqual(fc, plan.get("all"));
    assert.ok(T - (fc?.fromMs ?? T) > SHARED_READ_MAX_LOOKBACK_MS);
    assert.deepEqual([...(fc?.vmNames ?? [])], [VM1]);
  });
});

describe("planReads() with a long read", () => {
  const forecast = (id: string, over: Partial<RuleSpec> = {}) =>
    rule(id, {
      metricId: "filesystem_used_pct",
      forecast: { horizonSeconds: 14_400, lookbackSeconds: 21_600 },
      ...over,
    });

  it("a short rule whose series and VMs a long read holds takes its share of it; the others share the short read", () => {
    const fc = forecast("fc", { allVms: true, vmNames: [] });
    const fs = rule("fs", { metricId: "filesystem_used_pct", sustainedSeconds: 300 });
    const bytes = rule("bytes", { metricId: "filesystem_used_bytes", allVms: true, vmNames: [] });
    const cpu = rule("cpu", { allVms: true, vmNames: [] });
    const plan = planReads([fs, cpu, fc, bytes], live, T, o);
    const long = plan.get("fc");
    assert.ok(long);
    assert.equal(plan.get("fs"), long, "the 90 % rule reads nothing of its own");
    assert.equal(plan.get("bytes"), long, "used bytes are among the long read's series");
    assert.deepEqual(
      long.metrics.map((m) => m.id),
      ["filesystem_used_pct"],
    );
    const short = plan.get("cpu");
    assert.ok(short && short !== long);
    assert.deepEqual(
      short.metrics.map((m) => m.id),
      ["cpu_utilization_pct"],
    );
    assert.equal(short.fromMs, T - ruleLookbackMs(short.metrics[0], cpu.spec, o));
  });

  it("a long read of other VMs, or of other series, covers nothing: the short rule reads as before", () => {
    const fc = forecast("fc", { vmNames: [VM1] });
    const fsVm2 = rule("fs2", { metricId: "filesystem_used_pct", vmNames: [VM2] });
    const fsAll = rule("fsAll", { metricId: "filesystem_used_pct", allVms: true, vmNames: [] });
    const mem = rule("mem", { metricId: "memory_used_pct", vmNames: [VM1] });
    const fsVm1 = rule("fs1", { metricId: "filesystem_used_pct", vmNames: [VM1] });
    const plan = planReads([fc, fsVm2, fsAll, mem, fsVm1], live, T, o);
    const long = plan.get("fc");
    assert.equal(plan.get("fs1"), long);
    for (const id of ["fs2", "fsAll", "mem"]) assert.notEqual(plan.get(id), long, id);
    assert.equal(plan.get("fs2"), plan.get("mem"));
    assert.equal(plan.get("fsAll")?.vmNames, undefined);
  });

  it("when the long read fails, the short rules that rode on it read on their own; the long rule keeps its error", () => {
    const fc = forecast("fc", { allVms: true, vmNames: [] });
    const fs = rule("fs", { metricId: "filesystem_used_pct", allVms: true, vmNames: [] });
    const cpu = rule("cpu", { allVms: true, vmNames: [] });
    const rules = [fc, fs, cpu];
    const plan = planReads(rules, live, T, o);
    assert.deepEqual(replanFailedRiders(rules, plan, live, T, o), [], "nothing failed");
    const long = plan.get("fc");
    assert.ok(long);
    long.error = "the engine refused the range";
    const again = replanFailedRiders(rules, plan, live, T, o);
    assert.equal(again.length, 1);
    assert.equal(plan.get("fs"), again[0]);
    assert.deepEqual(
      again[0].metrics.map((m) => m.id),
      ["filesystem_used_pct"],
    );
    assert.equal(again[0].fromMs, T - ruleLookbackMs(again[0].metrics[0], fs.spec, o));
    assert.equal(plan.get("fc"), long);
    assert.equal(ruleShare(fc, long, live, T, o).readError, "the engine refused the range");
    assert.notEqual(plan.get("cpu"), again[0], "the short read that succeeded is kept");
    assert.deepEqual(replanFailedRiders(rules, plan, live, T, o), [], "once");
  });

  it("each rule's share of the long read is what its own read returns", () => {
    const fc = forecast("fc", { allVms: true, vmNames: [] });
    const fs = rule("fs", {
      metricId: "filesystem_used_pct",
      allVms: true,
      vmNames: [],
      sustainedSeconds: 0,
    });
    const plan = planReads([fc, fs], live, T, o);
    const read = plan.get("fs");
    assert.ok(read);
    const fsLabels = (vm: string, name: string, fstype: string) =>
      labelsFromRecord({ __name__: name, vm, source: "guest_agent", mountpoint: "/", fstype });
    const times = [T - 3 * 3600 * S, T - 300 * S, T - 30 * S, T];
    const mk = (vm: string, name: string, fstype: string, v: number) => ({
      labels: fsLabels(vm, name, fstype),
      timestamps: Float64Array.from(times),
      values: Float64Array.from(times, () => v),
    });
    read.data = indexSeries([
      mk(VM1, "svc_vm_filesystem_used_bytes", "ext4", 90),
      mk(VM1, "svc_vm_filesystem_size_bytes", "ext4", 100),
      mk(VM2, "svc_vm_filesystem_used_bytes", "tmpfs", 10),
      mk(VM2, "svc_vm_filesystem_size_bytes", "tmpfs", 100),
    ]);
    const share = ruleShare(fs, read, live, T, o);
    assert.deepEqual([...share.data.keys()], [`${VM1}#/`]);
    // The 90 % rule's window (gap and a sampling interval), not the forecast's hours.
    assert.deepEqual(share.data.get(`${VM1}#/`)?.series.t, [T - 30 * S, T]);
    assert.equal(ruleShare(fc, read, live, T, o).data.get(`${VM1}#/`)?.series.t.length, 4);
  });
});

describe("ruleShare()", () => {
  const series = (vm: string, name: string, times: number[]) => ({
    labels: labelsFromRecord({ __name__: name, vm, source: "hypervisor" }),
    timestamps: Float64Array.from(times),
    values: Float64Array.from(times, () => 50),
  });

  it("cuts the rule's own VMs and window out of a shared read", () => {
    const cpu = rule("cpu", { sustainedSeconds: 0 });
    const read = {
      metrics: [ruleMetrics.get("cpu_utilization_pct")!],
      vmNames: new Set([VM1, VM2]),
      fromMs: T - 3600 * S,
      data: indexSeries([
        series(VM1, "svc_vm_cpu_utilization_pct", [T - 3600 * S, T - 60 * S, T]),
        series(VM2, "svc_vm_cpu_utilization_pct", [T - 30 * S, T]),
      ]),
    };
    const { data, readError } = ruleShare(cpu, read, live, T, o);
    assert.equal(readError, undefined);
    assert.deepEqual([...data.keys()], [VM1]);
    // The rule's window is 120 s (the gap and one sampling interval): the sample an hour old is not its.
    assert.deepEqual(data.get(VM1)?.series.t, [T - 60 * S, T]);
  });

  it("a failed read gives no data and its error; no read gives neither", () => {
    const cpu = rule("cpu");
    const failed = { metrics: [], vmNames: undefined, fromMs: T, error: "store unavailable" };
    assert.deepEqual(ruleShare(cpu, failed, live, T, o), { data: new Map(), readError: "store unavailable" });
    assert.deepEqual(ruleShare(cpu, undefined, live, T, o), { data: new Map(), readError: undefined });
  });
});
