/**
 * Out-of-order samples of the head (Prometheus' OOO head, simplified): per series a sorted array of
 * raw samples, kept until compaction writes them into a block. Only series that received late
 * samples have an entry, so the per-series object is the exception, not the rule.
 */

class OooSeries {
  t = new Float64Array(8);
  /** Raw value bits: [lo, hi] pairs, so NaN payloads survive. */
  v = new Uint32Array(16);
  n = 0;
}

export type OooInsert = "added" | "same" | "conflict";

export class OooStore {
  readonly #series = new Map<number, OooSeries>();
  samples = 0;

  /** Inserts a sample keeping the series sorted; an existing timestamp is not overwritten. */
  insert(ref: number, t: number, hi: number, lo: number): OooInsert {
    let s = this.#series.get(ref);
    if (!s) {
      s = new OooSeries();
      this.#series.set(ref, s);
    }
    const i = lowerBound(s.t, s.n, t);
    if (i < s.n && s.t[i] === t) return s.v[2 * i] === lo && s.v[2 * i + 1] === hi ? "same" : "conflict";
    if (s.n === s.t.length) {
      const nt = new Float64Array(s.t.length * 2);
      nt.set(s.t);
      s.t = nt;
      const nv = new Uint32Array(s.v.length * 2);
      nv.set(s.v);
      s.v = nv;
    }
    s.t.copyWithin(i + 1, i, s.n);
    s.v.copyWithin(2 * i + 2, 2 * i, 2 * s.n);
    s.t[i] = t;
    s.v[2 * i] = lo;
    s.v[2 * i + 1] = hi;
    s.n++;
    this.samples++;
    return "added";
  }

  has(ref: number): boolean {
    return this.#series.has(ref);
  }

  refs(): IterableIterator<number> {
    return this.#series.keys();
  }

  /** Number of samples of ref in [mint, maxt]. */
  countIn(ref: number, mint: number, maxt: number): number {
    const s = this.#series.get(ref);
    if (!s) return 0;
    return lowerBound(s.t, s.n, maxt + 1) - lowerBound(s.t, s.n, mint);
  }

  /** Copies samples of ref in [mint, maxt] into the output at `at`; returns the new index. */
  copyInto(
    ref: number,
    mint: number,
    maxt: number,
    outT: Float64Array,
    outV: Uint32Array,
    at: number,
  ): number {
    const s = this.#series.get(ref);
    if (!s) return at;
    const end = lowerBound(s.t, s.n, maxt + 1);
    for (let i = lowerBound(s.t, s.n, mint); i < end; i++) {
      outT[at] = s.t[i];
      outV[2 * at] = s.v[2 * i];
      outV[2 * at + 1] = s.v[2 * i + 1];
      at++;
    }
    return at;
  }

  /** Drops samples with t < before; removes emptied series. */
  truncateBefore(before: number): void {
    for (const [ref, s] of this.#series) {
      const k = lowerBound(s.t, s.n, before);
      if (k === 0) continue;
      s.t.copyWithin(0, k, s.n);
      s.v.copyWithin(0, 2 * k, 2 * s.n);
      s.n -= k;
      this.samples -= k;
      if (s.n === 0) this.#series.delete(ref);
    }
  }

  drop(ref: number): void {
    const s = this.#series.get(ref);
    if (s) this.samples -= s.n;
    this.#series.delete(ref);
  }

  /** Smallest timestamp held, or Infinity. */
  minTime(): number {
    let m = Number.POSITIVE_INFINITY;
    for (const s of this.#series.values()) if (s.n > 0 && s.t[0] < m) m = s.t[0];
    return m;
  }

  bytes(): number {
    let b = 0;
    for (const s of this.#series.values()) b += s.t.byteLength + s.v.byteLength + 64;
    return b;
  }
}

export function lowerBound(a: Float64Array, n: number, x: number): number {
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
