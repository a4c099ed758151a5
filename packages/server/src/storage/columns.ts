/**
 * SeriesColumns (storage/interface.ts): building them a series at a time, and converting from and to
 * the array pair per series that `select` returns.
 */
import type { Labels, SeriesColumns, SeriesData } from "./interface.ts";

/**
 * Grows one pair of sample columns as series are appended: a store decodes each series straight into
 * them (`reserve`, then write at `used`, then `endSeries`), so the samples are written once.
 */
export class ColumnsBuilder {
  timestamps: Float64Array;
  values: Float64Array;
  /** The values' memory as 32-bit words, for decoders that write raw bits. */
  valueBits: Uint32Array;
  /** Samples written so far. */
  used = 0;
  #keys: number[] = [];
  #offsets: number[] = [0];
  #labels: (Labels | undefined)[] = [];

  constructor(capacity = 1024) {
    this.timestamps = new Float64Array(capacity);
    this.values = new Float64Array(capacity);
    this.valueBits = new Uint32Array(this.values.buffer);
  }

  /** Empties the builder for another use, keeping its columns' memory. */
  reset(): this {
    this.used = 0;
    this.#keys = [];
    this.#offsets = [0];
    this.#labels = [];
    return this;
  }

  /** Room for `n` more samples after `used`. */
  reserve(n: number): void {
    const need = this.used + n;
    if (need <= this.timestamps.length) return;
    const cap = Math.max(need, this.timestamps.length * 2);
    const t = new Float64Array(cap);
    const v = new Float64Array(cap);
    t.set(this.timestamps.subarray(0, this.used));
    v.set(this.values.subarray(0, this.used));
    this.timestamps = t;
    this.values = v;
    this.valueBits = new Uint32Array(v.buffer);
  }

  /**
   * Closes the series whose samples were written since the previous one; dropped when it got none,
   * unless `keepEmpty` (a select of labels only). `labels` may be left out when the store builds them
   * on demand by key (`finish`'s labelsOf).
   */
  endSeries(key: number, labels?: Labels, keepEmpty = false): void {
    if (!keepEmpty && this.used === this.#offsets[this.#offsets.length - 1]) return;
    this.#keys.push(key);
    this.#labels.push(labels);
    this.#offsets.push(this.used);
  }

  /** The columns; `labelsByKey` builds the labels of a series ended without them. */
  finish(labelsByKey?: (key: number) => Labels): SeriesColumns {
    const labels = this.#labels;
    const keys = Float64Array.from(this.#keys);
    return {
      length: keys.length,
      keys,
      offsets: Uint32Array.from(this.#offsets),
      timestamps: this.timestamps,
      values: this.values,
      labelsOf(i) {
        const l = labels[i] ?? labelsByKey?.(keys[i]);
        if (!l) throw new Error(`series ${i} of the columns has no labels`);
        return l;
      },
    };
  }
}

/** Columns holding `data` (copied, series without samples included), with no keys (−1). */
export function columnsOf(data: readonly SeriesData[]): SeriesColumns {
  let total = 0;
  for (const s of data) total += s.values.length;
  const b = new ColumnsBuilder(total);
  for (const s of data) {
    b.timestamps.set(s.timestamps, b.used);
    // Same element type: a byte copy, NaN payloads (staleness markers) included.
    b.values.set(s.values, b.used);
    b.used += s.values.length;
    b.endSeries(-1, s.labels, true);
  }
  return b.finish();
}

/** Whether `x` is columns rather than an array of series. */
export function isColumns(x: readonly SeriesData[] | SeriesColumns): x is SeriesColumns {
  return !Array.isArray(x);
}

/** The series of `c` as views into its columns, in its order. */
export function seriesOfColumns(c: SeriesColumns): SeriesData[] {
  const out: SeriesData[] = [];
  for (let i = 0; i < c.length; i++) {
    const a = c.offsets[i];
    const b = c.offsets[i + 1];
    out.push({
      labels: c.labelsOf(i),
      timestamps: c.timestamps.subarray(a, b),
      values: c.values.subarray(a, b),
    });
  }
  return out;
}
