/**
 * The evaluator: every node is evaluated at an array of timestamps (one for an instant query,
 * the step grid for a range query or a subquery) and returns column-oriented values.
 */
import { performance } from "node:perf_hooks";
import { isStaleMarker, type Querier, type SelectHints, type SeriesData } from "../../storage/interface.ts";
import type { AtModifier, Expr, MatrixSelector, Subquery, VectorSelector } from "../ast.ts";
import { QueryEvalError, QueryTimeoutError, TooManySamplesError } from "../errors.ts";
import { evalAggregate } from "./aggregate.ts";
import type { Annotations } from "./annotations.ts";
import { evalBinary } from "./binary.ts";
import { evalCall } from "./functions.ts";
import { labelsString } from "./labels.ts";
import {
  newStepSeries,
  type RawSeries,
  type StepSeries,
  stepF64,
  type Value,
  type Windows,
} from "./types.ts";

export interface EvalContext {
  readonly querier: Querier;
  /** Query start and end, ms (what `@ start()` / `@ end()` mean). */
  readonly startMs: number;
  readonly endMs: number;
  readonly lookbackMs: number;
  readonly defaultSubqueryStepMs: number;
  readonly maxSamples: number;
  /** performance.now() value after which evaluation stops; Infinity for none. */
  readonly deadline: number;
  readonly signal?: AbortSignal;
  readonly annotations: Annotations;
}

const CHECK_EVERY = 64;

export class Evaluator {
  #ticks = 0;
  #samples = 0;
  #loaded = 0;
  readonly #selected = new Map<string, SeriesData[]>();
  constructor(readonly ctx: EvalContext) {}

