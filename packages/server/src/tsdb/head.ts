/**
 * The in-memory head: recent samples of every series, appended in order into XOR chunks, plus an
 * out-of-order store for late samples inside the window. Per-series state lives in typed arrays
 * indexed by the series ref (see series.ts), grown by doubling; no object per series.
 *
 * Samples below `minValidT` have been written to blocks: the in-order head never accepts them and
 * reads clip to it (a chunk straddling the cut stays until its newer part is persisted too).
 */

import type { ColumnsBuilder } from "../storage/columns.ts";
import type { AppendRefusal, Labels } from "../storage/interface.ts";
import {
  bitsToBytes,
  MAX_SAMPLE_BITS,
  type XorCheckpoint,
  type XorState,
  xorAppendBits,
  xorDecodeFromInto,
  xorDecodeInto,
} from "./chunk.ts";
import { ClosedChunks, SLOT_BYTES, SlotPool } from "./chunkstore.ts";
import { OooStore } from "./ooo.ts";
import type { TsdbOptions } from "./options.ts";
import type { PostingsList } from "./postings.ts";
import { grow, SeriesRegistry } from "./series.ts";

const SLOT_BITS = SLOT_BYTES * 8;

/** Result of applying one sample: accepted, an identical duplicate (no-op), or a refusal. */
export type ApplyOutcome = "appended" | "duplicate" | AppendRefusal;

/** Samples of one series; the arrays belong to the caller. Values as raw float64 (bits preserved). */
export interface SampleArrays {
  t: Float64Array;
  v: Float64Array;
}

/** Reads of up to this many samples decode into one scratch (reads are synchronous; one per thread). */
const SCRATCH_SAMPLES = 4096;
const scratchT = new Float64Array(SCRATCH_SAMPLES);
const scratchV = new Float64Array(SCRATCH_SAMPLES);
const scratchBits = new Uint32Array(scratchV.buffer);

/**
 * Each head chunk keeps its decoder's state after this many samples (a checkpoint): a read whose window
 * starts after that sample decodes from there, not from the chunk's start. An alert rule's window of
 * minutes over 30 s samples starts late in its chunk of 120 (docs/performance.md, issue 46).
 */
export const CHECKPOINT_AT = 64;
const ck: XorCheckpoint = { index: 0, bits: 0, t: 0, tDelta: 0, hi: 0, lo: 0, leading: 0, trailing: 0 };

export class Head {
  readonly reg = new SeriesRegistry();
  /** Chunk ids of one appendSamples call (reads are synchronous). */
  readonly #idScratch: number[] = [];
  readonly ooo = new OooStore();
  /** Samples below this time are persisted in blocks (ms); -Infinity before the first cut. */
  minValidT = Number.NEGATIVE_INFINITY;
  /** Bounds of the in-order samples held (ms); +Inf/-Inf when empty. */
  dataMinT = Number.POSITIVE_INFINITY;
  dataMaxT = Number.NEGATIVE_INFINITY;
  inOrderSamples = 0;

  // Per-series state, indexed by ref.
  #maxT = new Float64Array(0);
  #lastHi = new Uint32Array(0);
  #lastLo = new Uint32Array(0);
  #slot = new Int32Array(0);
  #ocCount = new Uint16Array(0);
  #ocBits = new Uint16Array(0);
  #ocMinT = new Float64Array(0);
  /**
   * Start of the block range after the one the open chunk's first sample is in: a sample at or after it
   * cuts the chunk. Kept so an append compares instead of dividing twice (docs/performance.md,
   * "Start-up, fifth pass").
   */
  #ocEndT = new Float64Array(0);
  #ocDelta = new Float64Array(0);
  #ocLead = new Uint8Array(0);
  #ocTrail = new Uint8Array(0);
  #lastClosed = new Int32Array(0);
  /** The open chunk's checkpoint (valid once it holds CHECKPOINT_AT samples): see ClosedChunks.ck*. */
  #ocCkBits = new Uint16Array(0);
  #ocCkT = new Float64Array(0);
  #ocCkDelta = new Float64Array(0);
  #ocCkHi = new Uint32Array(0);
  #ocCkLo = new Uint32Array(0);
  #ocCkWindow = new Uint16Array(0);
  /** Uncommitted appenders that reference the series; such a series is never garbage-collected. */
  pending = new Uint16Array(0);
  /** Whether the series' labels are already in the WAL (or its checkpoint). */
  walLogged = new Uint8Array(0);
  /** Id of the last appender batch that counted the series in `pending` (appender.ts). */
  touchMark = new Float64Array(0);

