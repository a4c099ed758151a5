/** Functions over range vectors: rate family, *_over_time, deriv, predict_linear, changes, resets. */
import { QueryEvalError } from "../errors.ts";
import { goFloat } from "./aggregate.ts";
import { type Evaluator, fillBounds } from "./evaluator.ts";
import { kahanInc, MeanAccumulator, quantileOf } from "./kahan.ts";
import { getLabel } from "./labels.ts";
import { linearRegression, predictLinear } from "./regression.ts";
import { newStepSeries, type StepSeries, type Windows } from "./types.ts";

/** Computes one value from samples [a, b) for step i; undefined = no output at this step. */
type WindowFn = (t: Float64Array, v: Float64Array, a: number, b: number, i: number) => number | undefined;

const tmp = new Float64Array(2);
const mean = new MeanAccumulator();
const scratch: number[] = [];

const KEEPS_NAME = new Set(["last_over_time", "first_over_time"]);

/**
 * Applies a range-vector function. `params` are the scalar arguments per step (in order after
 * the range argument, e.g. predict_linear's duration; quantile_over_time's q comes first).
 */
export function evalRangeFunction(
  ev: Evaluator,
  func: string,
  w: Windows,
  params: Float64Array[],
  ts: Float64Array,
): StepSeries[] {
  const fn = windowFn(ev, func, w, params, ts);
  const n = ts.length;
  const lo = new Int32Array(n);
  const hi = new Int32Array(n);
  const out: StepSeries[] = [];
  const counterCheck = func === "rate" || func === "increase";
  for (const s of w.series) {
    ev.tick();
    fillBounds(s, w, lo, hi);
    const o = newStepSeries(s.labels, n, KEEPS_NAME.has(func) ? s.dropName : true);
    let any = false;
    let sawSamples = false;
    for (let i = 0; i < n; i++) {
      const a = lo[i];
      const b = hi[i];
      if (b <= a) continue;
      // Per step, not only per series: one long series (e.g. a subquery) must still meet its deadline.
      ev.tick();
      sawSamples = true;
      const v = fn(s.timestamps, s.values, a, b, i);
      if (v === undefined) continue;
      o.values[i] = v;
      o.present[i] = 1;
      any = true;
    }
    if (counterCheck && sawSamples) {
      const name = getLabel(s.labels, "__name__");
      if (name !== "" && !/(_total|_sum|_count|_bucket)$/.test(name)) {
        ev.ctx.annotations.info(
          `metric might not be a counter, name does not end in _total/_sum/_count/_bucket: ${JSON.stringify(name)}`,
        );
      }
    }
    if (any) out.push(o);
  }
  ev.addSamples(out.length * n);
  return out;
}

