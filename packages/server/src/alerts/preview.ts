import type { Db } from "../db/database.ts";
import { invalidArgument } from "../errors.ts";
import { authorizeProject, type Principal } from "../iam/principal.ts";
import { parseProjectName } from "../inventory/names.ts";
import type { MetricsBackend } from "../metrics/backend.ts";
import { QueryTimeoutError } from "../promql/index.ts";
import { ruleMetrics } from "./catalog.ts";
import {
  type Evaluation,
  evaluateTelemetryAge,
  evaluateUnexpectedStop,
  type VmTimeline,
} from "./condition.ts";
import { crossingTime, evaluateMetric, forecastLookbackMs, lineAt, predictAt } from "./forecast.ts";
import type { AlertOptions } from "./options.ts";
import { type InstanceData, instanceKey, readRuleData, readTimelines } from "./read.ts";
import { liveVms } from "./rules.ts";
import { breaches, type RuleSpec, type SpecInput, validateSpec } from "./spec.ts";
import { type InstanceStatus, inactive, step } from "./state.ts";

export interface PreviewInstanceView {
  vmName: string;
  mountpoint: string;
  firingIntervals: { startTimeUnix: bigint; endTimeUnix: bigint }[];
  finalState: string;
  evaluatedSamples: bigint;
  expectedSamples: bigint;
  noDataEvaluations: number;
  errorEvaluations: number;
  /** Forecast rules: predictions at evaluation times, the line at the end, its crossing. */
  forecast: { timeUnix: bigint; value: number }[];
  forecastLine: { timeUnix: bigint; value: number }[];
  predictedCrossingTimeUnix?: bigint;
}

/** Most forecast points drawn per instance. */
export const MAX_FORECAST_POINTS = 500;

export interface PreviewView {
  queryStatus: "OK" | "ERROR" | "TIMEOUT";
  queryMessage: string;
  historyStatus: "COMPLETE" | "CUT_BY_RETENTION" | "PARTIAL";
  evaluatedSamples: bigint;
  expectedSamples: bigint;
  startTimeUnix: bigint;
  endTimeUnix: bigint;
  evaluationIntervalSeconds: number;
  instances: PreviewInstanceView[];
  firingInstances: number;
}

export interface PreviewDeps {
  readonly db: Db;
  readonly metrics: MetricsBackend;
  readonly options: AlertOptions;
}

/**
 * PreviewAlertRule: the evaluator's own state machine (state.ts) and condition (condition.ts) run at
 * every evaluation time of the window, each instance starting INACTIVE, over one read of the window's
 * history. Saves nothing and sends nothing.
 */
export async function previewAlertRule(
  deps: PreviewDeps,
  p: Principal,
  req: { projectName: string; spec?: SpecInput; historySeconds: number },
  nowMs: number,
): Promise<PreviewView> {
  const { db, options } = deps;
  const projectId = parseProjectName(req.projectName);
  await authorizeProject(db, p, projectId, "monitoring.read");
  const spec = validateSpec(req.spec, projectId, options);
  const h = req.historySeconds;
  if (!Number.isInteger(h) || h < 1 || h > options.maxPreviewHistorySeconds)
    throw invalidArgument("historySeconds", `must be 1..${options.maxPreviewHistorySeconds}`);
  const vms = await liveVms(db, projectId);
  const live = new Set(vms.map((v) => v.name));
  for (const [i, n] of spec.vmNames.entries())
    if (!live.has(n)) throw invalidArgument(`spec.vmNames[${i}]`, `${n} is not a VM of this project`);
  const interval = options.evaluationIntervalMs;
  const endMs = Math.floor(nowMs / interval) * interval;
  let startMs = endMs - Math.floor((h * 1000) / interval) * interval;
  let historyStatus: PreviewView["historyStatus"] = "COMPLETE";
  const oldest = Math.ceil((nowMs - options.metricsRetentionMs) / interval) * interval;
  if (startMs < oldest) {
    startMs = oldest;
    historyStatus = "CUT_BY_RETENTION";
  }
  return runPreview(deps, projectId, spec, vms, startMs, endMs, historyStatus);
}

