/** createEngine: instant and range queries over a Queryable, returning Prometheus-shaped values. */
import { performance } from "node:perf_hooks";
import type { Labels, Queryable } from "../../storage/interface.ts";
import { type Expr, typeOf } from "../ast.ts";
import { PointBudgetError, QueryEvalError } from "../errors.ts";
import { type EngineOptions, type QueryOptions, resolveEngineOptions } from "../options.ts";
import { Annotations } from "./annotations.ts";
import { Evaluator, fillBounds } from "./evaluator.ts";
import { dropMetricName, labelsKey } from "./labels.ts";
import type { StepSeries, Value } from "./types.ts";

/** One sample of an instant vector; `t` in ms. */
export interface InstantSample {
  readonly metric: Labels;
  readonly t: number;
  readonly v: number;
}

/** One series of a matrix; `timestamps` (ms, ascending) and `values` belong to the caller. */
export interface RangeSeries {
  readonly metric: Labels;
  readonly timestamps: Float64Array;
  readonly values: Float64Array;
}

/** A query result as Prometheus' API shapes it (times in ms). */
export type QueryValue =
  | { readonly resultType: "vector"; readonly result: InstantSample[] }
  | { readonly resultType: "matrix"; readonly result: RangeSeries[] }
  | { readonly resultType: "scalar"; readonly result: { readonly t: number; readonly v: number } }
  | { readonly resultType: "string"; readonly result: { readonly t: number; readonly v: string } };

/**
 * What a query cost, as Prometheus 3's `stats` reports it: `totalQueryableSamples` the samples read
 * from storage (a selector read twice in one query counts once), `peakSamples` the samples the
 * engine accounted in memory against its sample limit (svc counts them cumulatively, so this is at
 * least Prometheus' peak).
 */
export interface QueryStats {
  readonly totalQueryableSamples: number;
  readonly peakSamples: number;
}

export interface QueryResult {
  readonly value: QueryValue;
  readonly annotations: { readonly warnings: string[]; readonly infos: string[] };
  readonly stats?: QueryStats;
}

export interface Engine {
  readonly options: EngineOptions;
  /** Evaluates `expr` at `timeMs`. Synchronous; the deadline is checked cooperatively. */
  instantQuery(queryable: Queryable, expr: Expr, timeMs: number, opts?: QueryOptions): QueryResult;
  /** Evaluates `expr` at start, start+step, ... <= end (all ms, inclusive). Result is always a matrix. */
  rangeQuery(
    queryable: Queryable,
    expr: Expr,
    startMs: number,
    endMs: number,
    stepMs: number,
    opts?: QueryOptions,
  ): QueryResult;
}

export function createEngine(overrides: Partial<EngineOptions> = {}): Engine {
  return new EngineImpl(resolveEngineOptions(overrides));
}

class EngineImpl implements Engine {
  constructor(readonly options: EngineOptions) {}

  #evaluator(q: Queryable, startMs: number, endMs: number, opts: QueryOptions | undefined, ann: Annotations) {
    const timeout = opts?.timeoutMs ?? this.options.timeoutMs;
    return new Evaluator({
      querier: q.querier(),
      startMs,
      endMs,
      lookbackMs: opts?.lookbackDeltaMs ?? this.options.lookbackDeltaMs,
      defaultSubqueryStepMs: this.options.defaultSubqueryStepMs,
      maxSamples: this.options.maxSamples,
      deadline: timeout > 0 ? performance.now() + timeout : Number.POSITIVE_INFINITY,
      signal: opts?.signal,
      annotations: ann,
    });
  }

  instantQuery(q: Queryable, expr: Expr, timeMs: number, opts?: QueryOptions): QueryResult {
    const ann = new Annotations();
    const ev = this.#evaluator(q, timeMs, timeMs, opts, ann);
    const ts = Float64Array.of(timeMs);
    const v = ev.eval(expr, ts);
    return { value: shapeInstant(v, timeMs), annotations: done(ann), stats: ev.stats() };
  }

  rangeQuery(
    q: Queryable,
    expr: Expr,
    startMs: number,
    endMs: number,
    stepMs: number,
    opts?: QueryOptions,
  ): QueryResult {
    if (!(stepMs > 0))
      throw new QueryEvalError("zero or negative query resolution step widths are not accepted");
    if (endMs < startMs) throw new QueryEvalError("end timestamp must not be before start time");
    const t = typeOf(expr);
    if (t !== "vector" && t !== "scalar") {
      throw new QueryEvalError(
        `invalid expression type "${t === "matrix" ? "range vector" : t}" for range query, must be Scalar or instant Vector`,
      );
    }
    const points = Math.floor((endMs - startMs) / stepMs) + 1;
    if (points > this.options.maxPointsPerSeries)
      throw new PointBudgetError(points, this.options.maxPointsPerSeries);
    const ann = new Annotations();
    const ev = this.#evaluator(q, startMs, endMs, opts, ann);
    const ts = new Float64Array(points);
    for (let i = 0; i < points; i++) ts[i] = startMs + i * stepMs;
    const v = ev.eval(expr, ts);
    let series: StepSeries[];
    if (v.type === "scalar") {
      series = [{ labels: [], values: v.values, present: new Uint8Array(points).fill(1), dropName: false }];
    } else if (v.type === "vector") series = finish(v.series);
    else throw new QueryEvalError("range query must return a vector or scalar");
    const result: RangeSeries[] = [];
    for (const s of series) {
      let cnt = 0;
      for (let i = 0; i < points; i++) cnt += s.present[i];
      if (cnt === 0) continue;
      const tt = new Float64Array(cnt);
      const vv = new Float64Array(cnt);
      let k = 0;
      for (let i = 0; i < points; i++) {
        if (!s.present[i]) continue;
        tt[k] = ts[i];
        vv[k++] = s.values[i];
      }
      result.push({ metric: s.labels, timestamps: tt, values: vv });
    }
    return { value: { resultType: "matrix", result }, annotations: done(ann), stats: ev.stats() };
  }
}