function windowFn(
  ev: Evaluator,
  func: string,
  w: Windows,
  params: Float64Array[],
  ts: Float64Array,
): WindowFn {
  const rangeMs = w.rangeMs;
  const ends = w.ends;
  switch (func) {
    case "rate":
    case "increase":
    case "delta": {
      const isCounter = func !== "delta";
      const isRate = func === "rate";
      return (t, v, a, b, i) =>
        extrapolatedRate(t, v, a, b, ends[i] - rangeMs, ends[i], isCounter, isRate, rangeMs);
    }
    case "irate":
    case "idelta":
      return (t, v, a, b) => {
        if (b - a < 2) return undefined;
        const last = v[b - 1];
        const prev = v[b - 2];
        const dt = t[b - 1] - t[b - 2];
        if (dt === 0) return undefined;
        if (func === "idelta") return last - prev;
        return (last < prev ? last : last - prev) / (dt / 1000);
      };
    case "deriv":
      return (t, v, a, b) => (b - a < 2 ? undefined : linearRegression(t, v, a, b, t[a])[0]);
    case "predict_linear":
      return (t, v, a, b, i) => predictLinear(t, v, a, b, ts[i], params[0][i]);
    case "avg_over_time":
      return (_t, v, a, b) => {
        mean.reset();
        for (let j = a; j < b; j++) mean.add(v[j]);
        return mean.value();
      };
    case "sum_over_time":
      return (_t, v, a, b) => {
        let sum = 0;
        let c = 0;
        for (let j = a; j < b; j++) {
          kahanInc(v[j], sum, c, tmp);
          sum = tmp[0];
          c = tmp[1];
        }
        return sum + c;
      };
    case "count_over_time":
      return (_t, _v, a, b) => b - a;
    case "present_over_time":
      return () => 1;
    case "last_over_time":
      return (_t, v, _a, b) => v[b - 1];
    case "first_over_time":
      return (_t, v, a) => v[a];
    case "ts_of_first_over_time":
      return (t, _v, a) => t[a] / 1000;
    case "ts_of_last_over_time":
      return (t, _v, _a, b) => t[b - 1] / 1000;
    case "ts_of_min_over_time":
    case "ts_of_max_over_time": {
      const isMax = func === "ts_of_max_over_time";
      return (t, v, a, b) => {
        let m = v[a];
        let at = t[a];
        for (let j = a + 1; j < b; j++) {
          const x = v[j];
          if ((isMax ? x >= m : x <= m) || Number.isNaN(m)) {
            m = x;
            at = t[j];
          }
        }
        return at / 1000;
      };
    }
    case "min_over_time":
    case "max_over_time": {
      const isMax = func === "max_over_time";
      return (_t, v, a, b) => {
        let m = v[a];
        for (let j = a + 1; j < b; j++) {
          const x = v[j];
          if ((isMax ? x > m : x < m) || Number.isNaN(m)) m = x;
        }
        return m;
      };
    }
    case "stddev_over_time":
    case "stdvar_over_time": {
      const sqrt = func === "stddev_over_time";
      return (_t, v, a, b) => {
        let count = 0;
        let m = 0;
        let cm = 0;
        let aux = 0;
        let ca = 0;
        for (let j = a; j < b; j++) {
          count++;
          const delta = v[j] - (m + cm);
          kahanInc(delta / count, m, cm, tmp);
          m = tmp[0];
          cm = tmp[1];
          kahanInc(delta * (v[j] - (m + cm)), aux, ca, tmp);
          aux = tmp[0];
          ca = tmp[1];
        }
        const variance = (aux + ca) / count;
        return sqrt ? Math.sqrt(variance) : variance;
      };
    }
    case "quantile_over_time": {
      const q = params[0];
      for (let i = 0; i < q.length; i++) {
        if (Number.isNaN(q[i]) || q[i] < 0 || q[i] > 1) {
          ev.ctx.annotations.warn(`quantile value should be between 0 and 1, got ${goFloat(q[i])}`);
        }
      }
      return (_t, v, a, b, i) => {
        scratch.length = 0;
        for (let j = a; j < b; j++) scratch.push(v[j]);
        return quantileOf(q[i], scratch);
      };
    }
    case "mad_over_time":
      return (_t, v, a, b) => {
        scratch.length = 0;
        for (let j = a; j < b; j++) scratch.push(v[j]);
        const med = quantileOf(0.5, scratch);
        for (let j = 0; j < scratch.length; j++) scratch[j] = Math.abs(scratch[j] - med);
        return quantileOf(0.5, scratch);
      };
    case "changes":
    case "resets": {
      const resets = func === "resets";
      return (_t, v, a, b) => {
        let k = 0;
        for (let j = a + 1; j < b; j++) {
          const cur = v[j];
          const prev = v[j - 1];
          if (resets) {
            if (cur < prev) k++;
          } else if (!(cur === prev || (Number.isNaN(cur) && Number.isNaN(prev)))) k++;
        }
        return k;
      };
    }
    case "double_exponential_smoothing": {
      const [sfs, tfs] = params;
      for (let i = 0; i < sfs.length; i++) {
        if (!(sfs[i] > 0 && sfs[i] < 1)) {
          throw new QueryEvalError(
            `invalid smoothing factor. Expected: 0 < sf < 1, got: ${sfs[i].toFixed(6)}`,
          );
        }
        if (!(tfs[i] > 0 && tfs[i] < 1)) {
          throw new QueryEvalError(`invalid trend factor. Expected: 0 < tf < 1, got: ${tfs[i].toFixed(6)}`);
        }
      }
      return (_t, v, a, b, i) => {
        if (b - a < 2) return undefined;
        const sf = sfs[i];
        const tf = tfs[i];
        let s0 = 0;
        let s1 = v[a];
        let trend = v[a + 1] - v[a];
        for (let j = a + 1; j < b; j++) {
          const x = sf * v[j];
          if (j - a - 1 !== 0) trend = tf * (s1 - s0) + (1 - tf) * trend;
          const y = (1 - sf) * (s1 + trend);
          s0 = s1;
          s1 = x + y;
        }
        return s1;
      };
    }
    default:
      throw new QueryEvalError(`function "${func}" does not take a range vector`);
  }
}

/**
 * Prometheus' extrapolatedRate for rate / increase / delta over samples [a, b) (times in ms, the
 * window (rangeStart, rangeEnd]); undefined when fewer than two samples. Exported for the metrics
 * layer's single-pass step aggregates, which must agree with `rate()` bit for bit.
 */
export function extrapolatedRate(
  t: Float64Array,
  v: Float64Array,
  a: number,
  b: number,
  rangeStart: number,
  rangeEnd: number,
  isCounter: boolean,
  isRate: boolean,
  rangeMs: number,
): number | undefined {
  const cnt = b - a;
  if (cnt < 2) return undefined;
  let result = v[b - 1] - v[a];
  if (isCounter) {
    let prev = v[a];
    for (let j = a + 1; j < b; j++) {
      if (v[j] < prev) result += prev;
      prev = v[j];
    }
  }
  return extrapolate(result, t[a], v[a], t[b - 1], cnt, rangeStart, rangeEnd, isCounter, isRate, rangeMs);
}

/**
 * The extrapolation half of extrapolatedRate, from the window's summary alone: `result` is the
 * (reset-corrected) difference between the last and the first sample, `cnt` ≥ 2 the sample count.
 * Shared with rollup-based step aggregates (metrics/windows.ts), so both give the same bits.
 */
export function extrapolate(
  result: number,
  firstT: number,
  firstV: number,
  lastT: number,
  cnt: number,
  rangeStart: number,
  rangeEnd: number,
  isCounter: boolean,
  isRate: boolean,
  rangeMs: number,
): number {
  let toStart = (firstT - rangeStart) / 1000;
  let toEnd = (rangeEnd - lastT) / 1000;
  const sampled = (lastT - firstT) / 1000;
  const avg = sampled / (cnt - 1);
  const threshold = avg * 1.1;
  if (toStart >= threshold) toStart = avg / 2;
  if (isCounter) {
    let toZero = toStart;
    if (result > 0 && firstV >= 0) toZero = sampled * (firstV / result);
    if (toZero < toStart) toStart = toZero;
  }
  if (toEnd >= threshold) toEnd = avg / 2;
  let factor = (sampled + toStart + toEnd) / sampled;
  if (isRate) factor /= rangeMs / 1000;
  return result * factor;
}