/** The preview over [startMs, endMs] on the evaluation grid (exported for the agreement test). */
export async function runPreview(
  deps: PreviewDeps,
  projectId: string,
  spec: RuleSpec,
  vms: readonly { name: string; state: string; createTime: number }[],
  startMs: number,
  endMs: number,
  historyStatus: PreviewView["historyStatus"] = "COMPLETE",
): Promise<PreviewView> {
  const { db, metrics, options } = deps;
  const metric = ruleMetrics.get(spec.metricId);
  if (!metric) throw invalidArgument("spec.metricId", "is unknown");
  const interval = options.evaluationIntervalMs;
  const live = new Set(vms.map((v) => v.name));
  const targets = spec.allVms ? vms.map((v) => v.name) : spec.vmNames.filter((n) => live.has(n));
  const sustainedMs = spec.sustainedSeconds * 1000;
  const lookbackMs =
    metric.kind === "telemetry_age"
      ? sustainedMs + spec.threshold * 1000 + options.maxGapMs
      : sustainedMs + options.maxGapMs + options.samplingIntervalMs + forecastLookbackMs(spec);
  let queryStatus: PreviewView["queryStatus"] = "OK";
  let queryMessage = "";
  let data = new Map<string, InstanceData>();
  try {
    data = await readRuleData(
      metrics,
      projectId,
      metric,
      spec.allVms ? undefined : targets,
      startMs - lookbackMs,
      endMs,
    );
  } catch (err) {
    queryStatus = err instanceof QueryTimeoutError ? "TIMEOUT" : "ERROR";
    queryMessage = err instanceof Error ? err.message : String(err);
  }
  const timelines =
    metric.kind === "unexpected_stop" || metric.kind === "telemetry_age"
      ? await readTimelines(
          db,
          projectId,
          vms.filter((v) => targets.includes(v.name)),
          endMs,
        )
      : undefined;
  const instances = new Map<string, { vmName: string; mountpoint: string }>();
  const targetSet = new Set(targets);
  if (metric.perMountpoint) {
    for (const [k, d] of data) if (targetSet.has(d.vmName)) instances.set(k, d);
  } else for (const vm of targets) instances.set(instanceKey(vm, ""), { vmName: vm, mountpoint: "" });
  const steps = Math.floor((endMs - startMs) / interval) + 1;
  const expectedPerInstance =
    metric.kind === "unexpected_stop" ? 0 : Math.floor((endMs - startMs) / options.samplingIntervalMs);
  const out: PreviewInstanceView[] = [];
  let evaluatedTotal = 0;
  let expectedTotal = 0;
  let firing = 0;
  let partial = false;
  let n = 0;
  for (const [key, inst] of instances) {
    // Give the event loop back now and then: a day of 10,000 instances is millions of evaluations.
    if (++n % 200 === 0) await new Promise((r) => setImmediate(r));
    const d = data.get(key);
    const tl = timelines?.get(inst.vmName);
    let status: InstanceStatus = { ...inactive, stateSince: startMs };
    const intervals: { startTimeUnix: bigint; endTimeUnix: bigint }[] = [];
    let openAt: number | undefined;
    let noData = 0;
    let errors = 0;
    for (let i = 0; i < steps; i++) {
      const t = startMs + i * interval;
      const ev = evaluateAt(
        metric.kind,
        spec,
        d,
        tl,
        queryStatus === "OK" ? undefined : queryMessage,
        t,
        options,
      );
      if (ev.result === "no_data") noData++;
      if (ev.result === "error") errors++;
      const r = step(status, ev, t);
      status = r.next;
      if (r.transition === "FIRED") openAt = t;
      if (r.transition === "RESOLVED" && openAt !== undefined) {
        intervals.push({ startTimeUnix: BigInt(openAt / 1000), endTimeUnix: BigInt(t / 1000) });
        openAt = undefined;
      }
    }
    if (openAt !== undefined) intervals.push({ startTimeUnix: BigInt(openAt / 1000), endTimeUnix: 0n });
    const drawn = spec.forecast && d ? drawForecast(d, spec, startMs, endMs, interval) : undefined;
    let evaluated = 0;
    if (d) for (const t of d.series.t) if (t > startMs && t <= endMs) evaluated++;
    if (metric.kind === "unexpected_stop") evaluated = 0;
    evaluatedTotal += evaluated;
    expectedTotal += expectedPerInstance;
    if (intervals.length > 0) firing++;
    if (noData > 0) partial = true;
    out.push({
      vmName: inst.vmName,
      mountpoint: inst.mountpoint,
      firingIntervals: intervals,
      finalState: status.state,
      evaluatedSamples: BigInt(evaluated),
      expectedSamples: BigInt(expectedPerInstance),
      noDataEvaluations: noData,
      errorEvaluations: errors,
      forecast: drawn?.forecast ?? [],
      forecastLine: drawn?.line ?? [],
      ...(drawn?.crossing !== undefined ? { predictedCrossingTimeUnix: drawn.crossing } : {}),
    });
  }
  return {
    queryStatus,
    queryMessage,
    historyStatus: historyStatus === "COMPLETE" && partial ? "PARTIAL" : historyStatus,
    evaluatedSamples: BigInt(evaluatedTotal),
    expectedSamples: BigInt(expectedTotal),
    startTimeUnix: BigInt(startMs / 1000),
    endTimeUnix: BigInt(endMs / 1000),
    evaluationIntervalSeconds: interval / 1000,
    instances: out,
    firingInstances: firing,
  };
}

