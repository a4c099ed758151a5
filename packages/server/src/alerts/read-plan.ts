import type { MetricsBackend } from "../metrics/backend.ts";
import { type RuleMetric, ruleMetrics, storedSeries } from "./catalog.ts";
import type { AppliedRule } from "./evaluation.ts";
import { forecastLookbackMs } from "./forecast.ts";
import type { AlertOptions } from "./options.ts";
import { type InstanceData, indexSeries, ruleData, type SeriesIndex, selectSeries } from "./read.ts";
import type { RuleSpec } from "./spec.ts";

/**
 * A cycle's store reads: which reads a project's rules need (planReads), making them a few at a time
 * (runReads), and each rule's share of its read (ruleShare), exactly what the rule's own read would hold.
 */

/** Rules of a project whose lookback is at most this share one store read; longer ones read apart. */
export const SHARED_READ_MAX_LOOKBACK_MS = 30 * 60_000;
/** Store reads in flight at once (the remote backend's are HTTP requests to the engine). */
const READ_CONCURRENCY = 8;

/** One store read of a project, shared by the rules that need it. */
export interface PlannedRead {
  readonly metrics: RuleMetric[];
  /** Undefined = every VM. */
  vmNames: Set<string> | undefined;
  fromMs: number;
  data?: SeriesIndex;
  error?: string;
}

type Windows = Pick<AlertOptions, "maxGapMs" | "samplingIntervalMs">;

/** How far back a rule's evaluation at t looks, ms: its sustained window, the gap allowed, a forecast's lookback. */
export function ruleLookbackMs(metric: RuleMetric, spec: RuleSpec, o: Windows): number {
  const sustainedMs = spec.sustainedSeconds * 1000;
  return metric.kind === "telemetry_age"
    ? sustainedMs + spec.threshold * 1000 + o.maxGapMs
    : sustainedMs + o.maxGapMs + o.samplingIntervalMs + forecastLookbackMs(spec);
}

/**
 * The store reads of one project's rules, by rule id: one per rule that reads the store, merged into
 * one read for every rule with a lookback up to SHARED_READ_MAX_LOOKBACK_MS (the union of their series
 * and VMs over the longest of their windows, each rule cutting out its own), and one per metric for
 * longer ones. A short rule whose stored series and VMs a long read already covers (the 90 % filesystem
 * rule beside the filesystem forecast) takes its share of that read instead, so no series is read
 * twice. Rules that read nothing (inventory rules, no live target) are absent. `live`: the project's
 * live VM names.
 */
export function planReads(
  rules: readonly AppliedRule[],
  live: ReadonlySet<string>,
  atMs: number,
  o: Windows,
): Map<string, PlannedRead> {
  const plan = new Map<string, PlannedRead>();
  const shared = new Map<string, PlannedRead>();
  const short: {
    rule: AppliedRule;
    metric: RuleMetric;
    targets: string[] | undefined;
    lookbackMs: number;
  }[] = [];
  for (const rule of rules) {
    const metric = ruleMetrics.get(rule.spec.metricId);
    if (!metric || storedSeries(metric).length === 0) continue;
    const targets = rule.spec.allVms ? undefined : rule.spec.vmNames.filter((n) => live.has(n));
    if (targets?.length === 0) continue;
    const lookbackMs = ruleLookbackMs(metric, rule.spec, o);
    if (lookbackMs <= SHARED_READ_MAX_LOOKBACK_MS) short.push({ rule, metric, targets, lookbackMs });
    else plan.set(rule.id, joinRead(shared, metric.id, metric, targets, atMs - lookbackMs));
  }
  const long = [...shared.values()];
  for (const { rule, metric, targets, lookbackMs } of short) {
    const covering = long.find((read) => covers(read, metric, targets));
    plan.set(rule.id, covering ?? joinRead(shared, "", metric, targets, atMs - lookbackMs));
  }
  return plan;
}

