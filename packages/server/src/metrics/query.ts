import type { Db } from "../db/database.ts";
import type { VmTable } from "../db/schema.ts";
import { invalidArgument, SvcError } from "../errors.ts";
import { parseVmName } from "../inventory/names.ts";
import { loadVm } from "../inventory/vms.ts";
import {
  PointBudgetError,
  PromQLParseError,
  QueryEvalError,
  QueryTimeoutError,
  type RangeSeries,
  TooManySamplesError,
} from "../promql/index.ts";
import type { Labels } from "../storage/interface.ts";
import type { LatestSample, MetricsBackend, WindowOutcome, WindowRequest } from "./backend.ts";
import type { ProjectLimiter } from "./concurrency.ts";
import {
  type MetricDef,
  type MetricPlan,
  metricIds,
  planRequests,
  planSeries,
  VM_IDENTITY_LABELS,
} from "./metric-ids.ts";
import type { MetricsOptions } from "./options.ts";
import { coverage, type GapS, isStale, lifetimeWindow } from "./quality.ts";

export interface VmQueryDeps {
  readonly db: Db;
  readonly metrics: MetricsBackend;
  readonly limiter: ProjectLimiter;
  /** Clock, ms since epoch (the TSDB's clock). */
  readonly now: () => number;
  readonly options: MetricsOptions;
}

export interface VmQueryInput {
  readonly name: string;
  readonly metricIds: readonly string[];
  /** Unix seconds. */
  readonly startTimeUnix: bigint;
  /** Unix seconds; 0 means now. */
  readonly endTimeUnix: bigint;
  readonly stepSeconds: number;
}

/**
 * The response, shaped as QueryVMMonitoringResponse (int64 as bigint, Unix seconds), except that each
 * series' points are two columns: a 7-day answer has thousands of points, and the handler turns the
 * columns into protocol messages in one pass instead of copying an object per point twice.
 */
export interface VmQueryResult {
  startTimeUnix: bigint;
  endTimeUnix: bigint;
  stepSeconds: number;
  series: SeriesOut[];
  quality: {
    lastObservedUnix: bigint;
    stale: boolean;
    partial: boolean;
    series: SeriesQualityOut[];
    errors: QueryErrorOut[];
  };
}

export interface SeriesOut {
  metricId: string;
  unit: string;
  labels: Record<string, string>;
  source: string;
  points: PointColumns;
}

/** The steps of a series that have a value, ascending; a step without one is absent, never 0. */
export interface PointColumns {
  /** Step times, Unix seconds. */
  readonly timeUnix: Float64Array;
  readonly value: Float64Array;
}

export interface SeriesQualityOut {
  metricId: string;
  labels: Record<string, string>;
  source: string;
  expectedPoints: number;
  presentPoints: number;
  lastObservedUnix: bigint;
  stale: boolean;
  gaps: { startTimeUnix: bigint; endTimeUnix: bigint }[];
}

export interface QueryErrorOut {
  metricId: string;
  code: string;
  message: string;
  reason: string;
}

/** Served bounds of a query, Unix seconds, on the step grid. */
export interface RangePlan {
  readonly startS: number;
  readonly endS: number;
  readonly stepS: number;
}

const LAST_OBSERVATION = "svc_vm_last_observation_timestamp_seconds";

/**
 * Validates metricIds (known, non-empty, de-duplicated in request order). Unknown ones are refused
 * naming the first and listing what exists.
 */
export function resolveMetricIds(ids: readonly string[]): MetricDef[] {
  if (ids.length === 0) throw invalidArgument("metricIds", "name at least one metric");
  const out: MetricDef[] = [];
  for (const id of ids) {
    const def = metricIds.get(id);
    if (!def) {
      throw invalidArgument(
        "metricIds",
        `unknown metric "${id.slice(0, 80)}"; known: ${[...metricIds.keys()].join(", ")}`,
        { reason: "UNKNOWN_METRIC", metadata: { metricId: id.slice(0, 80) } },
      );
    }
    if (!out.includes(def)) out.push(def);
  }
  return out;
}