  readonly #slots = new SlotPool();
  readonly #chunks = new ClosedChunks();
  readonly #state: XorState = { count: 0, bits: 0, t: 0, tDelta: 0, vHi: 0, vLo: 0, leading: 0, trailing: 0 };
  readonly #opts: TsdbOptions;

  constructor(opts: TsdbOptions) {
    this.#opts = opts;
    this.reg.onGrow = (cap) => this.#grow(cap);
  }

  getOrCreate(labels: Labels, ref = -1): number {
    return this.reg.getOrCreate(labels, ref).ref;
  }

  /** Max in-order timestamp of a series (ms), -Infinity when it has none in the head. */
  maxTime(ref: number): number {
    return this.#maxT[ref];
  }

  /**
   * Writes the raw bits of ref's newest in-order value as float64 number i of `bits` (a Uint32Array
   * view of a Float64Array: low word at 2i), so staleness markers keep their payload.
   */
  lastValueBits(ref: number, bits: Uint32Array, i: number): void {
    bits[2 * i] = this.#lastLo[ref];
    bits[2 * i + 1] = this.#lastHi[ref];
  }

  /**
   * The out-of-order bound for ref: samples older than this are refused. Relative to the series'
   * newest sample, or for a series without head samples to the head's newest sample / last cut.
   */
  oooBound(ref: number): number {
    const own = this.#maxT[ref];
    const refT = own > Number.NEGATIVE_INFINITY ? own : Math.max(this.dataMaxT, this.minValidT);
    return refT - this.#opts.outOfOrderWindowMs;
  }

  /**
   * Applies one sample (value as raw bits). `relaxed` (WAL replay) skips the window check, which
   * was enforced when the sample was first accepted.
   */
  append(ref: number, t: number, hi: number, lo: number, relaxed = false): ApplyOutcome {
    const maxT = this.#maxT[ref];
    if (t > maxT && t >= this.minValidT) {
      this.#appendInOrder(ref, t, hi, lo);
      return "appended";
    }
    if (t === maxT) {
      return this.#lastHi[ref] === hi && this.#lastLo[ref] === lo
        ? "duplicate"
        : "duplicate_sample_for_timestamp";
    }
    if (!relaxed && (this.#opts.outOfOrderWindowMs === 0 || t < this.oooBound(ref))) return "out_of_order";
    if (t >= this.minValidT) {
      const existing = this.#findInOrder(ref, t);
      if (existing) {
        return existing[0] === lo && existing[1] === hi ? "duplicate" : "duplicate_sample_for_timestamp";
      }
    }
    const r = this.ooo.insert(ref, t, hi, lo);
    return r === "added" ? "appended" : r === "same" ? "duplicate" : "duplicate_sample_for_timestamp";
  }

  #appendInOrder(ref: number, t: number, hi: number, lo: number): void {
    let slot = this.#slot[ref];
    if (slot >= 0) {
      // Cut on sample count, on slot space, and at block boundaries so chunks never straddle a block
      // (t > the chunk's first sample: t is past the boundary exactly when their ranges differ).
      if (
        this.#ocCount[ref] >= this.#opts.chunkTargetSamples ||
        this.#ocBits[ref] + MAX_SAMPLE_BITS > SLOT_BITS ||
        t >= this.#ocEndT[ref]
      ) {
        this.#cut(ref);
        slot = -1;
      }
    }
    const s = this.#state;
    if (slot < 0) {
      slot = this.#slots.alloc();
      this.#slot[ref] = slot;
      this.#ocCount[ref] = 0;
      this.#ocBits[ref] = 0;
      this.#ocMinT[ref] = t;
      const range = this.#opts.blockRangeMs;
      this.#ocEndT[ref] = (Math.floor(t / range) + 1) * range;
      s.count = 0;
      s.bits = 0;
      s.leading = 0xff;
      s.trailing = 0;
    } else {
      s.count = this.#ocCount[ref];
      s.bits = this.#ocBits[ref];
      s.t = this.#maxT[ref];
      s.tDelta = this.#ocDelta[ref];
      s.vHi = this.#lastHi[ref];
      s.vLo = this.#lastLo[ref];
      s.leading = this.#ocLead[ref];
      s.trailing = this.#ocTrail[ref];
    }
    xorAppendBits(this.#slots.page(slot), this.#slots.offset(slot), s, t, hi, lo);
    if (s.count === CHECKPOINT_AT) {
      this.#ocCkBits[ref] = s.bits;
      this.#ocCkT[ref] = t;
      this.#ocCkDelta[ref] = s.tDelta;
      this.#ocCkHi[ref] = hi;
      this.#ocCkLo[ref] = lo;
      // 0xff: no XOR window written yet (never read by the decoder then).
      this.#ocCkWindow[ref] = s.leading === 0xff ? 0 : (s.leading << 8) | s.trailing;
    }
    this.#ocCount[ref] = s.count;
    this.#ocBits[ref] = s.bits;
    this.#ocDelta[ref] = s.tDelta;
    this.#ocLead[ref] = s.leading;
    this.#ocTrail[ref] = s.trailing;
    this.#maxT[ref] = t;
    this.#lastHi[ref] = hi;
    this.#lastLo[ref] = lo;
    if (t < this.dataMinT) this.dataMinT = t;
    if (t > this.dataMaxT) this.dataMaxT = t;
    this.inOrderSamples++;
  }

  /** Moves the open chunk of ref into closed storage. */
  #cut(ref: number): void {
    const slot = this.#slot[ref];
    if (slot < 0) return;
    const id = this.#chunks.add(
      this.#slots.page(slot),
      this.#slots.offset(slot),
      bitsToBytes(this.#ocBits[ref]),
      this.#ocCount[ref],
      this.#ocMinT[ref],
      this.#maxT[ref],
      this.#lastClosed[ref],
    );
    if (this.#ocCount[ref] >= CHECKPOINT_AT) {
      const ch = this.#chunks;
      ch.ckBits[id] = this.#ocCkBits[ref];
      ch.ckT[id] = this.#ocCkT[ref];
      ch.ckDelta[id] = this.#ocCkDelta[ref];
      ch.ckHi[id] = this.#ocCkHi[ref];
      ch.ckLo[id] = this.#ocCkLo[ref];
      ch.ckWindow[id] = this.#ocCkWindow[ref];
    }
    this.#lastClosed[ref] = id;
    this.#slots.free(slot);
    this.#slot[ref] = -1;
  }

  /** Raw bits [lo, hi] of the in-order sample of ref at t, or undefined. */
  #findInOrder(ref: number, t: number): [number, number] | undefined {
    const got = this.#inOrder(ref, t, t);
    if (got.t.length === 0) return undefined;
    const u = new Uint32Array(got.v.buffer, got.v.byteOffset, 2);
    return [u[0], u[1]];
  }