  /** Cooperative cancellation point; cheap, call it inside loops. */
  tick(): void {
    if (this.ctx.signal?.aborted) throw new QueryTimeoutError("query aborted");
    if (++this.#ticks % CHECK_EVERY !== 0) return;
    if (performance.now() > this.ctx.deadline) throw new QueryTimeoutError();
  }

  /** The query's cost so far (engine.ts QueryStats). */
  stats(): { totalQueryableSamples: number; peakSamples: number } {
    return { totalQueryableSamples: this.#loaded, peakSamples: this.#samples };
  }

  /** Accounts for samples held in memory; throws past the limit. */
  addSamples(n: number): void {
    this.#samples += n;
    if (this.#samples > this.ctx.maxSamples)
      throw new TooManySamplesError(this.ctx.maxSamples, this.#samples);
  }

  eval(e: Expr, ts: Float64Array): Value {
    this.tick();
    switch (e.kind) {
      case "NumberLiteral":
        return { type: "scalar", values: new Float64Array(ts.length).fill(e.value) };
      case "StringLiteral":
        return { type: "string", value: e.value };
      case "Paren":
        return this.eval(e.expr, ts);
      case "Unary": {
        const v = this.eval(e.expr, ts);
        if (e.op === "+") return v;
        if (v.type === "scalar") return { type: "scalar", values: v.values.map((x) => -x) };
        if (v.type !== "vector") throw new QueryEvalError("unary minus on a non-numeric value");
        return {
          type: "vector",
          series: v.series.map((s) => ({
            ...s,
            values: s.values.map((x) => -x),
            dropName: true,
            sampleTs: undefined,
          })),
        };
      }
      case "VectorSelector":
        return { type: "vector", series: this.instantSelect(e, ts) };
      case "MatrixSelector":
      case "Subquery":
        return { type: "matrix", windows: this.windows(e, ts) };
      case "Call":
        return evalCall(this, e, ts);
      case "Aggregate":
        return evalAggregate(this, e, ts);
      case "Binary":
        return evalBinary(this, e, ts);
      default: {
        const never: never = e;
        throw new QueryEvalError(`unsupported node ${(never as Expr).kind}`);
      }
    }
  }

  /** Evaluates an expression that must yield an instant vector. */
  evalVector(e: Expr, ts: Float64Array): StepSeries[] {
    const v = this.eval(e, ts);
    if (v.type !== "vector") throw new QueryEvalError(`expected instant vector, got ${v.type}`);
    return v.series;
  }

  /** Evaluates an expression that must yield a scalar (one value per step). */
  evalScalar(e: Expr, ts: Float64Array): Float64Array {
    const v = this.eval(e, ts);
    if (v.type !== "scalar") throw new QueryEvalError(`expected scalar, got ${v.type}`);
    return v.values;
  }

  resolveAt(at: AtModifier | null, t: number): number {
    if (at === null) return t;
    if (at === "start") return this.ctx.startMs;
    if (at === "end") return this.ctx.endMs;
    return at.time;
  }

  /** Effective evaluation times after `@` and `offset`. */
  effectiveTimes(at: AtModifier | null, offsetMs: number, ts: Float64Array): Float64Array {
    const out = new Float64Array(ts.length);
    for (let i = 0; i < ts.length; i++) out[i] = this.resolveAt(at, ts[i]) - offsetMs;
    return out;
  }

  #select(vs: VectorSelector, mint: number, maxt: number, hints: SelectHints) {
    // The same selector over the same range (e.g. both sides of `a - on(vm) b` and a `sum(a)`)
    // is read once per query; the engine never writes into selected arrays.
    const key = `${mint}\u0000${maxt}\u0000${JSON.stringify(vs.matchers)}`;
    let data = this.#selected.get(key);
    let n = 0;
    if (!data) {
      data = this.ctx.querier.select(vs.matchers, mint, maxt, hints);
      this.#selected.set(key, data);
      for (const s of data) n += s.values.length;
      this.#loaded += n;
    } else for (const s of data) n += s.values.length;
    this.addSamples(n);
    return data;
  }

  /** An instant-vector selector: latest sample in (t - lookback, t], unless it is a staleness marker. */
  instantSelect(vs: VectorSelector, ts: Float64Array): StepSeries[] {
    const ends = this.effectiveTimes(vs.at, vs.offsetMs, ts);
    const [lo, hi] = minMax(ends);
    const lookback = this.ctx.lookbackMs;
    const data = this.#select(vs, lo - lookback + 1, hi, { stepMs: stepOf(ts) });
    const n = ts.length;
    const out: StepSeries[] = [];
    for (const s of data) {
      this.tick();
      const st = s.timestamps;
      const ss = newStepSeries(s.labels, n);
      ss.sampleTs = stepF64(n);
      let any = false;
      let j = -1; // index of the last sample <= ends[i]
      for (let i = 0; i < n; i++) {
        const e = ends[i];
        if (i === 0 || e < ends[i - 1]) j = upperBound(st, e) - 1;
        else while (j + 1 < st.length && st[j + 1] <= e) j++;
        if (j < 0 || st[j] <= e - lookback || isStaleMarker(s.values, j)) continue;
        ss.values[i] = s.values[j];
        ss.sampleTs[i] = st[j];
        ss.present[i] = 1;
        any = true;
      }
      if (any) out.push(ss);
    }
    this.addSamples(out.length * n);
    return out;
  }

  /** The samples behind a range vector (matrix selector or subquery) for every step. */
  windows(e: MatrixSelector | Subquery, ts: Float64Array, func?: string): Windows {
    if (e.kind === "MatrixSelector") {
      const vs = e.vector;
      const ends = this.effectiveTimes(vs.at, vs.offsetMs, ts);
      const [lo, hi] = minMax(ends);
      const data = this.#select(vs, lo - e.rangeMs + 1, hi, { stepMs: stepOf(ts), func });
      const series: RawSeries[] = [];
      for (const s of data) {
        this.tick();
        series.push(dropStale(s.labels, s.timestamps, s.values));
      }
      return { series, ends, rangeMs: e.rangeMs };
    }
    const ends = this.effectiveTimes(e.at, e.offsetMs, ts);
    const [lo, hi] = minMax(ends);
    const step = e.stepMs || this.ctx.defaultSubqueryStepMs;
    const mint = lo - e.rangeMs;
    let start = step * Math.trunc(mint / step);
    if (start <= mint) start += step;
    const count = hi >= start ? Math.floor((hi - start) / step) + 1 : 0;
    const grid = new Float64Array(count);
    for (let i = 0; i < count; i++) grid[i] = start + i * step;
    const inner = count > 0 ? this.eval(e.expr, grid) : null;
    const series: RawSeries[] = [];
    if (inner?.type === "vector") {
      for (const s of inner.series) series.push(compress(s, grid));
    } else if (inner?.type === "scalar") {
      series.push({ labels: [], timestamps: grid, values: inner.values, dropName: false });
    }
    return { series, ends, rangeMs: e.rangeMs };
  }
}

/** Fills [lo, hi) per step for one raw series: samples with end - range < t <= end. */
export function fillBounds(s: RawSeries, w: Windows, lo: Int32Array, hi: Int32Array): void {
  const t = s.timestamps;
  const ends = w.ends;
  let a = 0;
  let b = 0;
  for (let i = 0; i < ends.length; i++) {
    const e = ends[i];
    const from = e - w.rangeMs;
    if (i === 0 || e < ends[i - 1]) {
      a = upperBound(t, from);
      b = upperBound(t, e);
    } else {
      while (a < t.length && t[a] <= from) a++;
      while (b < t.length && t[b] <= e) b++;
    }
    lo[i] = a;
    hi[i] = b;
  }
}

/** Index of the first element > x in an ascending array. */
export function upperBound(a: Float64Array, x: number): number {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid] <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function minMax(a: Float64Array): [number, number] {
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  for (const x of a) {
    if (x < lo) lo = x;
    if (x > hi) hi = x;
  }
  return [lo, hi];
}

function stepOf(ts: Float64Array): number {
  return ts.length > 1 ? ts[1] - ts[0] : 0;
}

function dropStale(labels: RawSeries["labels"], t: Float64Array, v: Float64Array): RawSeries {
  let stale = 0;
  for (let i = 0; i < v.length; i++) if (isStaleMarker(v, i)) stale++;
  if (stale === 0) return { labels, timestamps: t, values: v, dropName: false };
  const nt = new Float64Array(v.length - stale);
  const nv = new Float64Array(v.length - stale);
  let k = 0;
  for (let i = 0; i < v.length; i++) {
    if (isStaleMarker(v, i)) continue;
    nt[k] = t[i];
    nv[k++] = v[i];
  }
  return { labels, timestamps: nt, values: nv, dropName: false };
}

function compress(s: StepSeries, grid: Float64Array): RawSeries {
  let n = 0;
  for (let i = 0; i < grid.length; i++) n += s.present[i];
  const t = new Float64Array(n);
  const v = new Float64Array(n);
  let k = 0;
  for (let i = 0; i < grid.length; i++) {
    if (!s.present[i]) continue;
    t[k] = grid[i];
    v[k++] = s.values[i];
  }
  return { labels: s.labels, timestamps: t, values: v, dropName: s.dropName };
}

/** Throws when two series of a vector share a label set at the same step. */
export function assertNoDuplicates(series: StepSeries[], key: (s: StepSeries) => string): void {
  const seen = new Map<string, StepSeries>();
  for (const s of series) {
    const k = key(s);
    const other = seen.get(k);
    if (other === undefined) {
      seen.set(k, s);
      continue;
    }
    for (let i = 0; i < s.present.length; i++) {
      if (s.present[i] && other.present[i]) {
        throw new QueryEvalError(
          `vector cannot contain metrics with the same labelset ${labelsString(s.labels)}`,
        );
      }
    }
  }
}