/** Adds a rule's metric, targets and window to the read of `group` (made on first use). */
function joinRead(
  reads: Map<string, PlannedRead>,
  group: string,
  metric: RuleMetric,
  targets: readonly string[] | undefined,
  fromMs: number,
): PlannedRead {
  let read = reads.get(group);
  if (!read) {
    read = { metrics: [], vmNames: targets && new Set(), fromMs };
    reads.set(group, read);
  }
  if (!read.metrics.includes(metric)) read.metrics.push(metric);
  if (!targets) read.vmNames = undefined;
  else if (read.vmNames) for (const n of targets) read.vmNames.add(n);
  read.fromMs = Math.min(read.fromMs, fromMs);
  return read;
}

/**
 * Whether a (longer) read holds everything a rule's own read would: each of its stored series, its VMs,
 * and no filesystem-type filter the rule's own read would not apply (ruleData applies it per rule).
 */
function covers(read: PlannedRead, metric: RuleMetric, targets: readonly string[] | undefined): boolean {
  const names = new Set(read.metrics.flatMap(storedSeries));
  if (!storedSeries(metric).every((n) => names.has(n))) return false;
  if (read.metrics.every((m) => m.perMountpoint) && !metric.perMountpoint) return false;
  if (!read.vmNames) return true;
  const vms = read.vmNames;
  return targets?.every((n) => vms.has(n)) ?? false;
}

/**
 * After a failed long read, the short rules that rode on it get reads of their own (planReads' shared
 * read, made of them alone): riding must not make the long read's failure theirs, as a remote engine
 * may refuse a long range it would serve short. Updates `plan` and returns the new reads to run.
 */
export function replanFailedRiders(
  rules: readonly AppliedRule[],
  plan: Map<string, PlannedRead>,
  live: ReadonlySet<string>,
  atMs: number,
  o: Windows,
): PlannedRead[] {
  const riders = rules.filter((rule) => {
    const read = plan.get(rule.id);
    const metric = ruleMetrics.get(rule.spec.metricId);
    return (
      read?.error !== undefined &&
      metric !== undefined &&
      read.fromMs < atMs - SHARED_READ_MAX_LOOKBACK_MS &&
      ruleLookbackMs(metric, rule.spec, o) <= SHARED_READ_MAX_LOOKBACK_MS
    );
  });
  if (riders.length === 0) return [];
  const own = planReads(riders, live, atMs, o);
  for (const [id, read] of own) plan.set(id, read);
  return [...new Set(own.values())];
}

/** Runs fn over xs with at most `limit` in flight. */
async function eachLimited<T>(xs: readonly T[], limit: number, fn: (x: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < xs.length) await fn(xs[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(limit, xs.length) }, worker));
}

/** Makes the planned reads up to atMs, a few in flight; each gets its data, or the error that failed it. */
export async function runReads(
  store: MetricsBackend,
  reads: readonly { readonly projectId: string; readonly read: PlannedRead }[],
  atMs: number,
): Promise<void> {
  await eachLimited(reads, READ_CONCURRENCY, async ({ projectId, read: r }) => {
    try {
      r.data = indexSeries(
        await selectSeries(store, projectId, r.metrics, r.vmNames && [...r.vmNames], r.fromMs, atMs),
      );
    } catch (err) {
      r.error = err instanceof Error ? err.message : String(err);
    }
  });
}

/** A rule's share of its read (nothing without one, or when it failed) and the read's error. */
export function ruleShare(
  rule: AppliedRule,
  read: PlannedRead | undefined,
  live: ReadonlySet<string>,
  atMs: number,
  o: Windows,
): { data: Map<string, InstanceData>; readError: string | undefined } {
  const readError = read?.error;
  if (!read?.data || readError !== undefined) return { data: new Map(), readError };
  const { spec } = rule;
  const metric = ruleMetrics.get(spec.metricId) as RuleMetric;
  const vms = spec.allVms ? undefined : new Set(spec.vmNames.filter((n) => live.has(n)));
  return { data: ruleData(metric, read.data, vms, atMs - ruleLookbackMs(metric, spec, o), atMs), readError };
}