function evaluateAt(
  kind: string,
  spec: RuleSpec,
  d: InstanceData | undefined,
  tl: VmTimeline | undefined,
  readError: string | undefined,
  t: number,
  options: AlertOptions,
): Evaluation {
  if (kind === "unexpected_stop") {
    return tl
      ? evaluateUnexpectedStop(tl, t, spec)
      : { result: "error", holds: false, message: "no inventory" };
  }
  if (readError !== undefined) return { result: "error", holds: false, message: readError };
  if (kind === "telemetry_age") {
    return tl
      ? evaluateTelemetryAge(tl, d?.series.t ?? [], t, spec)
      : { result: "error", holds: false, message: "no inventory" };
  }
  if (!d) return { result: "no_data", holds: false, message: "no samples" };
  return evaluateMetric(d.series, t, spec, options.maxGapMs);
}

/**
 * What the preview draws of a forecast rule: the prediction at evaluation times (at most
 * MAX_FORECAST_POINTS, evenly picked), the line fitted at the end of the window from its end to the
 * horizon, and when that line reaches the threshold.
 */
function drawForecast(d: InstanceData, spec: RuleSpec, startMs: number, endMs: number, interval: number) {
  const f = spec.forecast;
  if (!f) return undefined;
  const steps = Math.floor((endMs - startMs) / interval) + 1;
  const every = Math.max(1, Math.ceil(steps / MAX_FORECAST_POINTS));
  const forecast: { timeUnix: bigint; value: number }[] = [];
  for (let i = 0; i < steps; i += every) {
    const t = startMs + i * interval;
    const v = predictAt(d.series, t, f);
    if (v !== undefined && Number.isFinite(v))
      forecast.push({ timeUnix: BigInt(Math.floor(t / 1000)), value: v });
  }
  const l = lineAt(d.series, endMs, f.lookbackSeconds);
  const line =
    l && Number.isFinite(l.slope)
      ? [
          { timeUnix: BigInt(Math.floor(endMs / 1000)), value: l.intercept },
          {
            timeUnix: BigInt(Math.floor(endMs / 1000) + f.horizonSeconds),
            value: l.intercept + l.slope * f.horizonSeconds,
          },
        ]
      : [];
  const at = crossingTime(d.series, endMs, f, spec.threshold, (v) =>
    breaches(spec.operator, v, spec.threshold),
  );
  return { forecast, line, crossing: at === undefined ? undefined : BigInt(Math.floor(at / 1000)) };
}
