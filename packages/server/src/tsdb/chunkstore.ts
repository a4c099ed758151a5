/**
 * Memory for head chunks without an object per chunk or series:
 * - SlotPool: fixed-size byte slots for open (still growing) chunks, in pages; a freed slot is reused.
 * - ClosedChunks: immutable cut chunks packed into large byte pages, with their metadata in typed
 *   arrays indexed by chunk id and a per-series singly linked list (newest first) through `prev`.
 *   Freed chunks leave holes until `compact()` copies the live ones into fresh pages.
 */
import { grow } from "./series.ts";

/** Bytes per open-chunk slot; a chunk is cut before a worst-case sample would overflow it. */
export const SLOT_BYTES = 256;
const SLOTS_PER_PAGE = 1024;
const PAGE_BYTES = 1 << 20;

export class SlotPool {
  readonly #pages: Uint8Array[] = [];
  #free: number[] = [];
  #next = 0;

  /** A zeroed slot id. */
  alloc(): number {
    const id = this.#free.length > 0 ? this.#free.pop()! : this.#next++;
    const page = id >>> 10;
    if (page >= this.#pages.length) this.#pages.push(new Uint8Array(SLOTS_PER_PAGE * SLOT_BYTES));
    const off = (id & (SLOTS_PER_PAGE - 1)) * SLOT_BYTES;
    this.#pages[page].fill(0, off, off + SLOT_BYTES);
    return id;
  }

  free(id: number): void {
    this.#free.push(id);
  }

  page(id: number): Uint8Array {
    return this.#pages[id >>> 10];
  }

  offset(id: number): number {
    return (id & (SLOTS_PER_PAGE - 1)) * SLOT_BYTES;
  }

  bytes(): number {
    return this.#pages.length * SLOTS_PER_PAGE * SLOT_BYTES;
  }
}

export class ClosedChunks {
  #pages: Uint8Array[] = [];
  #pageUsed = 0;
  minT = new Float64Array(1024);
  maxT = new Float64Array(1024);
  page = new Uint32Array(1024);
  off = new Uint32Array(1024);
  len = new Uint16Array(1024);
  count = new Uint16Array(1024);
  prev = new Int32Array(1024);
  /**
   * Each chunk's decoder checkpoint (chunk.ts XorCheckpoint, after sample CHECKPOINT_AT - 1), taken by
   * the head while appending: ckBits 0 = none. A read that starts after it decodes from there.
   */
  ckBits = new Uint16Array(1024);
  ckT = new Float64Array(1024);
  ckDelta = new Float64Array(1024);
  ckHi = new Uint32Array(1024);
  ckLo = new Uint32Array(1024);
  /** leading << 8 | trailing. */
  ckWindow = new Uint16Array(1024);
  #freeIds: number[] = [];
  #nextId = 0;
  liveBytes = 0;
  live = 0;

  /** Stores a copy of src[start, start+len) as a new chunk; returns its id. */
  add(
    src: Uint8Array,
    start: number,
    len: number,
    count: number,
    minT: number,
    maxT: number,
    prev: number,
  ): number {
    if (this.#pages.length === 0 || this.#pageUsed + len > PAGE_BYTES) {
      this.#pages.push(new Uint8Array(PAGE_BYTES));
      this.#pageUsed = 0;
    }
    const id = this.#freeIds.length > 0 ? this.#freeIds.pop()! : this.#nextId++;
    if (id >= this.minT.length) this.#growMeta(id + 1);
    const p = this.#pages.length - 1;
    this.#pages[p].set(src.subarray(start, start + len), this.#pageUsed);
    this.page[id] = p;
    this.off[id] = this.#pageUsed;
    this.#pageUsed += len;
    this.len[id] = len;
    this.count[id] = count;
    this.minT[id] = minT;
    this.maxT[id] = maxT;
    this.prev[id] = prev;
    this.ckBits[id] = 0;
    this.liveBytes += len;
    this.live++;
    return id;
  }

  free(id: number): void {
    this.liveBytes -= this.len[id];
    this.live--;
    this.len[id] = 0;
    this.#freeIds.push(id);
  }

  bytesOf(id: number): Uint8Array {
    return this.#pages[this.page[id]];
  }

  /** Allocated page bytes (live + holes). */
  allocatedBytes(): number {
    return this.#pages.length * PAGE_BYTES + this.minT.length * (33 + 28);
  }

  /**
   * Slides live chunks down over the holes, in place, when holes exceed an eighth of the space (and
   * two pages), and drops the pages left empty. It runs after a block cut, every block range: moving
   * the head's chunks once costs far less than holding the holes as resident memory until the next
   * cut, and in place no second set of pages is allocated (garbage until a full collection).
   * Readers decode chunks synchronously, so none sees a chunk move.
   */
  compact(): void {
    const allocated = this.#pages.length * PAGE_BYTES;
    const holes = allocated - this.liveBytes;
    if (allocated === 0 || holes * 8 < allocated || holes < 2 * PAGE_BYTES) return;
    const freed = new Set(this.#freeIds);
    const live: number[] = [];
    for (let id = 0; id < this.#nextId; id++) if (!freed.has(id)) live.push(id);
    // In storage order: packing a subsequence of the chunks the way they were packed ("next fit")
    // never puts one later than it was, so each copy goes down (or stays) and never over a chunk not
    // yet moved.
    live.sort((a, b) => this.page[a] - this.page[b] || this.off[a] - this.off[b]);
    let p = 0;
    let used = 0;
    for (const id of live) {
      const len = this.len[id];
      if (used + len > PAGE_BYTES) {
        p++;
        used = 0;
      }
      const from = this.page[id];
      const off = this.off[id];
      if (from === p) this.#pages[p].copyWithin(used, off, off + len);
      else this.#pages[p].set(this.#pages[from].subarray(off, off + len), used);
      this.page[id] = p;
      this.off[id] = used;
      used += len;
    }
    this.#pages.length = live.length === 0 ? 0 : p + 1;
    this.#pageUsed = used;
  }

  #growMeta(n: number): void {
    let cap = this.minT.length;
    while (cap < n) cap *= 2;
    this.minT = grow(this.minT, cap);
    this.maxT = grow(this.maxT, cap);
    this.page = grow(this.page, cap);
    this.off = grow(this.off, cap);
    this.len = grow(this.len, cap);
    this.count = grow(this.count, cap);
    this.prev = grow(this.prev, cap);
    this.ckBits = grow(this.ckBits, cap);
    this.ckT = grow(this.ckT, cap);
    this.ckDelta = grow(this.ckDelta, cap);
    this.ckHi = grow(this.ckHi, cap);
    this.ckLo = grow(this.ckLo, cap);
    this.ckWindow = grow(this.ckWindow, cap);
  }
}