/**
 * Aligns the requested range to the step (start rounded up, end rounded down), clamps it to
 * [now − retention, now] and enforces the point budget. Throws invalid_argument naming the field:
 * POINT_BUDGET_EXCEEDED carries `suggestedStepSeconds`, the smallest multiple of the minimum step
 * that fits.
 */
export function planRange(input: VmQueryInput, nowMs: number, o: MetricsOptions): RangePlan {
  const stepS = input.stepSeconds;
  if (!Number.isInteger(stepS) || stepS < o.minStepSeconds)
    throw invalidArgument("stepSeconds", `must be an integer of at least ${o.minStepSeconds}`);
  const nowS = Math.floor(nowMs / 1000);
  const reqStart = Number(input.startTimeUnix);
  const reqEnd = input.endTimeUnix === 0n ? nowS : Number(input.endTimeUnix);
  if (reqStart <= 0) throw invalidArgument("startTimeUnix", "is required (Unix seconds)");
  if (reqEnd < reqStart) throw invalidArgument("endTimeUnix", "must not be before startTimeUnix");
  const retentionS = Math.floor(o.retentionMs / 1000);
  const oldest = nowS - retentionS;
  if (reqEnd < oldest) {
    throw invalidArgument("endTimeUnix", `is older than the ${retentionS / 86400}-day retention`, {
      reason: "RANGE_OUTSIDE_RETENTION",
      metadata: { retentionSeconds: String(retentionS) },
    });
  }
  if (reqStart > nowS) throw invalidArgument("startTimeUnix", "is in the future");
  const endS = Math.floor(Math.min(reqEnd, nowS) / stepS) * stepS;
  let startS = Math.ceil(Math.max(reqStart, oldest) / stepS) * stepS;
  // A range narrower than one step serves the single step point at its end.
  if (startS > endS) startS = endS;
  const points = (endS - startS) / stepS + 1;
  if (points > o.maxPointsPerSeries) {
    const minStep = Math.ceil((endS - startS) / (o.maxPointsPerSeries - 1));
    const suggested = Math.ceil(minStep / o.minStepSeconds) * o.minStepSeconds;
    throw invalidArgument(
      "stepSeconds",
      `${points} points per series exceed the budget of ${o.maxPointsPerSeries}; use stepSeconds ≥ ${suggested} or a shorter range`,
      {
        reason: "POINT_BUDGET_EXCEEDED",
        metadata: {
          maxPoints: String(o.maxPointsPerSeries),
          requestedPoints: String(points),
          suggestedStepSeconds: String(suggested),
        },
      },
    );
  }
  return { startS, endS, stepS };
}

/**
 * QueryVMMonitoring after the caller checked access to the VM's project: reads each metric's PromQL
 * through the backend under the project's concurrency limit and one deadline, and reports quality.
 * A metric that fails or runs out of time is an entry in `quality.errors` (the others are still
 * served); missing samples are absent points.
 */
export async function queryVmMonitoring(deps: VmQueryDeps, input: VmQueryInput): Promise<VmQueryResult> {
  const ref = parseVmName(input.name);
  const defs = resolveMetricIds(input.metricIds);
  const plan = planRange(input, deps.now(), deps.options);
  const vm = await loadVm(deps.db, ref, input.name);
  return deps.limiter.run(ref.projectId, () => runQuery(deps, vm, input.name, defs, plan));
}

interface MetricOutcome {
  readonly def: MetricDef;
  readonly series: RangeSeries[];
}

