import { breaches, type RuleSpec } from "./spec.ts";

/**
 * One evaluation of one instance at one time: the outcome (`true` | `false` | `no_data` | `error`),
 * whether the breach *holds* for the rule's sustainedSeconds, and the value that decided it.
 *
 * "Holds" (docs/alerts.md, the one definition the evaluator and the preview share): at time t, with
 * S = sustainedSeconds and G = maxGapMs (90 s, three sampling intervals),
 *   1. the newest sample at or before t is at most G old and breaches (else `false`, or `no_data`
 *      when there is no such sample);
 *   2. the breach has been observed for S: the run of consecutive breaching samples that ends with
 *      the newest one, with no gap longer than G between them, began at least S before t.
 * With S = 0 only rule 1 applies. Nothing is interpolated and a missing sample never counts as a value.
 */
export type Result = "true" | "false" | "no_data" | "error";

export interface Evaluation {
  readonly result: Result;
  /** True only with result "true" when the breach holds for sustainedSeconds. */
  readonly holds: boolean;
  /** The newest value (absent for no_data and error). */
  readonly value?: number;
  /** Why: no_data and error always say; others may. */
  readonly message?: string;
}

/** One instance's values, timestamps (ms) ascending; no NaN values. */
export interface InstanceSeries {
  readonly t: readonly number[];
  readonly v: readonly number[];
}

type Condition = Pick<RuleSpec, "operator" | "threshold" | "sustainedSeconds">;

/** Index of the newest sample at or before atMs, or −1. */
export function newestAtOrBefore(t: readonly number[], atMs: number): number {
  let lo = 0;
  let hi = t.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (t[mid] <= atMs) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}

/** Evaluates a metric rule over stored samples (rules 1–3 above). */
export function evaluateSamples(s: InstanceSeries, atMs: number, c: Condition, maxGapMs: number): Evaluation {
  const last = newestAtOrBefore(s.t, atMs);
  if (last < 0 || atMs - s.t[last] > maxGapMs) {
    return {
      result: "no_data",
      holds: false,
      message: `no sample in the ${maxGapMs / 1000} s before the evaluation`,
    };
  }
  const value = s.v[last];
  if (!breaches(c.operator, value, c.threshold)) return { result: "false", holds: false, value };
  if (c.sustainedSeconds === 0) return { result: "true", holds: true, value };
  const needSince = atMs - c.sustainedSeconds * 1000;
  // Walk back along the breaching run until it reaches S before t (holds) or breaks (pending).
  let j = last;
  while (s.t[j] > needSince) {
    if (j === 0 || s.t[j] - s.t[j - 1] > maxGapMs || !breaches(c.operator, s.v[j - 1], c.threshold))
      return { result: "true", holds: false, value };
    j--;
  }
  return { result: "true", holds: true, value };
}

/** A VM's state over time, from the inventory (state events and maintenance windows). */
export interface VmTimeline {
  /** State changes, time ascending. */
  readonly events: readonly { readonly time: number; readonly state: string; readonly stopReason: string }[];
  /** The state before the first event (the VM's state when no event was recorded). */
  readonly initialState: string;
  readonly initialStopReason: string;
  /** [start, end) ms. */
  readonly maintenance: readonly { readonly start: number; readonly end: number }[];
}

function stateAt(tl: VmTimeline, atMs: number): { state: string; stopReason: string; since: number } {
  let state = tl.initialState;
  let stopReason = tl.initialStopReason;
  let since = Number.NEGATIVE_INFINITY;
  for (const e of tl.events) {
    if (e.time > atMs) break;
    if (e.state !== state || e.stopReason !== stopReason) since = e.time;
    state = e.state;
    stopReason = e.stopReason;
  }
  return { state, stopReason, since };
}

/** The start of the maintenance window covering atMs, or undefined. */
function maintenanceAt(tl: VmTimeline, atMs: number): boolean {
  return tl.maintenance.some((w) => w.start <= atMs && atMs < w.end);
}

/** Latest end of a maintenance window in (fromMs, atMs], or −∞: a breach only counts after it. */
function lastMaintenanceEnd(tl: VmTimeline, fromMs: number, atMs: number): number {
  let end = Number.NEGATIVE_INFINITY;
  for (const w of tl.maintenance) if (w.end > fromMs && w.end <= atMs) end = Math.max(end, w.end);
  return end;
}

/**
 * vm_unexpected_stop: 1 while the VM is stopped with reason UNEXPECTED outside maintenance, else 0.
 * A user stop or a stop inside a maintenance window is 0: such stops raise no alert. Holds when the
 * value was 1 over the whole (t − S, t].
 */
export function evaluateUnexpectedStop(tl: VmTimeline, atMs: number, c: Condition): Evaluation {
  const s = stateAt(tl, atMs);
  const breaching = s.state === "STOPPED" && s.stopReason === "UNEXPECTED" && !maintenanceAt(tl, atMs);
  const value = breaching ? 1 : 0;
  if (!breaches(c.operator, value, c.threshold)) return { result: "false", holds: false, value };
  const since = Math.max(s.since, lastMaintenanceEnd(tl, s.since, atMs));
  return { result: "true", holds: since <= atMs - c.sustainedSeconds * 1000, value };
}

/**
 * telemetry_age_seconds: while the VM runs outside maintenance, the seconds since its newest sample
 * (counted from when it started running or left maintenance, if later); 0 otherwise, so a stopped VM
 * or one under maintenance raises no telemetry alert. `observations` are sample times (ms, ascending).
 * Holds when the age breached over the whole (t − S, t]: no sample arrived in it and the age already
 * breached at t − S.
 */
export function evaluateTelemetryAge(
  tl: VmTimeline,
  observations: readonly number[],
  atMs: number,
  c: Condition,
): Evaluation {
  const s = stateAt(tl, atMs);
  if (s.state !== "RUNNING" || maintenanceAt(tl, atMs)) return { result: "false", holds: false, value: 0 };
  const eligibleSince = Math.max(s.since, lastMaintenanceEnd(tl, s.since, atMs));
  const ageAt = (t: number) => {
    const i = newestAtOrBefore(observations, t);
    const from = Math.max(i >= 0 ? observations[i] : Number.NEGATIVE_INFINITY, eligibleSince);
    return from === Number.NEGATIVE_INFINITY ? Number.POSITIVE_INFINITY : (t - from) / 1000;
  };
  const value = ageAt(atMs);
  if (!breaches(c.operator, value, c.threshold)) return { result: "false", holds: false, value };
  const windowStart = atMs - c.sustainedSeconds * 1000;
  const holds =
    c.sustainedSeconds === 0 ||
    (eligibleSince <= windowStart &&
      newestAtOrBefore(observations, atMs) === newestAtOrBefore(observations, windowStart) &&
      breaches(c.operator, ageAt(windowStart), c.threshold));
  return { result: "true", holds, value };
}
