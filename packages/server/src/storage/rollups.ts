/**
 * Rollups: per-series aggregates of fixed time buckets, the "downsampled" data Thanos and Mimir keep
 * beside raw blocks. A bucket covers (end − R, end] with `end` a multiple of the resolution R
 * (left-open, right-closed like PromQL's range windows), so any window whose bounds are multiples
 * of R is exactly the union of whole buckets, and `avg_over_time`, `max_over_time`,
 * `last_over_time` and `rate` over such windows follow from the buckets alone (metrics/windows.ts)
 * without decoding a raw sample.
 *
 * Each bucket keeps what those functions need: the sample count, the first and last sample (time
 * and value), the maximum, the sum (Kahan-Neumaier compensated, then rounded once) and `resets`:
 * the sum of the values just before each counter reset inside the bucket, which is exactly what
 * PromQL's `rate` adds for them. Staleness markers are not samples and are never counted.
 *
 * Buckets are struct-of-arrays, appended in time order; appending a bucket with the same end as
 * the last one merges the two (a bucket split by a block boundary).
 */
import { isStaleMarker } from "./interface.ts";

/**
 * A bucket's columns as bits, for a reader that uses only some: storage then decodes only those
 * (`Rollups.columns`). `sum` doubles as the NaN/±Inf detector (`allFinite`), so stored reads always
 * carry it, and `firstT`/`lastT`, which tell overlapping sources apart.
 */
export const RollupColumn = {
  count: 1,
  firstT: 2,
  firstV: 4,
  lastT: 8,
  lastV: 16,
  max: 32,
  sum: 64,
  resets: 128,
} as const;
/** Every column: what a reader that names none gets. */
export const ALL_ROLLUP_COLUMNS: number = Object.values(RollupColumn).reduce((a, b) => a | b, 0);

export class Rollups {
  n = 0;
  end: Float64Array;
  count: Float64Array;
  firstT: Float64Array;
  firstV: Float64Array;
  lastT: Float64Array;
  lastV: Float64Array;
  max: Float64Array;
  sum: Float64Array;
  resets: Float64Array;
  /** Compensation of the open bucket's sum while samples are added (folded in by `#close`). */
  #c = 0;
  #open = false;

  /**
   * @param columns the columns a reader will use (RollupColumn bits); a read from storage may leave
   * the others NaN. Samples added here fill every column.
   */
  constructor(
    readonly resolutionMs: number,
    capacity = 16,
    readonly columns: number = ALL_ROLLUP_COLUMNS,
  ) {
    // One allocation for all nine columns: a read builds one Rollups per series.
    const all = new Float64Array(9 * capacity);
    const col = (k: number) => all.subarray(k * capacity, (k + 1) * capacity);
    this.end = col(0);
    this.count = col(1);
    this.firstT = col(2);
    this.firstV = col(3);
    this.lastT = col(4);
    this.lastV = col(5);
    this.max = col(6);
    this.sum = col(7);
    this.resets = col(8);
  }

  /** End (ms) of the bucket holding a sample at time t. */
  bucketEnd(t: number): number {
    return Math.ceil(t / this.resolutionMs) * this.resolutionMs;
  }

  /** Time of the newest sample, or −∞ when empty. */
  get lastTime(): number {
    return this.n === 0 ? Number.NEGATIVE_INFINITY : this.lastT[this.n - 1];
  }

  /** Adds one sample (t after every sample so far); a staleness marker is skipped by the caller. */
  addSample(t: number, v: number): void {
    const end = this.bucketEnd(t);
    const i = this.n - 1;
    if (i >= 0 && this.end[i] === end) {
      if (v < this.lastV[i]) this.resets[i] += this.lastV[i];
      this.count[i]++;
      this.lastT[i] = t;
      this.lastV[i] = v;
      if (v > this.max[i] || Number.isNaN(this.max[i])) this.max[i] = v;
      // Kahan-Neumaier step (promql/engine/kahan.ts), compensation kept aside until the bucket closes.
      const s = this.sum[i];
      const x = s + v;
      if (!Number.isFinite(x) && !Number.isNaN(x)) this.#c = 0;
      else if (Math.abs(s) >= Math.abs(v)) this.#c += s - x + v;
      else this.#c += v - x + s;
      this.sum[i] = x;
      return;
    }
    this.#close();
    const k = this.#push(end);
    this.count[k] = 1;
    this.firstT[k] = t;
    this.firstV[k] = v;
    this.lastT[k] = t;
    this.lastV[k] = v;
    this.max[k] = v;
    this.sum[k] = v;
    this.resets[k] = 0;
    this.#c = 0;
    this.#open = true;
  }

  /** Adds the samples of ascending arrays, skipping staleness markers. */
  addSamples(t: Float64Array, v: Float64Array, from = 0, to = t.length): void {
    for (let i = from; i < to; i++) if (!isStaleMarker(v, i)) this.addSample(t[i], v[i]);
  }

  /**
   * Appends a finished bucket (from storage). A bucket with the same end as the last one is merged
   * into it: its samples follow the last one's, so a counter reset across them is counted.
   */
  addBucket(
    end: number,
    count: number,
    firstT: number,
    firstV: number,
    lastT: number,
    lastV: number,
    max: number,
    sum: number,
    resets: number,
  ): void {
    this.#close();
    const i = this.n - 1;
    if (i >= 0 && this.end[i] === end) {
      const cross = firstV < this.lastV[i] ? this.lastV[i] : 0;
      this.resets[i] = this.resets[i] + cross + resets;
      this.count[i] += count;
      this.lastT[i] = lastT;
      this.lastV[i] = lastV;
      if (max > this.max[i] || Number.isNaN(this.max[i])) this.max[i] = max;
      this.sum[i] += sum;
      return;
    }
    const k = this.#push(end);
    this.count[k] = count;
    this.firstT[k] = firstT;
    this.firstV[k] = firstV;
    this.lastT[k] = lastT;
    this.lastV[k] = lastV;
    this.max[k] = max;
    this.sum[k] = sum;
    this.resets[k] = resets;
  }

  /** Folds the open bucket's compensation into its sum; call before reading the last bucket. */
  finish(): this {
    this.#close();
    return this;
  }

  /** True when every bucket sum is finite: no NaN or ±Inf sample and no overflow. */
  allFinite(): boolean {
    this.#close();
    for (let i = 0; i < this.n; i++) if (!Number.isFinite(this.sum[i])) return false;
    return true;
  }

  #close(): void {
    if (!this.#open) return;
    const i = this.n - 1;
    if (Number.isFinite(this.sum[i])) this.sum[i] += this.#c;
    this.#c = 0;
    this.#open = false;
  }

  #push(end: number): number {
    if (this.n === this.end.length) this.#grow(this.n * 2);
    this.end[this.n] = end;
    return this.n++;
  }

  #grow(cap: number): void {
    const g = (a: Float64Array) => {
      const b = new Float64Array(cap);
      b.set(a.subarray(0, this.n));
      return b;
    };
    this.end = g(this.end);
    this.count = g(this.count);
    this.firstT = g(this.firstT);
    this.firstV = g(this.firstV);
    this.lastT = g(this.lastT);
    this.lastV = g(this.lastV);
    this.max = g(this.max);
    this.sum = g(this.sum);
    this.resets = g(this.resets);
  }
}

/** Rollups of ascending samples (staleness markers skipped). */
export function rollupsOf(t: Float64Array, v: Float64Array, resolutionMs: number): Rollups {
  const r = new Rollups(resolutionMs, Math.max(4, Math.ceil(t.length / 8)));
  r.addSamples(t, v);
  return r.finish();
}