async function runQuery(
  deps: VmQueryDeps,
  vm: VmTable,
  name: string,
  defs: readonly MetricDef[],
  plan: RangePlan,
): Promise<VmQueryResult> {
  const o = deps.options;
  const { startS, endS, stepS } = plan;
  const deadline = deps.now() + o.queryTimeoutMs;
  const samplingS = o.samplingIntervalMs / 1000;
  const errors: QueryErrorOut[] = [];
  const outcomes: MetricOutcome[] = [];
  const planned: { def: MetricDef; plan: MetricPlan }[] = [];
  for (const def of defs) {
    if (def.expanded && vm.monitoring_level !== "EXPANDED") {
      errors.push({
        metricId: def.id,
        code: "failed_precondition",
        reason: "EXPANDED_MONITORING_REQUIRED",
        message: `${def.id} comes from the guest agent of expanded monitoring; this VM's monitoring level is ${vm.monitoring_level} (enable it with EnableExpandedMonitoring)`,
      });
      continue;
    }
    planned.push({ def, plan: def.plan(stepS, samplingS) });
  }
  // One backend call for every metric: a stored series that several metrics read (memory used for
  // memory_used_bytes and memory_used_pct) is read once, and each series' samples are swept once
  // per aggregate instead of evaluating PromQL per metric.
  const requests: WindowRequest[] = [];
  const indexOf = (r: WindowRequest): number => {
    let i = requests.findIndex((x) => x.metric === r.metric && x.fn === r.fn && x.windowMs === r.windowMs);
    if (i < 0) i = requests.push(r) - 1;
    return i;
  };
  const slots = planned.map(({ plan }) => planRequests(plan).map(indexOf));
  // The newest observations do not depend on the window reads: read them alongside.
  const latestRead = readNewest(
    deps,
    vm,
    name,
    planned.map((p) => p.def),
    plan,
  );
  // Settled here, so a failure while the window reads run is not an unhandled rejection.
  latestRead.catch(() => {});
  const remaining = deadline - deps.now();
  let results: WindowOutcome[];
  if (planned.length === 0) results = [];
  else if (remaining <= 0)
    results = requests.map(() => ({ ok: false, error: new QueryTimeoutError("deadline passed") }));
  else {
    try {
      results = await deps.metrics.windowAggregates(
        vm.project_id,
        [{ type: "=", name: "vm", value: name }],
        requests,
        startS * 1000,
        endS * 1000,
        stepS * 1000,
        { timeoutMs: remaining },
      );
    } catch (err) {
      results = requests.map(() => ({
        ok: false,
        error: err instanceof Error ? err : new Error(String(err)),
      }));
    }
  }
  planned.forEach(({ def, plan }, k) => {
    const got = slots[k].map((i) => results[i]);
    const failed = got.find((o) => !o.ok);
    if (failed && !failed.ok) {
      errors.push(toQueryError(def.id, failed.error, o.queryTimeoutMs));
      return;
    }
    const matrices = got.map((o) => (o.ok ? o.series : []));
    try {
      const series = planSeries(plan, matrices);
      outcomes.push({ def, series });
    } catch (err) {
      errors.push(toQueryError(def.id, err, o.queryTimeoutMs));
    }
  });
  // Errors in request order, as the metrics were asked for.
  const order = new Map(defs.map((d, i) => [d.id, i]));
  errors.sort((a, b) => (order.get(a.metricId) ?? 0) - (order.get(b.metricId) ?? 0));

  const observed = newestObservations(await latestRead, outcomes);
  const staleAfterS = (o.staleAfterIntervals * o.samplingIntervalMs) / 1000;
  const series: SeriesOut[] = [];
  const seriesQuality: SeriesQualityOut[] = [];
  for (const { def, series: result } of outcomes) {
    const sorted = result
      .map((s) => ({ s, labels: deviceLabels(s.metric), source: sourceOf(s.metric, def) }))
      .sort((a, b) => cmp(keyOf(a.source, a.labels), keyOf(b.source, b.labels)));
    for (const { s, labels, source } of sorted) {
      const points = finitePoints(s);
      series.push({ metricId: def.id, unit: def.unit, labels, source: wireSource(source), points });
      const last = observed.perSeries.get(`${def.id}\u0000${keyOf(source, labels)}`);
      seriesQuality.push(qualityOf(def.id, labels, source, points.timeUnix, last, plan, vm, staleAfterS));
    }
    if (result.length === 0) {
      // Requested but nothing stored in range: one entry saying so, all of it a gap.
      seriesQuality.push(
        qualityOf(def.id, {}, def.source, new Float64Array(0), undefined, plan, vm, staleAfterS),
      );
    }
  }
  const vmLast = observed.vm;
  return {
    startTimeUnix: BigInt(startS),
    endTimeUnix: BigInt(endS),
    stepSeconds: stepS,
    series,
    quality: {
      lastObservedUnix: BigInt(vmLast ?? 0),
      stale: isStale(vmLast, endS, staleAfterS),
      partial: errors.length > 0,
      series: seriesQuality,
      errors,
    },
  };
}

