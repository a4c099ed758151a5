/** Numerically careful accumulation shared by aggregations and *_over_time (Prometheus' kahanSumInc). */

/** One step of Kahan-Neumaier summation; returns [sum, compensation] in a reused tuple. */
export function kahanInc(inc: number, sum: number, c: number, out: Float64Array): void {
  const t = sum + inc;
  if (!Number.isFinite(t) && !Number.isNaN(t)) c = 0;
  else if (Math.abs(sum) >= Math.abs(inc)) c += sum - t + inc;
  else c += inc - t + sum;
  out[0] = t;
  out[1] = c;
}

/**
 * Running mean that sums with Kahan compensation and switches to an incremental mean only when
 * the plain sum would overflow (Prometheus 3 avg / avg_over_time).
 */
export class MeanAccumulator {
  #sum = 0;
  #c = 0;
  #mean = 0;
  #count = 0;
  #incremental = false;
  readonly #tmp = new Float64Array(2);

  reset(): void {
    this.#sum = 0;
    this.#c = 0;
    this.#mean = 0;
    this.#count = 0;
    this.#incremental = false;
  }

  add(f: number): void {
    const tmp = this.#tmp;
    this.#count++;
    if (!this.#incremental) {
      kahanInc(f, this.#sum, this.#c, tmp);
      if (this.#count === 1 || Number.isFinite(tmp[0]) || Number.isNaN(tmp[0])) {
        this.#sum = tmp[0];
        this.#c = tmp[1];
        return;
      }
      this.#incremental = true;
      this.#mean = this.#sum / (this.#count - 1);
      this.#c /= this.#count - 1;
    }
    if (!Number.isFinite(this.#mean) && !Number.isNaN(this.#mean)) {
      if (!Number.isFinite(f) && !Number.isNaN(f) && this.#mean > 0 === f > 0) return;
      if (Number.isFinite(f)) return;
    }
    const corrected = this.#mean + this.#c;
    kahanInc(f / this.#count - corrected / this.#count, this.#mean, this.#c, tmp);
    this.#mean = tmp[0];
    this.#c = tmp[1];
  }

  get count(): number {
    return this.#count;
  }

  value(): number {
    if (this.#incremental) return this.#mean + this.#c;
    return (this.#sum + this.#c) / this.#count;
  }
}

/** Prometheus' quantile over a value list (sorted in place; NaN first). */
export function quantileOf(q: number, values: number[]): number {
  if (values.length === 0 || Number.isNaN(q)) return Number.NaN;
  if (q < 0) return Number.NEGATIVE_INFINITY;
  if (q > 1) return Number.POSITIVE_INFINITY;
  values.sort((a, b) => (Number.isNaN(a) ? (Number.isNaN(b) ? 0 : -1) : Number.isNaN(b) ? 1 : a - b));
  const n = values.length;
  const rank = q * (n - 1);
  const lower = Math.max(0, Math.floor(rank));
  const upper = Math.min(n - 1, lower + 1);
  const weight = rank - Math.floor(rank);
  return values[lower] * (1 - weight) + values[upper] * weight;
}
