import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { AlertInstanceTable } from "../db/schema.ts";
import { ruleMetrics } from "./catalog.ts";
import type { VmTimeline } from "./condition.ts";
import { type AppliedRule, evaluateInstance, evaluateRule, type RuleInput } from "./evaluation.ts";
import { INSTANCE_KEY, instanceRow, rewrittenColumns, statusOf } from "./instance-row.ts";
import type { InstanceData } from "./read.ts";
import type { RuleSpec } from "./spec.ts";
import { type InstanceStatus, inactive } from "./state.ts";

const S = 1000;
const G = 90 * S;
const T = 1_800_000_000_000;
const VM1 = "projects/p/locations/dc-1/vms/vm-1";
const VM2 = "projects/p/locations/dc-1/vms/vm-2";

function rule(over: Partial<RuleSpec> = {}): AppliedRule {
  const spec: RuleSpec = {
    displayName: "CPU high",
    metricId: "cpu_utilization_pct",
    operator: "GREATER_THAN",
    threshold: 90,
    sustainedSeconds: 0,
    severity: "WARNING",
    allVms: true,
    vmNames: [],
    enabled: true,
    repeatIntervalSeconds: 0,
    destinationNames: [],
    ...over,
  };
  return { id: "r1", projectId: "p", version: 3, spec };
}

/** One sample of `v` at each of `ages` seconds before T. */
function data(vmName: string, v: number, mountpoint = "", ages = [60, 30, 0]): [string, InstanceData] {
  const key = mountpoint ? `${vmName}#${mountpoint}` : vmName;
  return [key, { vmName, mountpoint, series: { t: ages.map((a) => T - a * S), v: ages.map(() => v) } }];
}

function input(over: Partial<RuleInput> = {}): RuleInput {
  const vms = [VM1, VM2].map((name) => ({ name, state: "RUNNING", createTime: 0 }));
  return {
    vms,
    live: new Set(vms.map((v) => v.name)),
    timelines: undefined,
    stored: [],
    data: new Map(),
    readError: undefined,
    ...over,
  };
}

/** A stored row of VM in `status`. */
function row(vmName: string, status: Partial<InstanceStatus>, mountpoint = ""): AlertInstanceTable {
  const key = mountpoint ? `${vmName}#${mountpoint}` : vmName;
  const id = { rule_id: "r1", instance_key: key, project_id: "p", vm_name: vmName, mountpoint, revision: 3 };
  const firing = status.state === "FIRING";
  return instanceRow(
    id,
    { ...inactive, stateSince: T - 600 * S, ...status },
    firing ? "inc-1" : null,
    T - 30 * S,
  );
}

describe("evaluateRule()", () => {
  it("writes what transitioned or is new and not plainly inactive; an inactive instance with data is not written", () => {
    const e = evaluateRule(rule(), input({ data: new Map([data(VM1, 95), data(VM2, 40)]) }), T, 100, G);
    assert.equal(e.evaluated, 2);
    assert.deepEqual(
      e.outcome.writes.map((w) => [w.vmName, w.next.state, w.transition, w.value]),
      [[VM1, "FIRING", "FIRED", 95]],
    );
    assert.deepEqual([e.noData, e.error], [0, 0]);
  });

  it("no sample in the gap is NO_DATA (written, counted), never a value", () => {
    const e = evaluateRule(rule(), input({ data: new Map([data(VM1, 95, "", [300, 270])]) }), T, 100, G);
    assert.deepEqual(
      e.outcome.writes.map((w) => [w.vmName, w.next.state, w.next.flag, w.value]),
      [
        [VM1, "INACTIVE", "NO_DATA", null],
        [VM2, "INACTIVE", "NO_DATA", null],
      ],
    );
    assert.equal(e.noData, 2);
  });

  it("a failed read flags every instance ERROR and keeps a firing one firing (no recovery claimed)", () => {
    const stored = [row(VM1, { state: "FIRING", firedAt: T - 300 * S, lastValue: 97 })];
    const e = evaluateRule(rule(), input({ stored, readError: "store unavailable" }), T, 100, G);
    const byVm = new Map(e.outcome.writes.map((w) => [w.vmName, w]));
    assert.deepEqual(
      [byVm.get(VM1)?.next.state, byVm.get(VM1)?.next.flag, byVm.get(VM1)?.transition],
      ["FIRING", "ERROR", undefined],
    );
    assert.equal(byVm.get(VM1)?.next.flagMessage, "store unavailable");
    assert.equal(e.error, 2);
    assert.equal(e.outcome.readError, "store unavailable");
  });

  it("a still-firing instance is written when its value moved, not when it did not", () => {
    const stored = [row(VM1, { state: "FIRING", firedAt: T - 300 * S, lastValue: 97 })];
    const same = evaluateRule(
      rule({ allVms: false, vmNames: [VM1] }),
      input({ stored, data: new Map([data(VM1, 97)]) }),
      T,
      100,
      G,
    );
    assert.deepEqual(same.outcome.writes, []);
    const moved = evaluateRule(
      rule({ allVms: false, vmNames: [VM1] }),
      input({ stored, data: new Map([data(VM1, 98)]) }),
      T,
      100,
      G,
    );
    assert.deepEqual(
      moved.outcome.writes.map((w) => [w.next.state, w.next.lastValue, w.transition, w.prev?.incident_id]),
      [["FIRING", 98, undefined, "inc-1"]],
    );
  });

  it("a retired row starts afresh: the instance is new, not resumed", () => {
    const stored = [row(VM1, { state: "RETIRED", firedAt: T - 900 * S })];
    const e = evaluateRule(
      rule(),
      input({ stored, data: new Map([data(VM1, 95), data(VM2, 40)]) }),
      T,
      100,
      G,
    );
    const [w] = e.outcome.writes;
    assert.deepEqual([w.vmName, w.transition, w.next.firedAt], [VM1, "FIRED", T]);
    assert.deepEqual([e.outcome.deleted, e.outcome.deselected], [[], []]);
  });

  it("stops at the budget (the project's instance limit)", () => {
    const e = evaluateRule(rule(), input({ data: new Map([data(VM1, 95), data(VM2, 95)]) }), T, 1, G);
    assert.equal(e.evaluated, 1);
    assert.equal(e.outcome.writes.length, 1);
  });

  it("instances whose VM left the rule retire: deleted VMs apart from VMs no longer selected", () => {
    const gone = "projects/p/locations/dc-1/vms/vm-gone";
    const stored = [row(VM2, { state: "PENDING", pendingSince: T - 60 * S }), row(gone, { state: "FIRING" })];
    const e = evaluateRule(
      rule({ allVms: false, vmNames: [VM1] }),
      input({ stored, data: new Map([data(VM1, 40)]) }),
      T,
      100,
      G,
    );
    assert.deepEqual(e.outcome.deleted, [gone]);
    assert.deepEqual(e.outcome.deselected, [VM2]);
    assert.deepEqual(e.outcome.writes, []);
  });

  it("a filesystem rule's instances are the mountpoints seen now and those stored before (then without data)", () => {
    const fs = rule({ metricId: "filesystem_used_pct" });
    const stored = [row(VM1, { state: "PENDING", pendingSince: T - 60 * S }, "/var")];
    const e = evaluateRule(fs, input({ stored, data: new Map([data(VM1, 95, "/")]) }), T, 100, G);
    assert.equal(e.evaluated, 2);
    assert.deepEqual(e.outcome.writes.map((w) => [w.key, w.next.state, w.next.flag]).sort(), [
      [`${VM1}#/`, "FIRING", ""],
      [`${VM1}#/var`, "PENDING", "NO_DATA"],
    ]);
  });
});

