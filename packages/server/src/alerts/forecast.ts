import { linearRegression, predictLinear } from "../promql/index.ts";
import { type Evaluation, evaluateSamples, type InstanceSeries, newestAtOrBefore } from "./condition.ts";
import { breaches, type Forecast, type RuleSpec } from "./spec.ts";

/**
 * Forecast rules (issue 30): the value compared with the threshold is the one a least-squares line over
 * the last `lookbackSeconds` of samples predicts `horizonSeconds` ahead, computed exactly as PromQL's
 * `predict_linear(v[lookback], horizon)` evaluated at the same time: the samples in (t − lookback, t]
 * fitted by the engine's own least-squares line (promql/engine/regression.ts), and fewer than two samples
 * predicting nothing. "Holds" is condition.ts's definition over the predictions made at each
 * sample time instead of the samples, so sustained and no-data semantics are those of every metric rule.
 */

type Condition = Pick<RuleSpec, "operator" | "threshold" | "sustainedSeconds">;

/** The extra history a rule's read needs before its evaluation time, ms (0 without a forecast). */
export function forecastLookbackMs(spec: Pick<RuleSpec, "forecast">): number {
  return spec.forecast ? spec.forecast.lookbackSeconds * 1000 : 0;
}

/** The samples [a, b) in (atMs − lookback, atMs]. */
function lookbackSpan(s: InstanceSeries, atMs: number, lookbackSeconds: number): [number, number] {
  return [newestAtOrBefore(s.t, atMs - lookbackSeconds * 1000) + 1, newestAtOrBefore(s.t, atMs) + 1];
}

/** The line fitted at `atMs` over (atMs − lookback, atMs], or undefined with fewer than two samples. */
export function lineAt(
  s: InstanceSeries,
  atMs: number,
  lookbackSeconds: number,
): { slope: number; intercept: number } | undefined {
  const [a, b] = lookbackSpan(s, atMs, lookbackSeconds);
  if (b - a < 2) return undefined;
  const line = linearRegression(s.t, s.v, a, b, atMs);
  return { slope: line[0], intercept: line[1] };
}

/** predict_linear(v[lookback], horizon) at `atMs`; undefined with fewer than two samples. */
export function predictAt(s: InstanceSeries, atMs: number, f: Forecast): number | undefined {
  const [a, b] = lookbackSpan(s, atMs, f.lookbackSeconds);
  return predictLinear(s.t, s.v, a, b, atMs, f.horizonSeconds);
}

/** Predictions at each sample time, by series: the preview asks for the same ones at every step. */
const atSamples = new WeakMap<InstanceSeries, Map<string, (number | undefined)[]>>();

function predictionAtSample(s: InstanceSeries, j: number, f: Forecast): number | undefined {
  let byForecast = atSamples.get(s);
  if (!byForecast) {
    byForecast = new Map();
    atSamples.set(s, byForecast);
  }
  const k = `${f.horizonSeconds}/${f.lookbackSeconds}`;
  let cache = byForecast.get(k);
  if (!cache) {
    cache = new Array(s.t.length);
    byForecast.set(k, cache);
  }
  if (!(j in cache)) cache[j] = predictAt(s, s.t[j], f);
  return cache[j];
}

/**
 * Evaluates a forecast rule at `atMs`: no_data as for other rules (no sample in the last maxGapMs), or
 * when the lookback holds fewer than two samples; otherwise the prediction at `atMs` decides, and the
 * breach holds when the predictions at the sample times of the last sustainedSeconds breached too.
 */
export function evaluateForecast(
  s: InstanceSeries,
  atMs: number,
  c: Condition,
  maxGapMs: number,
  f: Forecast,
): Evaluation {
  const last = newestAtOrBefore(s.t, atMs);
  if (last < 0 || atMs - s.t[last] > maxGapMs) return evaluateSamples(s, atMs, c, maxGapMs);
  const value = predictAt(s, atMs, f);
  if (value === undefined || Number.isNaN(value))
    return {
      result: "no_data",
      holds: false,
      message: `fewer than two samples in the ${f.lookbackSeconds} s forecast lookback`,
    };
  // "Holds" is evaluateSamples over the predictions at the sample times of the last sustainedSeconds
  // (the newest being the prediction at atMs itself), a prediction of nothing breaking the run as a
  // gap does. Walked back from the newest and made only as far as the walk looks, as evaluateSamples
  // looks: a prediction that does not breach (most of them) ends it, so one line is fitted, not one
  // per sample of the window.
  if (!breaches(c.operator, value, c.threshold)) return { result: "false", holds: false, value };
  if (c.sustainedSeconds === 0) return { result: "true", holds: true, value };
  const needSince = atMs - c.sustainedSeconds * 1000;
  const pending = { result: "true", holds: false, value } as const;
  for (let j = last; s.t[j] > needSince; j--) {
    if (j === 0 || s.t[j] - s.t[j - 1] > maxGapMs) return pending;
    const p = predictionAtSample(s, j - 1, f);
    // A sample whose lookback held one sample predicts nothing: the run starts after it.
    if (p === undefined || Number.isNaN(p) || !breaches(c.operator, p, c.threshold)) return pending;
  }
  return { result: "true", holds: true, value };
}

/** The evaluation of a metric rule's samples: a forecast rule's prediction, or the newest sample. */
export function evaluateMetric(
  s: InstanceSeries,
  atMs: number,
  spec: Pick<RuleSpec, "operator" | "threshold" | "sustainedSeconds" | "forecast">,
  maxGapMs: number,
): Evaluation {
  return spec.forecast
    ? evaluateForecast(s, atMs, spec, maxGapMs, spec.forecast)
    : evaluateSamples(s, atMs, spec, maxGapMs);
}

/**
 * When the line fitted at `atMs` reaches `threshold`, ms; undefined when it is flat, heads away from
 * it, or already breaches it (the caller then shows the breach, not a crossing).
 */
export function crossingTime(
  s: InstanceSeries,
  atMs: number,
  f: Forecast,
  threshold: number,
  breachesNow: (v: number) => boolean,
): number | undefined {
  const l = lineAt(s, atMs, f.lookbackSeconds);
  if (!l || l.slope === 0 || !Number.isFinite(l.slope) || breachesNow(l.intercept)) return undefined;
  const seconds = (threshold - l.intercept) / l.slope;
  return seconds > 0 && Number.isFinite(seconds) ? atMs + Math.round(seconds * 1000) : undefined;
}
