/**
 * Step aggregates of raw samples in one linear sweep: the values PromQL's `avg_over_time`,
 * `max_over_time`, `last_over_time` and `rate` give in a range query, computed without the engine
 * (no parse, no per-step window arrays). The arithmetic is the engine's own (MeanAccumulator,
 * extrapolatedRate), so the numbers agree bit for bit with the Prometheus-compatible API.
 *
 * Times are ms. Step i evaluates at `startMs + i × stepMs` over the window (t − windowMs, t]
 * (left-open, right-closed, as PromQL). Staleness markers are not samples (PromQL drops them from
 * range vectors). A step without enough samples has no value: it is absent, never 0.
 */
import { kahanInc, MeanAccumulator } from "../promql/engine/kahan.ts";
import { extrapolate, extrapolatedRate } from "../promql/engine/rangefuncs.ts";
import { QueryEvalError } from "../promql/index.ts";
import { isStaleMarker, type Labels, labelValue } from "../storage/interface.ts";
import { RollupColumn, type Rollups } from "../storage/rollups.ts";

export type WindowFunction = "avg_over_time" | "max_over_time" | "last_over_time" | "rate";

/** The step grid of a range query: `points` steps from `startMs`, `stepMs` apart. */
export interface StepGrid {
  readonly startMs: number;
  readonly stepMs: number;
  readonly points: number;
}

/** Step values of one series: only the steps with a value, ascending. Arrays owned by the caller. */
export interface StepValues {
  readonly timestamps: Float64Array;
  readonly values: Float64Array;
}

const mean = new MeanAccumulator();

/** Samples of a series without staleness markers (the input itself when it has none). */
export function withoutStaleMarkers(t: Float64Array, v: Float64Array): { t: Float64Array; v: Float64Array } {
  let stale = 0;
  for (let i = 0; i < v.length; i++) if (isStaleMarker(v, i)) stale++;
  if (stale === 0) return { t, v };
  const nt = new Float64Array(v.length - stale);
  const nv = new Float64Array(v.length - stale);
  let k = 0;
  for (let i = 0; i < v.length; i++) {
    if (isStaleMarker(v, i)) continue;
    nt[k] = t[i];
    nv[k++] = v[i];
  }
  return { t: nt, v: nv };
}

/**
 * `fn(series[windowMs])` at every step of `grid` over the samples (t ascending, staleness markers
 * already removed). Two monotone cursors bound each window, so the cost is O(samples + steps) for
 * any window/step ratio (each sample is aggregated once per window that holds it).
 */
export function stepAggregate(
  t: Float64Array,
  v: Float64Array,
  grid: StepGrid,
  windowMs: number,
  fn: WindowFunction,
): StepValues {
  return sweep(t, t.length, grid, windowMs, (a, b, from, end) => {
    switch (fn) {
      case "avg_over_time":
        mean.reset();
        for (let j = a; j < b; j++) mean.add(v[j]);
        return mean.value();
      case "max_over_time": {
        let m = v[a];
        for (let j = a + 1; j < b; j++) if (v[j] > m || Number.isNaN(m)) m = v[j];
        return m;
      }
      case "last_over_time":
        return v[b - 1];
      case "rate":
        return extrapolatedRate(t, v, a, b, from, end, true, true, windowMs);
    }
  });
}

/**
 * The step loop both aggregates share: two monotone cursors over ascending `times` (sample times,
 * or bucket ends) bound each window (end − windowMs, end], so the cost is O(n + steps); `at` gives
 * the value of the items [a, b) of a non-empty window, or undefined for none (the step is absent).
 */
function sweep(
  times: Float64Array,
  n: number,
  grid: StepGrid,
  windowMs: number,
  at: (a: number, b: number, from: number, end: number) => number | undefined,
): StepValues {
  const points = grid.points;
  const outT = new Float64Array(points);
  const outV = new Float64Array(points);
  let k = 0;
  let a = 0; // first item with time > end − window
  let b = 0; // first item with time > end
  for (let i = 0; i < points; i++) {
    const end = grid.startMs + i * grid.stepMs;
    const from = end - windowMs;
    while (a < n && times[a] <= from) a++;
    if (b < a) b = a;
    while (b < n && times[b] <= end) b++;
    if (b <= a) continue;
    const x = at(a, b, from, end);
    if (x === undefined) continue;
    outT[k] = end;
    outV[k++] = x;
  }
  return k === points
    ? { timestamps: outT, values: outV }
    : { timestamps: outT.slice(0, k), values: outV.slice(0, k) };
}