/**
 * The step values of a series as columns in Unix seconds. NaN or ±Inf (e.g. a ratio over a zero
 * capacity) is no measurement: those steps are absent, never 0.
 */
function finitePoints(s: RangeSeries): PointColumns {
  let n = 0;
  for (let i = 0; i < s.values.length; i++) if (Number.isFinite(s.values[i])) n++;
  const timeUnix = new Float64Array(n);
  const value = n === s.values.length ? s.values : new Float64Array(n);
  for (let i = 0, k = 0; i < s.values.length; i++) {
    if (!Number.isFinite(s.values[i])) continue;
    timeUnix[k] = s.timestamps[i] / 1000;
    value[k++] = s.values[i];
  }
  return { timeUnix, value };
}

function qualityOf(
  metricId: string,
  labels: Record<string, string>,
  source: string,
  times: Float64Array,
  lastObservedS: number | undefined,
  plan: RangePlan,
  vm: VmTable,
  staleAfterS: number,
): SeriesQualityOut {
  const { fromS, toS } = lifetimeWindow(
    plan.startS,
    plan.endS,
    plan.stepS,
    vm.create_time / 1000,
    vm.delete_time === null ? undefined : vm.delete_time / 1000,
    times[0],
  );
  const c = coverage(times, fromS, toS, plan.stepS);
  return {
    metricId,
    labels,
    source: wireSource(source),
    expectedPoints: c.expectedPoints,
    presentPoints: c.presentPoints,
    lastObservedUnix: BigInt(Math.floor(lastObservedS ?? 0)),
    stale: isStale(lastObservedS, plan.endS, staleAfterS),
    gaps: c.gaps.map((g: GapS) => ({
      startTimeUnix: BigInt(g.startTimeUnix),
      endTimeUnix: BigInt(g.endTimeUnix),
    })),
  };
}

/**
 * The newest samples of the stored series behind `defs` (and the VM's observation series), from one
 * `latest` read over the last hour of the range; only series with nothing in that hour are looked
 * up again over the whole range (they are stale anyway, but their last time is still reported).
 */
async function readNewest(
  deps: VmQueryDeps,
  vm: VmTable,
  name: string,
  defs: readonly MetricDef[],
  plan: RangePlan,
): Promise<LatestSample[]> {
  const stored = storedNames(defs);
  const endMs = plan.endS * 1000;
  const read = (names: Iterable<string>, lookbackMs: number) =>
    deps.metrics.latest(
      vm.project_id,
      [
        { type: "=~", name: "__name__", value: [...names].join("|") },
        { type: "=", name: "vm", value: name },
      ],
      endMs,
      lookbackMs,
    );
  const recent = Math.min(deps.options.latestLookbackMs, endMs - plan.startS * 1000 + plan.stepS * 1000);
  let samples: LatestSample[] = await read(stored, recent);
  const seen = new Set(samples.map((s) => nameOf(s.labels)));
  const missing = [...stored].filter((n) => !seen.has(n));
  if (missing.length > 0 && recent < (plan.endS - plan.startS + plan.stepS) * 1000) {
    samples = samples.concat(await read(missing, (plan.endS - plan.startS + plan.stepS) * 1000));
  }
  return samples;
}

