import type { AlertInstanceTable } from "../db/schema.ts";
import { type RuleMetric, ruleMetrics } from "./catalog.ts";
import {
  type Evaluation,
  evaluateTelemetryAge,
  evaluateUnexpectedStop,
  type VmTimeline,
} from "./condition.ts";
import { evaluateMetric } from "./forecast.ts";
import { statusOf } from "./instance-row.ts";
import { type InstanceData, instanceKey } from "./read.ts";
import type { LiveVm } from "./rules.ts";
import type { RuleSpec } from "./spec.ts";
import { changed, type InstanceStatus, inactive, step, type Transition } from "./state.ts";

/**
 * One rule's evaluation at one time, pure (no database, no store): from what the cycle read (the rule's
 * share of the store read, the VM timelines, the stored instance rows) it decides every instance's
 * outcome (condition.ts, forecast.ts), steps its state (state.ts), and says what must be written
 * (persistence.ts writes it). Prometheus' seam: a rule group's Eval between the scheduler and storage.
 */

/** A rule as the cycle evaluates it: its applied revision's spec. */
export interface AppliedRule {
  readonly id: string;
  readonly projectId: string;
  readonly version: number;
  readonly spec: RuleSpec;
}

/** What one instance's evaluation will write. */
export interface InstanceWrite {
  readonly key: string;
  readonly vmName: string;
  readonly mountpoint: string;
  /** The stored row (absent for a new instance; a retired one starts afresh). */
  readonly prev?: AlertInstanceTable;
  readonly next: InstanceStatus;
  readonly transition?: Transition;
  readonly value: number | null;
}

export interface RuleOutcome {
  readonly rule: AppliedRule;
  readonly writes: InstanceWrite[];
  /** Live instances whose VM left the rule: deleted VMs, and VMs no longer selected. */
  readonly deleted: string[];
  readonly deselected: string[];
  readonly readError?: string;
}

/** What a rule is evaluated over. */
export interface RuleInput {
  /** The project's live VMs, and their names. */
  readonly vms: readonly LiveVm[];
  readonly live: ReadonlySet<string>;
  /** The project's VM timelines (read for projects with inventory rules). */
  readonly timelines: ReadonlyMap<string, VmTimeline> | undefined;
  /** The rule's stored instance rows, retired ones included. */
  readonly stored: readonly AlertInstanceTable[];
  /** The rule's share of its store read, by instance key (empty without a read). */
  readonly data: ReadonlyMap<string, InstanceData>;
  /** Why the rule's store read failed: its instances evaluate to `error`. */
  readonly readError: string | undefined;
}

export interface RuleEvaluation {
  readonly outcome: RuleOutcome;
  /** Instances evaluated: at most the budget given. */
  readonly evaluated: number;
  /** Evaluated instances left flagged NO_DATA, and ERROR. */
  readonly noData: number;
  readonly error: number;
}

/**
 * Evaluates one rule's instances at atMs, at most `budget` of them (the project's instance limit): one
 * per target VM, or per (VM, mountpoint) seen now or before for filesystem rules. An instance is written
 * when it transitions, is new and not plainly inactive, changed, or fires with a new value.
 */
export function evaluateRule(
  rule: AppliedRule,
  input: RuleInput,
  atMs: number,
  budget: number,
  maxGapMs: number,
): RuleEvaluation {
  const { spec } = rule;
  const { vms, live, timelines, stored, data, readError } = input;
  const metric = ruleMetrics.get(spec.metricId) as RuleMetric;
  const targets = spec.allVms ? vms.map((v) => v.name) : spec.vmNames.filter((n) => live.has(n));
  const targetSet: ReadonlySet<string> = spec.allVms ? live : new Set(targets);
  const storedByKey = new Map(stored.map((r) => [r.instance_key, r]));
  const instances = new Map<string, { vmName: string; mountpoint: string }>();
  if (metric.perMountpoint) {
    for (const [k, d] of data) if (targetSet.has(d.vmName)) instances.set(k, d);
    for (const r of stored)
      if (r.state !== "RETIRED" && targetSet.has(r.vm_name))
        instances.set(r.instance_key, { vmName: r.vm_name, mountpoint: r.mountpoint });
  } else {
    for (const vm of targets) instances.set(instanceKey(vm, ""), { vmName: vm, mountpoint: "" });
  }
  let evaluated = 0;
  let noData = 0;
  let error = 0;
  const writes: InstanceWrite[] = [];
  for (const [key, inst] of instances) {
    if (evaluated >= budget) break;
    evaluated++;
    const row = storedByKey.get(key);
    // A retired row belongs to an earlier condition or selection: the instance starts afresh.
    const prev = row && row.state !== "RETIRED" ? statusOf(row) : { ...inactive, stateSince: atMs };
    const ev = evaluateInstance(
      metric,
      spec,
      data.get(key),
      timelines?.get(inst.vmName),
      readError,
      atMs,
      maxGapMs,
    );
    const { next, transition } = step(prev, ev, atMs);
    if (next.flag === "NO_DATA") noData++;
    else if (next.flag === "ERROR") error++;
    const isNew = !row || row.state === "RETIRED";
    const firingValueMoved = next.state === "FIRING" && next.lastValue !== (row?.last_value ?? null);
    if (
      transition ||
      (isNew ? next.state !== "INACTIVE" || next.flag !== "" : changed(prev, next) || firingValueMoved)
    )
      writes.push({ key, ...inst, prev: row, next, transition, value: ev.value ?? null });
  }
  // Instances whose VM left the rule (deleted, or no longer selected) retire; no recovery is claimed.
  const gone = stored.filter((r) => r.state !== "RETIRED" && !targetSet.has(r.vm_name));
  return {
    outcome: {
      rule,
      writes,
      deleted: gone.filter((r) => !live.has(r.vm_name)).map((r) => r.instance_key),
      deselected: gone.filter((r) => live.has(r.vm_name)).map((r) => r.instance_key),
      readError,
    },
    evaluated,
    noData,
    error,
  };
}

/** One instance's outcome at atMs: inventory rules from its VM's timeline, metric rules from its samples. */
export function evaluateInstance(
  metric: RuleMetric,
  spec: RuleSpec,
  data: InstanceData | undefined,
  timeline: VmTimeline | undefined,
  readError: string | undefined,
  atMs: number,
  maxGapMs: number,
): Evaluation {
  if (metric.kind === "unexpected_stop") {
    if (!timeline) return { result: "error", holds: false, message: "the VM's inventory could not be read" };
    return evaluateUnexpectedStop(timeline, atMs, spec);
  }
  if (readError !== undefined) return { result: "error", holds: false, message: readError };
  if (metric.kind === "telemetry_age") {
    if (!timeline) return { result: "error", holds: false, message: "the VM's inventory could not be read" };
    return evaluateTelemetryAge(timeline, data?.series.t ?? [], atMs, spec);
  }
  if (!data) {
    return {
      result: "no_data",
      holds: false,
      message: `no sample in the ${maxGapMs / 1000} s before the evaluation`,
    };
  }
  return evaluateMetric(data.series, atMs, spec, maxGapMs);
}
