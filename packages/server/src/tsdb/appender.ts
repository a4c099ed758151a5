/**
 * The batch writer handed out by Tsdb.appender(): validates and buffers samples, then commit()
 * logs them to the WAL (group commit) and applies them to the head once durable.
 */
import type { Appender, AppendRefusal, AppendResult, Labels } from "../storage/interface.ts";
import { numberBits } from "./chunk.ts";
import { InvalidLabelsError, TsdbClosedError } from "./errors.ts";
import type { Head } from "./head.ts";
import { canonicalLabels } from "./labels.ts";
import type { TsdbOptions } from "./options.ts";
import { grow } from "./series.ts";

/** What the appender needs from the store. */
export interface AppenderHost {
  readonly head: Head;
  readonly opts: TsdbOptions;
  readonly closed: boolean;
  /** Logs the batch and applies it to the head once durable; resolves with the apply counts. */
  commitBatch(batch: Batch): Promise<{ accepted: number; refused: Partial<Record<AppendRefusal, number>> }>;
  /** Reused buffers of finished appenders (their arrays outlive one request; see Batch.reuse). */
  readonly spareBatches: Batch[];
}

/** Finished batches kept for reuse, and the largest one kept (samples): ~1.3 MB each at most. */
const MAX_SPARE_BATCHES = 16;
const MAX_SPARE_BATCH_SAMPLES = 65_536;

let batchIds = 0;

/** Buffered samples of one appender; values as raw bits. */
export class Batch {
  n = 0;
  refs = new Uint32Array(64);
  ts = new Float64Array(64);
  his = new Uint32Array(64);
  los = new Uint32Array(64);
  /** Distinct refs, each holding one `pending` count on the head. */
  readonly touched: number[] = [];
  /** Marks refs already in `touched` (head.touchMark[ref] === this id); ids are never reused. */
  id = ++batchIds;

  /** Empties the batch for another appender, under a new id. */
  reuse(): this {
    this.n = 0;
    this.touched.length = 0;
    this.id = ++batchIds;
    return this;
  }

  push(ref: number, t: number, hi: number, lo: number): void {
    if (this.n === this.refs.length) {
      const cap = this.n * 2;
      this.refs = grow(this.refs, cap);
      this.ts = grow(this.ts, cap);
      this.his = grow(this.his, cap);
      this.los = grow(this.los, cap);
    }
    this.refs[this.n] = ref;
    this.ts[this.n] = t;
    this.his[this.n] = hi;
    this.los[this.n] = lo;
    this.n++;
  }
}

const bits = new Uint32Array(2);

export class TsdbAppender implements Appender {
  readonly #host: AppenderHost;
  readonly #batch: Batch;
  #refused: Partial<Record<AppendRefusal, number>> = {};
  #done = false;
  /** Accepted sample times [#minT, #maxT] (ms), from the clock at the first append. */
  #minT = Number.NaN;
  #maxT = Number.NaN;

  constructor(host: AppenderHost) {
    this.#host = host;
    this.#batch = host.spareBatches.pop()?.reuse() ?? new Batch();
  }

  /**
   * Validates and buffers one sample (timestamp in ms). Returns false when refused now (invalid
   * labels, out of bounds — retention and max-future bounds are taken from the clock at the
   * appender's first append —, or older than the series' out-of-order window); a sample can still be
   * refused at commit if another commit changed its series meanwhile (counted in the result).
   */
  append(labels: Labels, timestampMs: number, value: number): boolean {
    return this.appendRef(-1, labels, timestampMs, value) >= 0;
  }

  /** `append` with a series handle (the ref) from an earlier call; returns the ref, or -1 when refused. */
  appendRef(given: number, labels: Labels, timestampMs: number, value: number): number {
    if (this.#done) throw new TsdbClosedError("appender already committed or rolled back");
    if (this.#host.closed) throw new TsdbClosedError();
    const { head, opts } = this.#host;
    // Refs are never reused, so a live given ref still names the labels it was returned for.
    let ref = given >= 0 && head.reg.isAlive(given) ? given : -1;
    // An existing series is found from the labels as given: only a canonical label set can equal a
    // stored one, so validation and interning run just for label sets not seen before.
    if (ref < 0) ref = head.reg.findCached(labels);
    if (ref < 0) {
      let canon: Labels;
      try {
        canon = canonicalLabels(labels);
      } catch (e) {
        if (e instanceof InvalidLabelsError) return this.#refuse("invalid_labels");
        throw e;
      }
      if (!this.#inBounds(timestampMs)) return this.#refuse("out_of_bounds");
      ref = head.getOrCreate(canon);
    } else if (!this.#inBounds(timestampMs)) return this.#refuse("out_of_bounds");
    const batch = this.#batch;
    if (head.touchMark[ref] !== batch.id) {
      head.touchMark[ref] = batch.id;
      batch.touched.push(ref);
      head.pending[ref]++;
    }
    const maxT = head.maxTime(ref);
    const late = timestampMs < maxT || timestampMs < head.minValidT;
    if (late && (opts.outOfOrderWindowMs === 0 || timestampMs < head.oooBound(ref))) {
      return this.#refuse("out_of_order");
    }
    numberBits(value, bits);
    batch.push(ref, timestampMs, bits[1], bits[0]);
    return ref;
  }

  #inBounds(timestampMs: number): boolean {
    if (Number.isNaN(this.#minT)) {
      // The clock is read once per appender (one batch), not once per sample.
      const opts = this.#host.opts;
      const now = opts.now();
      this.#minT = now - opts.retentionMs;
      this.#maxT = now + opts.maxFutureMs;
    }
    return Number.isSafeInteger(timestampMs) && timestampMs >= this.#minT && timestampMs <= this.#maxT;
  }

  #refuse(reason: AppendRefusal): -1 {
    this.#refused[reason] = (this.#refused[reason] ?? 0) + 1;
    return -1;
  }

  /** Resolves once the batch is durable in the WAL and applied; counts accepted and refused samples. */
  async commit(): Promise<AppendResult> {
    if (this.#done) throw new TsdbClosedError("appender already committed or rolled back");
    this.#done = true;
    const batch = this.#batch;
    try {
      const r = batch.n === 0 ? { accepted: 0, refused: {} } : await this.#host.commitBatch(batch);
      const refused = { ...this.#refused };
      for (const [k, v] of Object.entries(r.refused) as [AppendRefusal, number][])
        refused[k] = (refused[k] ?? 0) + v;
      return { accepted: r.accepted, refused };
    } finally {
      this.#release(batch);
    }
  }

  rollback(): void {
    if (this.#done) return;
    this.#done = true;
    this.#release(this.#batch);
  }

  #release(batch: Batch): void {
    const pending = this.#host.head.pending;
    for (const ref of batch.touched) pending[ref]--;
    batch.touched.length = 0;
    // Done with (logged and applied, or rolled back): its arrays can serve the next appender.
    const spare = this.#host.spareBatches;
    if (spare.length < MAX_SPARE_BATCHES && batch.refs.length <= MAX_SPARE_BATCH_SAMPLES) spare.push(batch);
  }
}