/**
 * Whether `rollupStepAggregate` can serve this grid and window from rollups of `resolutionMs`:
 * every window (t − windowMs, t] must be a union of whole buckets.
 */
export function rollupsServe(grid: StepGrid, windowMs: number, resolutionMs: number): boolean {
  return (
    resolutionMs > 0 &&
    windowMs % resolutionMs === 0 &&
    grid.stepMs % resolutionMs === 0 &&
    grid.startMs % resolutionMs === 0
  );
}

const kahan = new Float64Array(2);

/**
 * `stepAggregate` over rollup buckets instead of raw samples, for grids where `rollupsServe` holds
 * and buckets whose sums are all finite (`Rollups.allFinite`; otherwise use the raw samples).
 * max, last and rate are the same bits as over the raw samples (rate: unless one bucket holds two or
 * more counter resets, where the corrections are added in another order); avg sums the bucket sums
 * with the same compensation, so it equals the raw mean to within rounding of the last bits
 * (exactly, for integer-valued gauges whose sums stay below 2^53).
 */
export function rollupStepAggregate(
  r: Rollups,
  grid: StepGrid,
  windowMs: number,
  fn: WindowFunction,
): StepValues {
  const need = rollupColumnsFor(fn);
  if ((r.columns & need) !== need) throw new Error(`${fn} needs rollup columns the read left out`);
  return sweep(r.end, r.n, grid, windowMs, (a, b, from, end) => {
    switch (fn) {
      case "avg_over_time": {
        let s = 0;
        let c = 0;
        let cnt = 0;
        for (let j = a; j < b; j++) {
          kahanInc(r.sum[j], s, c, kahan);
          s = kahan[0];
          c = kahan[1];
          cnt += r.count[j];
        }
        return (s + c) / cnt;
      }
      case "max_over_time": {
        let m = r.max[a];
        for (let j = a + 1; j < b; j++) if (r.max[j] > m || Number.isNaN(m)) m = r.max[j];
        return m;
      }
      case "last_over_time":
        return r.lastV[b - 1];
      case "rate": {
        let cnt = r.count[a];
        let result = r.lastV[b - 1] - r.firstV[a];
        result += r.resets[a];
        for (let j = a + 1; j < b; j++) {
          if (r.firstV[j] < r.lastV[j - 1]) result += r.lastV[j - 1];
          result += r.resets[j];
          cnt += r.count[j];
        }
        if (cnt < 2) return undefined;
        return extrapolate(
          result,
          r.firstT[a],
          r.firstV[a],
          r.lastT[b - 1],
          cnt,
          from,
          end,
          true,
          true,
          windowMs,
        );
      }
    }
  });
}

/** The rollup columns (RollupColumn bits) that rollupStepAggregate reads for `fn`. */
export function rollupColumnsFor(fn: WindowFunction): number {
  const C = RollupColumn;
  switch (fn) {
    case "avg_over_time":
      return C.count | C.sum;
    case "max_over_time":
      return C.max;
    case "last_over_time":
      return C.lastV;
    case "rate":
      return C.count | C.firstT | C.firstV | C.lastT | C.lastV | C.resets;
  }
}

/** A step series with its labels, as a range query returns it. */
export interface LabeledSteps extends StepValues {
  readonly metric: Labels;
}

/**
 * `scale * num / on(<on>) den` per step with PromQL's one-to-one vector matching: series pair up by
 * the values of the `on` labels (absent = ""), a step needs both sides, and the result carries only
 * the `on` labels that are present. Two series of one side with the same key at the same step is
 * PromQL's matching error, thrown as QueryEvalError. Non-finite results (x / 0) are kept, as the
 * engine keeps them; the caller decides what a NaN means.
 */
export function ratioOn(
  num: readonly LabeledSteps[],
  den: readonly LabeledSteps[],
  on: readonly string[],
  scale: number,
): LabeledSteps[] {
  return binaryOn(num, den, on, (a, b) => (scale * a) / b);
}

