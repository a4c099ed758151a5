/**
 * The head's series registry: one integer ref per series, labels interned as symbol pairs in one
 * flat Uint32Array, a typed-array hash table from label set to ref, and postings per label pair.
 * There is no object per series; per-series sample state lives in head.ts' typed arrays, indexed
 * by the same ref. Refs are never reused within a process, and replay restores them from the WAL
 * so records written before and after a restart agree.
 */
import type { Labels } from "../storage/interface.ts";
import { labelsFromSyms, labelsFromSymsPicked, SymbolTable, symsEqual, symsHash } from "./labels.ts";
import type { PostingsIndex } from "./matchers.ts";
import { GrowablePostings, type PostingsList } from "./postings.ts";

const EMPTY = 0;
const TOMBSTONE = -1;

export class SeriesRegistry implements PostingsIndex {
  readonly syms = new SymbolTable();
  /** Capacity of the per-series arrays (refs < cap). */
  cap = 0;
  /** Next ref to hand out (refs are never reused). */
  nextRef = 0;
  live = 0;
  #labelArena = new Uint32Array(1024);
  #labelArenaLen = 0;
  #labelOff = new Uint32Array(0);
  #labelCnt = new Uint16Array(0);
  #hash = new Uint32Array(0);
  #alive = new Uint8Array(0);
  /** Open addressing, linear probing: ref + 1, EMPTY or TOMBSTONE. */
  #table = new Int32Array(1024);
  #tableUsed = 0;
  readonly #postings = new Map<string, Map<string, GrowablePostings>>();
  readonly #all = new GrowablePostings();
  readonly #symScratch: number[] = [];
  /**
   * Refs by label-set object: writers that keep their label sets (ingest caches them per series) are
   * found without interning each name and value again. Refs are never reused, so a live cached ref
   * still names the same labels; Labels are immutable by contract.
   */
  readonly #byObject = new WeakMap<Labels, number>();
  /** Called when the per-series capacity grows, so the head can grow its own arrays. */
  onGrow: (cap: number) => void = () => {};

  /** Ref of a canonical label set, or -1. */
  find(labels: Labels): number {
    const syms = this.#symScratch;
    syms.length = 0;
    for (const l of labels) {
      const n = this.syms.get(l.name);
      const v = this.syms.get(l.value);
      if (n < 0 || v < 0) return -1;
      syms.push(n, v);
    }
    return this.#lookup(syms, hashSyms(syms));
  }

