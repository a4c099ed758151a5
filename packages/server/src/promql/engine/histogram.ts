/** histogram_quantile over classic (`le`-labelled) buckets, Prometheus 3.5 semantics. */
import type { Labels } from "../../storage/interface.ts";
import { goFloat } from "./aggregate.ts";
import type { Evaluator } from "./evaluator.ts";
import { getLabel, labelsKey, setLabel } from "./labels.ts";
import { newStepSeries, type StepSeries } from "./types.ts";

interface Bucket {
  upper: number;
  count: number;
}

/** Go strconv.ParseFloat for `le` values; null when malformed. */
export function parseGoFloat(s: string): number | null {
  const t = s.trim() === s ? s : "";
  if (/^[+-]?(inf|infinity)$/i.test(t))
    return t.startsWith("-") ? Number.NEGATIVE_INFINITY : Number.POSITIVE_INFINITY;
  if (/^nan$/i.test(t)) return Number.NaN;
  if (/^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(t)) return Number(t);
  return null;
}

const SMALL_DELTA = 1e-12;

function almostEqual(a: number, b: number, eps: number): boolean {
  if (a === b) return true;
  const absSum = Math.abs(a) + Math.abs(b);
  const diff = Math.abs(a - b);
  if (a === 0 || b === 0 || absSum < Number.MIN_VALUE) return diff < eps * Number.MIN_VALUE;
  return diff / Math.min(absSum, Number.MAX_VALUE) < eps;
}

/** Returns [quantile, forcedMonotonic]. Buckets are sorted and coalesced in place. */
export function bucketQuantile(q: number, buckets: Bucket[]): [number, boolean] {
  if (Number.isNaN(q)) return [Number.NaN, false];
  if (q < 0) return [Number.NEGATIVE_INFINITY, false];
  if (q > 1) return [Number.POSITIVE_INFINITY, false];
  buckets.sort((a, b) => a.upper - b.upper);
  if (buckets.length === 0 || buckets[buckets.length - 1].upper !== Number.POSITIVE_INFINITY)
    return [Number.NaN, false];
  // Coalesce equal upper bounds.
  const bs: Bucket[] = [];
  for (const b of buckets) {
    const last = bs[bs.length - 1];
    if (last && last.upper === b.upper) last.count += b.count;
    else bs.push({ upper: b.upper, count: b.count });
  }
  let forced = false;
  let prev = bs[0].count;
  for (let i = 1; i < bs.length; i++) {
    const curr = bs[i].count;
    if (curr === prev) continue;
    if (almostEqual(prev, curr, SMALL_DELTA)) {
      bs[i].count = prev;
      continue;
    }
    if (curr < prev) {
      bs[i].count = prev;
      forced = true;
      continue;
    }
    prev = curr;
  }
  if (bs.length < 2) return [Number.NaN, forced];
  const observations = bs[bs.length - 1].count;
  if (observations === 0) return [Number.NaN, forced];
  let rank = q * observations;
  let b = 0;
  while (b < bs.length - 1 && !(bs[b].count >= rank)) b++;
  if (b === bs.length - 1) return [bs[bs.length - 2].upper, forced];
  if (b === 0 && bs[0].upper <= 0) return [bs[0].upper, forced];
  let start = 0;
  const end = bs[b].upper;
  let count = bs[b].count;
  if (b > 0) {
    start = bs[b - 1].upper;
    count -= bs[b - 1].count;
    rank -= bs[b - 1].count;
  }
  return [start + (end - start) * (rank / count), forced];
}

export function histogramQuantile(
  ev: Evaluator,
  qs: Float64Array,
  input: StepSeries[],
  n: number,
): StepSeries[] {
  for (let i = 0; i < n; i++) {
    const q = qs[i];
    if (Number.isNaN(q) || q < 0 || q > 1) {
      ev.ctx.annotations.warn(`quantile value should be between 0 and 1, got ${goFloat(q)}`);
    }
  }
  // Group bucket series by all labels except `le` (the name is kept until the query ends).
  const groups = new Map<string, { labels: Labels; series: StepSeries[]; uppers: number[] }>();
  const order: { labels: Labels; series: StepSeries[]; uppers: number[] }[] = [];
  for (const s of input) {
    const le = getLabel(s.labels, "le");
    const upper = parseGoFloat(le);
    if (upper === null || le === "") {
      ev.ctx.annotations.warn(
        `bucket label "le" is missing or has a malformed value of ${JSON.stringify(le)} for metric name ${JSON.stringify(getLabel(s.labels, "__name__"))}`,
      );
      continue;
    }
    const labels = setLabel(s.labels, "le", "");
    const k = labelsKey(labels);
    let g = groups.get(k);
    if (!g) {
      g = { labels, series: [], uppers: [] };
      groups.set(k, g);
      order.push(g);
    }
    g.series.push(s);
    g.uppers.push(upper);
  }
  const out: StepSeries[] = [];
  const buckets: Bucket[] = [];
  for (const g of order) {
    ev.tick();
    const o = newStepSeries(g.labels, n, true);
    let any = false;
    for (let i = 0; i < n; i++) {
      buckets.length = 0;
      for (let k = 0; k < g.series.length; k++) {
        const s = g.series[k];
        if (s.present[i]) buckets.push({ upper: g.uppers[k], count: s.values[i] });
      }
      if (buckets.length === 0) continue;
      const [v, forced] = bucketQuantile(qs[i], buckets);
      if (forced) {
        ev.ctx.annotations.info(
          `input to histogram_quantile needed to be fixed for monotonicity (see https://prometheus.io/docs/prometheus/latest/querying/functions/#histogram_quantile) for metric name ${JSON.stringify(getLabel(g.labels, "__name__"))}`,
        );
      }
      o.values[i] = v;
      o.present[i] = 1;
      any = true;
    }
    if (any) out.push(o);
  }
  return out;
}