/** `lhs <op> on(<on>) rhs` per step, matched as ratioOn describes; `op` gets the two step values. */
export function binaryOn(
  lhsSeries: readonly LabeledSteps[],
  rhsSeries: readonly LabeledSteps[],
  on: readonly string[],
  op: (a: number, b: number) => number,
): LabeledSteps[] {
  const keyOf = (l: Labels) => on.map((n) => labelValue(l, n)).join("\u0000");
  const dens = new Map<string, LabeledSteps[]>();
  for (const d of rhsSeries) {
    const k = keyOf(d.metric);
    const list = dens.get(k);
    if (list) list.push(d);
    else dens.set(k, [d]);
  }
  const nums = new Map<string, LabeledSteps[]>();
  for (const s of lhsSeries) {
    const k = keyOf(s.metric);
    const list = nums.get(k);
    if (list) list.push(s);
    else nums.set(k, [s]);
  }
  const out: LabeledSteps[] = [];
  for (const [k, ls] of nums) {
    const rs = dens.get(k);
    if (!rs) continue;
    assertUniqueSteps(ls, "left");
    assertUniqueSteps(rs, "right");
    const lhs = mergeSteps(ls);
    const rhs = mergeSteps(rs);
    const t: number[] = [];
    const v: number[] = [];
    let j = 0;
    for (let i = 0; i < lhs.timestamps.length; i++) {
      const ts = lhs.timestamps[i];
      while (j < rhs.timestamps.length && rhs.timestamps[j] < ts) j++;
      if (j < rhs.timestamps.length && rhs.timestamps[j] === ts) {
        t.push(ts);
        v.push(op(lhs.values[i], rhs.values[j]));
      }
    }
    if (t.length === 0) continue;
    const metric = on
      .filter((n) => labelValue(ls[0].metric, n) !== "")
      .sort()
      .map((name) => ({ name, value: labelValue(ls[0].metric, name) }));
    out.push({ metric, timestamps: Float64Array.from(t), values: Float64Array.from(v) });
  }
  return out;
}

/**
 * PromQL's `a or b` per step: every step of `a`, and the steps of `b` whose label set has no value
 * in `a` at that step. Series come out in `a`'s order, then `b`'s new label sets.
 */
export function orSteps(a: readonly LabeledSteps[], b: readonly LabeledSteps[]): LabeledSteps[] {
  const keyOf = (l: Labels) => l.map((x) => `${x.name}\u0001${x.value}`).join("\u0000");
  const byKey = new Map<string, LabeledSteps>();
  for (const s of a) byKey.set(keyOf(s.metric), s);
  const out = [...a];
  for (const s of b) {
    const k = keyOf(s.metric);
    const left = byKey.get(k);
    if (!left) {
      byKey.set(k, s);
      out.push(s);
      continue;
    }
    const have = new Set(left.timestamps);
    const pts: [number, number][] = [];
    for (let i = 0; i < left.timestamps.length; i++) pts.push([left.timestamps[i], left.values[i]]);
    for (let i = 0; i < s.timestamps.length; i++)
      if (!have.has(s.timestamps[i])) pts.push([s.timestamps[i], s.values[i]]);
    if (pts.length === left.timestamps.length) continue;
    pts.sort((x, y) => x[0] - y[0]);
    const merged = {
      metric: left.metric,
      timestamps: Float64Array.from(pts, (p) => p[0]),
      values: Float64Array.from(pts, (p) => p[1]),
    };
    out[out.indexOf(left)] = merged;
    byKey.set(k, merged);
  }
  return out;
}

function assertUniqueSteps(group: readonly LabeledSteps[], side: "left" | "right"): void {
  if (group.length < 2) return;
  const seen = new Set<number>();
  for (const s of group) {
    for (const ts of s.timestamps) {
      if (seen.has(ts))
        throw new QueryEvalError(
          `found duplicate series for the match group on the ${side} hand-side of the operation; many-to-many matching not allowed`,
        );
      seen.add(ts);
    }
  }
}

/** One step series from several with disjoint steps (checked by assertUniqueSteps). */
function mergeSteps(group: readonly LabeledSteps[]): StepValues {
  if (group.length === 1) return group[0];
  const pts: [number, number][] = [];
  for (const s of group)
    for (let i = 0; i < s.timestamps.length; i++) pts.push([s.timestamps[i], s.values[i]]);
  pts.sort((x, y) => x[0] - y[0]);
  return { timestamps: Float64Array.from(pts, (p) => p[0]), values: Float64Array.from(pts, (p) => p[1]) };
}