  /** `find`, remembering the ref for this label-set object (the appender's path). */
  findCached(labels: Labels): number {
    const hit = this.#byObject.get(labels);
    if (hit !== undefined && this.#alive[hit] === 1) return hit;
    const ref = this.find(labels);
    if (ref >= 0) this.#byObject.set(labels, ref);
    return ref;
  }

  /** Ref of a canonical label set, creating the series (with `ref` when given, for replay). */
  getOrCreate(labels: Labels, ref = -1): { ref: number; created: boolean } {
    const syms = this.#symScratch;
    syms.length = 0;
    for (const l of labels) syms.push(this.syms.intern(l.name), this.syms.intern(l.value));
    const h = hashSyms(syms);
    const found = this.#lookup(syms, h);
    if (found >= 0) return { ref: found, created: false };
    if (ref < 0) ref = this.nextRef;
    if (ref >= this.nextRef) this.nextRef = ref + 1;
    this.#ensureCap(ref + 1);
    if (this.#labelArenaLen + syms.length > this.#labelArena.length) {
      const b = new Uint32Array(Math.max(this.#labelArena.length * 2, this.#labelArenaLen + syms.length));
      b.set(this.#labelArena.subarray(0, this.#labelArenaLen));
      this.#labelArena = b;
    }
    this.#labelOff[ref] = this.#labelArenaLen;
    this.#labelCnt[ref] = syms.length / 2;
    for (const s of syms) this.#labelArena[this.#labelArenaLen++] = s;
    this.#hash[ref] = h;
    this.#alive[ref] = 1;
    this.live++;
    this.#insert(ref, h);
    for (const l of labels) this.#postingsFor(l.name, l.value, true)!.add(ref);
    this.#all.add(ref);
    return { ref, created: true };
  }

  isAlive(ref: number): boolean {
    return ref < this.cap && this.#alive[ref] === 1;
  }

  /** symsHash of ref's labels (the same value a block gives for the same label set). */
  labelsHash(ref: number): number {
    return symsHash(this.syms, this.#labelArena, this.#labelOff[ref], this.#labelCnt[ref]);
  }

  /** Whether ref's labels are exactly `labels`, without building them. */
  hasLabels(ref: number, labels: Labels): boolean {
    return symsEqual(this.syms, this.#labelArena, this.#labelOff[ref], this.#labelCnt[ref], labels);
  }

  /** A fresh Labels array for ref (the caller owns it). */
  labels(ref: number): Labels {
    return labelsFromSyms(this.syms, this.#labelArena, this.#labelOff[ref], this.#labelCnt[ref]);
  }

  /** Symbol ids of the label names given (names no series has are left out), for `labelsPicked`. */
  nameSymbols(names: readonly string[]): number[] {
    const out: number[] = [];
    for (const n of names) {
      const id = this.syms.get(n);
      if (id >= 0) out.push(id);
    }
    return out;
  }

  /** A fresh Labels array of ref's labels whose name is one of `names` (from `nameSymbols`). */
  labelsPicked(ref: number, names: readonly number[]): Labels {
    return labelsFromSymsPicked(this.syms, this.#labelArena, this.#labelOff[ref], this.#labelCnt[ref], names);
  }

  /** Removes a series from the table and postings. Its label symbols stay in the arena. */
  remove(ref: number): void {
    if (!this.isAlive(ref)) return;
    const labels = this.labels(ref);
    const mask = this.#table.length - 1;
    for (let i = this.#hash[ref] & mask; ; i = (i + 1) & mask) {
      const e = this.#table[i];
      if (e === EMPTY) break;
      if (e === ref + 1) {
        this.#table[i] = TOMBSTONE;
        break;
      }
    }
    for (const l of labels) {
      const byValue = this.#postings.get(l.name);
      const p = byValue?.get(l.value);
      if (!p) continue;
      p.remove(ref);
      if (p.n === 0) {
        byValue!.delete(l.value);
        if (byValue!.size === 0) this.#postings.delete(l.name);
      }
    }
    this.#all.remove(ref);
    this.#alive[ref] = 0;
    this.live--;
  }

  /** Live refs, ascending; a view valid until the next mutation. */
  allPostings(): PostingsList {
    return this.#all.view();
  }

  postings(name: string, value: string): PostingsList {
    return this.#postingsFor(name, value, false)?.view() ?? [];
  }

  labelValues(name: string): Iterable<string> {
    return this.#postings.get(name)?.keys() ?? [];
  }

  labelNames(): string[] {
    return [...this.#postings.keys()];
  }

  /** Approximate bytes held by the registry's arrays (not the symbol strings). */
  arrayBytes(): number {
    return (
      this.#labelArena.byteLength +
      this.#labelOff.byteLength +
      this.#labelCnt.byteLength +
      this.#hash.byteLength +
      this.#alive.byteLength +
      this.#table.byteLength
    );
  }

  #postingsFor(name: string, value: string, create: boolean): GrowablePostings | undefined {
    let byValue = this.#postings.get(name);
    if (!byValue) {
      if (!create) return undefined;
      byValue = new Map();
      this.#postings.set(name, byValue);
    }
    let p = byValue.get(value);
    if (!p && create) {
      p = new GrowablePostings();
      byValue.set(value, p);
    }
    return p;
  }

  #lookup(syms: number[], h: number): number {
    const mask = this.#table.length - 1;
    for (let i = h & mask; ; i = (i + 1) & mask) {
      const e = this.#table[i];
      if (e === EMPTY) return -1;
      if (e === TOMBSTONE) continue;
      const ref = e - 1;
      if (this.#hash[ref] === h && this.#sameSyms(ref, syms)) return ref;
    }
  }

  #sameSyms(ref: number, syms: number[]): boolean {
    if (this.#labelCnt[ref] * 2 !== syms.length) return false;
    const off = this.#labelOff[ref];
    for (let i = 0; i < syms.length; i++) if (this.#labelArena[off + i] !== syms[i]) return false;
    return true;
  }

  #insert(ref: number, h: number): void {
    // Keep the load (live + tombstones) under 1/2 so probes stay short.
    if ((this.#tableUsed + 1) * 2 > this.#table.length) this.#rehash();
    const mask = this.#table.length - 1;
    let i = h & mask;
    while (this.#table[i] > 0) i = (i + 1) & mask;
    if (this.#table[i] === EMPTY) this.#tableUsed++;
    this.#table[i] = ref + 1;
  }

  #rehash(): void {
    let size = this.#table.length;
    while (this.live * 4 > size) size *= 2;
    const old = this.#table;
    this.#table = new Int32Array(size);
    this.#tableUsed = 0;
    const mask = size - 1;
    for (const e of old) {
      if (e <= 0) continue;
      let i = this.#hash[e - 1] & mask;
      while (this.#table[i] !== EMPTY) i = (i + 1) & mask;
      this.#table[i] = e;
      this.#tableUsed++;
    }
  }

  #ensureCap(n: number): void {
    if (n <= this.cap) return;
    let cap = Math.max(this.cap, 1024);
    while (cap < n) cap *= 2;
    this.#labelOff = grow(this.#labelOff, cap);
    this.#labelCnt = grow(this.#labelCnt, cap);
    this.#hash = grow(this.#hash, cap);
    this.#alive = grow(this.#alive, cap);
    this.cap = cap;
    this.onGrow(cap);
  }
}

/** Copies a typed array into a larger one of the same kind (doubling growth). */
export function grow<T extends Uint8Array | Uint16Array | Uint32Array | Int32Array | Float64Array>(
  a: T,
  n: number,
  fill?: number,
): T {
  const b = new (a.constructor as new (n: number) => T)(n);
  b.set(a);
  if (fill !== undefined) b.fill(fill, a.length);
  return b;
}

function hashSyms(syms: number[]): number {
  let h = 0x811c9dc5;
  for (const s of syms) h = Math.imul(h ^ s, 0x01000193);
  return (h ^ (h >>> 15)) >>> 0;
}