describe("evaluateInstance()", () => {
  const tl: VmTimeline = {
    events: [{ time: T - 600 * S, state: "STOPPED", stopReason: "UNEXPECTED" }],
    initialState: "RUNNING",
    initialStopReason: "",
    maintenance: [],
  };
  const stop = ruleMetrics.get("vm_unexpected_stop")!;
  const age = ruleMetrics.get("telemetry_age_seconds")!;
  const spec = (metricId: string, threshold: number) =>
    rule({ metricId, threshold, operator: "GREATER_THAN_OR_EQUAL" }).spec;

  it("an unexpected stop comes from the inventory, whatever the store read did", () => {
    const ev = evaluateInstance(stop, spec(stop.id, 1), undefined, tl, "store unavailable", T, G);
    assert.deepEqual([ev.result, ev.holds, ev.value], ["true", true, 1]);
  });

  it("an inventory rule without the VM's timeline is an error, never a value", () => {
    for (const m of [stop, age]) {
      const ev = evaluateInstance(m, spec(m.id, 1), undefined, undefined, undefined, T, G);
      assert.deepEqual([ev.result, ev.message], ["error", "the VM's inventory could not be read"]);
    }
  });

  it("a metric rule without samples is no_data, with the gap in the message", () => {
    const ev = evaluateInstance(
      ruleMetrics.get("cpu_utilization_pct")!,
      rule().spec,
      undefined,
      undefined,
      undefined,
      T,
      G,
    );
    assert.deepEqual([ev.result, ev.message], ["no_data", "no sample in the 90 s before the evaluation"]);
  });
});

describe("instance rows (instance-row.ts)", () => {
  it("a row holds the status it was built from, and an upsert rewrites every column but the key", () => {
    const status: InstanceStatus = {
      state: "FIRING",
      stateSince: 1,
      pendingSince: 2,
      firedAt: 3,
      resolvedAt: null,
      flag: "NO_DATA",
      flagSince: 4,
      flagMessage: "m",
      lastValue: 5,
    };
    const id = {
      rule_id: "r",
      instance_key: "k",
      project_id: "p",
      vm_name: "v",
      mountpoint: "",
      revision: 1,
    };
    const r = instanceRow(id, status, "inc", 6);
    assert.deepEqual(statusOf(r), status);
    assert.deepEqual([r.retire_reason, r.last_eval_time, r.incident_id, r.update_time], ["", 6, "inc", 6]);
    const columns = rewrittenColumns(r);
    assert.ok(INSTANCE_KEY.every((k) => !columns.includes(k)));
    assert.equal(columns.length + INSTANCE_KEY.length, Object.keys(r).length);
  });
});