function done(ann: Annotations) {
  return { warnings: [...ann.warnings], infos: [...ann.infos] };
}

/**
 * Delayed name removal, then Prometheus' final duplicate check. Series that end up with one label set
 * are one series of the result when they never hold a value at the same step (`count(x > 5) or
 * vector(0)` over a range: the left side at some steps, the right at the others), as Prometheus
 * merges a range query's steps by label set; two values at one step are the error.
 */
function finish(series: StepSeries[]): StepSeries[] {
  const out: StepSeries[] = [];
  const byKey = new Map<string, StepSeries>();
  for (const raw of series) {
    const s = raw.dropName ? { ...raw, labels: dropMetricName(raw.labels), dropName: false } : raw;
    if (!s.present.some((p) => p === 1)) {
      out.push(s);
      continue;
    }
    const k = labelsKey(s.labels);
    const first = byKey.get(k);
    if (first === undefined) {
      byKey.set(k, s);
      out.push(s);
      continue;
    }
    for (let i = 0; i < s.present.length; i++) {
      if (!s.present[i]) continue;
      if (first.present[i]) throw new QueryEvalError("vector cannot contain metrics with the same labelset");
    }
    // Merged into a copy: the first series' arrays may belong to an operand.
    const merged = {
      ...first,
      values: Float64Array.from(first.values),
      present: Uint8Array.from(first.present),
    };
    for (let i = 0; i < s.present.length; i++) {
      if (!s.present[i]) continue;
      merged.values[i] = s.values[i];
      merged.present[i] = 1;
    }
    out[out.indexOf(first)] = merged;
    byKey.set(k, merged);
  }
  return out;
}

function shapeInstant(v: Value, t: number): QueryValue {
  switch (v.type) {
    case "scalar":
      return { resultType: "scalar", result: { t, v: v.values[0] } };
    case "string":
      return { resultType: "string", result: { t, v: v.value } };
    case "vector": {
      const result: InstantSample[] = [];
      for (const s of finish(v.series))
        if (s.present[0]) result.push({ metric: s.labels, t, v: s.values[0] });
      return { resultType: "vector", result };
    }
    case "matrix": {
      const w = v.windows;
      const lo = new Int32Array(1);
      const hi = new Int32Array(1);
      const result: RangeSeries[] = [];
      const seen = new Set<string>();
      for (const s of w.series) {
        fillBounds(s, w, lo, hi);
        if (hi[0] <= lo[0]) continue;
        const metric = s.dropName ? dropMetricName(s.labels) : s.labels;
        const k = labelsKey(metric);
        if (seen.has(k)) throw new QueryEvalError("vector cannot contain metrics with the same labelset");
        seen.add(k);
        result.push({
          metric,
          timestamps: s.timestamps.slice(lo[0], hi[0]),
          values: s.values.slice(lo[0], hi[0]),
        });
      }
      return { resultType: "matrix", result };
    }
  }
}