  /** Pushes onto `ids` ref's closed chunks overlapping [lo, maxt], newest first; their sample count. */
  #pickChunks(ref: number, lo: number, maxt: number, ids: number[]): number {
    const ch = this.#chunks;
    let total = 0;
    for (let id = this.#lastClosed[ref]; id >= 0; id = ch.prev[id]) {
      if (ch.maxT[id] < lo) break; // the list is newest first
      if (ch.minT[id] <= maxt) {
        ids.push(id);
        total += ch.count[id];
      }
    }
    return total;
  }

  /** Whether ref's open chunk has samples and overlaps [lo, maxt]. */
  #openOverlaps(ref: number, lo: number, maxt: number): boolean {
    return (
      this.#slot[ref] >= 0 && this.#ocCount[ref] > 0 && this.#ocMinT[ref] <= maxt && this.#maxT[ref] >= lo
    );
  }

  /**
   * Decodes the samples in [lo, maxt] of the chunks `ids` (newest first, as #pickChunks gives them), then
   * of the open chunk when `open`, into t/v/bits from index n, ascending; returns the new end.
   */
  #decodeInOrder(
    ref: number,
    ids: readonly number[],
    open: boolean,
    lo: number,
    maxt: number,
    t: Float64Array,
    v: Float64Array,
    n: number,
    bits: Uint32Array,
  ): number {
    const ch = this.#chunks;
    for (let i = ids.length - 1; i >= 0; i--) {
      const id = ids[i];
      // From the checkpoint when every sample before it is below the window (same samples either way).
      if (ch.ckBits[id] !== 0 && ch.ckT[id] <= lo) {
        ck.bits = ch.ckBits[id];
        ck.t = ch.ckT[id];
        ck.tDelta = ch.ckDelta[id];
        ck.hi = ch.ckHi[id];
        ck.lo = ch.ckLo[id];
        ck.leading = ch.ckWindow[id] >>> 8;
        ck.trailing = ch.ckWindow[id] & 0xff;
        ck.index = CHECKPOINT_AT - 1;
        n = xorDecodeFromInto(ch.bytesOf(id), ch.off[id], ch.count[id], ck, lo, maxt, t, v, n, bits);
      } else n = xorDecodeInto(ch.bytesOf(id), ch.off[id], ch.count[id], lo, maxt, t, v, n, bits);
    }
    if (!open) return n;
    const slot = this.#slot[ref];
    const page = this.#slots.page(slot);
    const base = this.#slots.offset(slot);
    const count = this.#ocCount[ref];
    if (count >= CHECKPOINT_AT && this.#ocCkT[ref] <= lo) {
      ck.bits = this.#ocCkBits[ref];
      ck.t = this.#ocCkT[ref];
      ck.tDelta = this.#ocCkDelta[ref];
      ck.hi = this.#ocCkHi[ref];
      ck.lo = this.#ocCkLo[ref];
      ck.leading = this.#ocCkWindow[ref] >>> 8;
      ck.trailing = this.#ocCkWindow[ref] & 0xff;
      ck.index = CHECKPOINT_AT - 1;
      return xorDecodeFromInto(page, base, count, ck, lo, maxt, t, v, n, bits);
    }
    return xorDecodeInto(page, base, count, lo, maxt, t, v, n, bits);
  }

  /** In-order samples of ref in [mint, maxt] ∩ [minValidT, ∞). */
  #inOrder(ref: number, mint: number, maxt: number): SampleArrays {
    const lo = Math.max(mint, this.minValidT);
    const ids: number[] = [];
    let total = this.#pickChunks(ref, lo, maxt, ids);
    const open = this.#openOverlaps(ref, lo, maxt);
    if (open) total += this.#ocCount[ref];
    // Small reads decode into the scratch and copy out what is in range: a read of the last minutes of
    // a chunk (an alert rule's window) allocates its samples, not the whole chunk's.
    const small = total <= SCRATCH_SAMPLES;
    const t = small ? scratchT : new Float64Array(total);
    const v = small ? scratchV : new Float64Array(total);
    const bits = small ? scratchBits : new Uint32Array(v.buffer, v.byteOffset, v.length * 2);
    const n = this.#decodeInOrder(ref, ids, open, lo, maxt, t, v, 0, bits);
    if (small) return { t: t.slice(0, n), v: v.slice(0, n) };
    // Views, not copies: a read usually starts inside its first chunk, and the unused tail is small.
    return n === total ? { t, v } : { t: t.subarray(0, n), v: v.subarray(0, n) };
  }

  /** At least as many samples as ref has in [mint, maxt], from chunk counts (nothing decoded). */
  sampleBound(ref: number, mint: number, maxt: number): number {
    const lo = Math.max(mint, this.minValidT);
    const ch = this.#chunks;
    let total = this.ooo.countIn(ref, mint, maxt);
    for (let id = this.#lastClosed[ref]; id >= 0; id = ch.prev[id]) {
      if (ch.maxT[id] < lo) break; // the list is newest first
      if (ch.minT[id] <= maxt) total += ch.count[id];
    }
    if (this.#openOverlaps(ref, lo, maxt)) total += this.#ocCount[ref];
    return total;
  }

  /**
   * As `samples`, appended to `out` and ended as a series keyed by ref: in-order chunks decode
   * straight into its columns (no array pair per series, no copy afterwards).
   */
  appendSamples(ref: number, mint: number, maxt: number, out: ColumnsBuilder): void {
    if (this.ooo.countIn(ref, mint, maxt) > 0) {
      const m = this.samples(ref, mint, maxt);
      out.reserve(m.t.length);
      out.timestamps.set(m.t, out.used);
      out.values.set(m.v, out.used);
      out.used += m.t.length;
      out.endSeries(ref);
      return;
    }
    const lo = Math.max(mint, this.minValidT);
    const ids = this.#idScratch;
    ids.length = 0;
    let total = this.#pickChunks(ref, lo, maxt, ids);
    const open = this.#openOverlaps(ref, lo, maxt);
    if (open) total += this.#ocCount[ref];
    out.reserve(total);
    const t = out.timestamps;
    const v = out.values;
    const bits = out.valueBits;
    const n = this.#decodeInOrder(ref, ids, open, lo, maxt, t, v, out.used, bits);
    out.used = n;
    out.endSeries(ref);
  }

  /** Samples of ref with mint ≤ t ≤ maxt, in-order and out-of-order merged, ascending. */
  samples(ref: number, mint: number, maxt: number): SampleArrays {
    const a = this.#inOrder(ref, mint, maxt);
    const k = this.ooo.countIn(ref, mint, maxt);
    if (k === 0) return a;
    const bt = new Float64Array(k);
    const bv = new Float64Array(k);
    this.ooo.copyInto(ref, mint, maxt, bt, new Uint32Array(bv.buffer), 0);
    return mergeSamples([a, { t: bt, v: bv }]);
  }

  /**
   * Whether ref has a sample with mint ≤ t ≤ maxt (ms, inclusive). Decided from chunk bounds when a
   * chunk lies wholly inside or no chunk overlaps; only a chunk straddling an edge is decoded.
   */
  hasSamplesIn(ref: number, mint: number, maxt: number): boolean {
    if (this.ooo.countIn(ref, mint, maxt) > 0) return true;
    const lo = Math.max(mint, this.minValidT);
    if (lo > maxt) return false;
    let straddles = false;
    const check = (cMin: number, cMax: number): boolean => {
      if (cMax < lo || cMin > maxt) return false;
      if (cMin >= lo && cMax <= maxt) return true;
      straddles = true;
      return false;
    };
    if (this.#slot[ref] >= 0 && this.#ocCount[ref] > 0 && check(this.#ocMinT[ref], this.#maxT[ref]))
      return true;
    const ch = this.#chunks;
    for (let id = this.#lastClosed[ref]; id >= 0; id = ch.prev[id]) {
      if (ch.maxT[id] < lo) break; // newest first
      if (check(ch.minT[id], ch.maxT[id])) return true;
    }
    return straddles && this.#inOrder(ref, mint, maxt).t.length > 0;
  }

  /** Refs that may hold data older than `before` (ms). */
  hasDataBefore(ref: number, before: number): boolean {
    if (this.#ocCount[ref] > 0 && this.#ocMinT[ref] < before) return true;
    const id = this.#lastClosed[ref];
    return (
      (id >= 0 && this.#oldestChunkMinT(ref) < before) || this.ooo.countIn(ref, -Infinity, before - 1) > 0
    );
  }

  #oldestChunkMinT(ref: number): number {
    let m = Number.POSITIVE_INFINITY;
    for (let id = this.#lastClosed[ref]; id >= 0; id = this.#chunks.prev[id]) m = this.#chunks.minT[id];
    return m;
  }

  /**
   * Forgets everything below `before` (ms) after it was written to a block, and garbage-collects
   * series left without samples. Returns the number of series removed.
   */
  truncate(before: number): number {
    this.ooo.truncateBefore(before);
    const ch = this.#chunks;
    let removed = 0;
    const refs = Array.from(this.reg.allPostings());
    for (const ref of refs) {
      if (this.#slot[ref] >= 0 && this.#maxT[ref] < before) {
        this.#cut(ref);
      }
      // Find the newest chunk entirely below `before`; it and everything older goes.
      let keepTail = -1;
      let id = this.#lastClosed[ref];
      while (id >= 0 && ch.maxT[id] >= before) {
        keepTail = id;
        id = ch.prev[id];
      }
      while (id >= 0) {
        const prev = ch.prev[id];
        this.inOrderSamples -= ch.count[id];
        ch.free(id);
        id = prev;
      }
      if (keepTail >= 0) ch.prev[keepTail] = -1;
      else this.#lastClosed[ref] = -1;
      if (this.#lastClosed[ref] < 0 && this.#slot[ref] < 0 && !this.ooo.has(ref) && this.pending[ref] === 0) {
        this.reg.remove(ref);
        removed++;
      }
    }
    ch.compact();
    if (before > this.minValidT) this.minValidT = before;
    if (this.dataMinT < before) this.dataMinT = this.dataMaxT >= before ? before : Number.POSITIVE_INFINITY;
    if (this.dataMaxT < before) this.dataMaxT = Number.NEGATIVE_INFINITY;
    return removed;
  }

  /** Approximate bytes of the head's own arrays and chunk memory. */
  memoryBytes(): number {
    const perSeries = this.reg.cap * (8 + 4 + 4 + 4 + 2 + 2 + 8 + 8 + 1 + 1 + 4 + 2 + 1 + 8 + 28);
    return (
      perSeries +
      this.reg.arrayBytes() +
      this.#slots.bytes() +
      this.#chunks.allocatedBytes() +
      this.ooo.bytes()
    );
  }

  /** Chunks held: closed ones plus each series' open chunk. */
  chunkCount(): number {
    let open = 0;
    const refs = this.reg.allPostings();
    for (let i = 0; i < refs.length; i++) if (this.#slot[refs[i]] >= 0) open++;
    return this.#chunks.live + open;
  }

  /** Bytes of encoded chunk data held (closed + open), for bytes/sample figures. */
  chunkBytes(): number {
    let open = 0;
    const refs = this.reg.allPostings();
    for (let i = 0; i < refs.length; i++) {
      if (this.#slot[refs[i]] >= 0) open += bitsToBytes(this.#ocBits[refs[i]]);
    }
    return this.#chunks.liveBytes + open;
  }

  /**
   * Bytes of encoded chunk data (closed + open) of the series `refs`; out-of-order samples, whose
   * chunks are kept apart until the next cut, are not counted.
   */
  chunkBytesOf(refs: PostingsList): number {
    let n = 0;
    const ch = this.#chunks;
    for (let i = 0; i < refs.length; i++) {
      const ref = refs[i];
      if (this.#slot[ref] >= 0) n += bitsToBytes(this.#ocBits[ref]);
      for (let id = this.#lastClosed[ref]; id >= 0; id = ch.prev[id]) n += ch.len[id];
    }
    return n;
  }

  #grow(cap: number): void {
    this.#maxT = grow(this.#maxT, cap, Number.NEGATIVE_INFINITY);
    this.#lastHi = grow(this.#lastHi, cap);
    this.#lastLo = grow(this.#lastLo, cap);
    this.#slot = grow(this.#slot, cap, -1);
    this.#ocCount = grow(this.#ocCount, cap);
    this.#ocBits = grow(this.#ocBits, cap);
    this.#ocMinT = grow(this.#ocMinT, cap);
    this.#ocEndT = grow(this.#ocEndT, cap);
    this.#ocDelta = grow(this.#ocDelta, cap);
    this.#ocLead = grow(this.#ocLead, cap);
    this.#ocTrail = grow(this.#ocTrail, cap);
    this.#lastClosed = grow(this.#lastClosed, cap, -1);
    this.#ocCkBits = grow(this.#ocCkBits, cap);
    this.#ocCkT = grow(this.#ocCkT, cap);
    this.#ocCkDelta = grow(this.#ocCkDelta, cap);
    this.#ocCkHi = grow(this.#ocCkHi, cap);
    this.#ocCkLo = grow(this.#ocCkLo, cap);
    this.#ocCkWindow = grow(this.#ocCkWindow, cap);
    this.pending = grow(this.pending, cap);
    this.walLogged = grow(this.walLogged, cap);
    this.touchMark = grow(this.touchMark, cap);
  }
}

/**
 * Merges ascending sample arrays; on equal timestamps the earliest input wins (sources are passed
 * oldest-persisted first). Values are copied as raw bits.
 */
export function mergeSamples(parts: SampleArrays[]): SampleArrays {
  const live = parts.filter((p) => p.t.length > 0);
  if (live.length === 0) return { t: new Float64Array(0), v: new Float64Array(0) };
  if (live.length === 1) return live[0];
  let total = 0;
  for (const p of live) total += p.t.length;
  const t = new Float64Array(total);
  const v = new Float64Array(total);
  const ov = new Uint32Array(v.buffer);
  const views = live.map((p) => new Uint32Array(p.v.buffer, p.v.byteOffset, p.v.length * 2));
  const idx = new Array<number>(live.length).fill(0);
  let n = 0;
  for (;;) {
    let best = -1;
    let bt = Number.POSITIVE_INFINITY;
    for (let k = 0; k < live.length; k++) {
      const i = idx[k];
      if (i < live[k].t.length && live[k].t[i] < bt) {
        bt = live[k].t[i];
        best = k;
      }
    }
    if (best < 0) break;
    t[n] = bt;
    ov[2 * n] = views[best][2 * idx[best]];
    ov[2 * n + 1] = views[best][2 * idx[best] + 1];
    n++;
    for (let k = 0; k < live.length; k++) if (idx[k] < live[k].t.length && live[k].t[idx[k]] === bt) idx[k]++;
  }
  return n === total ? { t, v } : { t: t.slice(0, n), v: v.slice(0, n) };
}