function storedNames(defs: readonly MetricDef[]): Set<string> {
  const stored = new Set<string>([LAST_OBSERVATION]);
  for (const def of defs) for (const s of def.series) stored.add(s);
  return stored;
}

/**
 * Newest source observation (Unix s, ≤ the range end) per result series and for the VM, from
 * readNewest's samples; only the series of metrics that were served count (a failed metric's
 * samples were read alongside, before it failed).
 */
function newestObservations(
  latest: readonly LatestSample[],
  outcomes: readonly MetricOutcome[],
): { perSeries: Map<string, number>; vm: number | undefined } {
  const stored = storedNames(outcomes.map((o) => o.def));
  const samples = latest.filter((s) => stored.has(nameOf(s.labels)));
  const byStored = new Map<string, number>();
  let vmLast: number | undefined;
  for (const s of samples) {
    const n = nameOf(s.labels);
    if (n === LAST_OBSERVATION) {
      vmLast = Math.max(vmLast ?? 0, s.value);
      continue;
    }
    const k = `${n}\u0000${keyOf(s.labels.find((l) => l.name === "source")?.value ?? "", deviceLabels(s.labels))}`;
    byStored.set(k, Math.max(byStored.get(k) ?? 0, s.timestampMs / 1000));
  }
  const perSeries = new Map<string, number>();
  for (const { def, series } of outcomes) {
    for (const r of series) {
      const key = keyOf(sourceOf(r.metric, def), deviceLabels(r.metric));
      let last: number | undefined;
      for (const n of def.series) {
        const t = byStored.get(`${n}\u0000${key}`);
        if (t !== undefined) last = Math.max(last ?? 0, t);
      }
      if (last !== undefined) perSeries.set(`${def.id}\u0000${key}`, last);
    }
  }
  // The derived observation series has one sample per ingest batch, so inside a range that ends in
  // the past the read series themselves can be newer: take the newest of both.
  for (const t of byStored.values()) vmLast = Math.max(vmLast ?? 0, t);
  return { perSeries, vm: vmLast === undefined ? undefined : Math.floor(vmLast) };
}

function timeoutError(metricId: string, timeoutMs: number): QueryErrorOut {
  return {
    metricId,
    code: "deadline_exceeded",
    reason: "QUERY_TIMEOUT",
    message: `stopped: the query ran past its ${timeoutMs / 1000} s deadline; narrow the range or request fewer metrics`,
  };
}

function toQueryError(metricId: string, err: unknown, timeoutMs: number): QueryErrorOut {
  if (err instanceof QueryTimeoutError) return timeoutError(metricId, timeoutMs);
  if (err instanceof TooManySamplesError || err instanceof PointBudgetError)
    return { metricId, code: "invalid_argument", reason: "", message: err.message };
  if (err instanceof QueryEvalError || err instanceof PromQLParseError)
    return { metricId, code: "internal", reason: "", message: err.message };
  if (err instanceof SvcError)
    return { metricId, code: err.code, reason: err.reason ?? "", message: err.message };
  return { metricId, code: "internal", reason: "INTERNAL", message: "the metric could not be read" };
}

function nameOf(labels: Labels): string {
  return labels.find((l) => l.name === "__name__")?.value ?? "";
}

function sourceOf(labels: Labels, def: MetricDef): string {
  return labels.find((l) => l.name === "source")?.value ?? def.source;
}

/** Per-device labels of a series (device, interface, mountpoint, fstype): what tells series apart. */
function deviceLabels(labels: Labels): Record<string, string> {
  const out: Record<string, string> = {};
  for (const l of labels) if (!VM_IDENTITY_LABELS.has(l.name)) out[l.name] = l.value;
  return out;
}

function keyOf(source: string, labels: Record<string, string>): string {
  return [
    source,
    ...Object.keys(labels)
      .sort()
      .map((k) => `${k}=${labels[k]}`),
  ].join("\u0001");
}

function wireSource(source: string): string {
  return source === "guest_agent" ? "GUEST_AGENT" : "HYPERVISOR";
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
