import { encodeLabelFields, encodeSeriesRuns, type TimeSeries } from "@svc/remotewrite";

/**
 * Encodes a cycle's series as a remote-write WriteRequest (the same bytes as encodeWriteRequest),
 * keeping each label set's encoded fields from one cycle to the next: a domain's series have the same
 * labels every cycle, and encoding their strings byte by byte was the largest part of the encode
 * (docs/performance.md, bench:collector). Bounded: a label set not used in a cycle is forgotten at the
 * end of that cycle, so departed domains and renamed devices do not accumulate.
 */
export class SeriesEncoder {
  /** Label sets used this cycle, by key. */
  #current = new Map<string, Uint8Array>();
  /** Label sets of the previous cycle, moved to #current when used again. */
  #previous = new Map<string, Uint8Array>();

  encode(series: readonly TimeSeries[]): Uint8Array {
    const fields: Uint8Array[] = new Array(series.length);
    const starts: number[] = new Array(series.length);
    const ends: number[] = new Array(series.length);
    let samples = 0;
    for (const s of series) samples += s.samples.length;
    const timestamps: number[] = new Array(samples);
    const values = new Float64Array(samples);
    let p = 0;
    for (let k = 0; k < series.length; k++) {
      const s = series[k];
      fields[k] = this.#labelFields(s);
      starts[k] = p;
      for (const x of s.samples) {
        timestamps[p] = x.timestampMs;
        values[p] = x.value;
        p++;
      }
      ends[k] = p;
    }
    return encodeSeriesRuns(fields, starts, ends, timestamps, values);
  }

  /** Ends a cycle: label sets it did not use are dropped. */
  endCycle(): void {
    this.#previous = this.#current;
    this.#current = new Map();
  }

  /** Label sets kept (for tests). */
  get size(): number {
    return this.#current.size + this.#previous.size;
  }

  #labelFields(s: TimeSeries): Uint8Array {
    // Each string prefixed by its length: unambiguous whatever the strings hold.
    let key = "";
    for (const l of s.labels) key += `${l.name.length}:${l.name}${l.value.length}:${l.value}`;
    let f = this.#current.get(key);
    if (f !== undefined) return f;
    f = this.#previous.get(key);
    if (f !== undefined) this.#previous.delete(key);
    else f = encodeLabelFields(s.labels);
    this.#current.set(key, f);
    return f;
  }
}
