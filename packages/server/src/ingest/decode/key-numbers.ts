import type { LabelKeyNumbering } from "@svc/remotewrite";

/**
 * The decode worker's numbering of label keys (docs/decisions.md "Numbering label keys by their
 * successor"): equal key bytes get equal numbers, different bytes different numbers, within one
 * numbering. Every key's bytes are kept once in an arena; per number, typed arrays hold where its
 * bytes are, its hash (the decoder's labelHashes value) and the number that followed it in the last
 * request that sent it (its successor).
 *
 * The decoder numbers each series as it reads it (LabelKeyNumbering). A series is first tried
 * against the successor of the series before it: senders (Prometheus, vmagent, svc's own
 * collectors) send their series in the same order every time, so nearly every series is confirmed by
 * one byte comparison against bytes lying next to the previous key's in the arena, and the decoder
 * then neither hashes the key nor checks its UTF-8 again (it was checked when added). Otherwise the
 * decoder hashes and checks the key and it is looked up in an open-addressing table by its hash
 * (linear probing; every probe whose hash matches is confirmed by the bytes, so a hash collision
 * costs a probe, never a wrong number). No object, string or Map entry is made per key.
 */
export class KeyNumbers implements LabelKeyNumbering {
  #arena = new Uint8Array(64 * 1024);
  #arenaView = new DataView(this.#arena.buffer);
  #arenaLen = 0;
  /** Per number: its key's arena offset and length, its hash, its successor (−1: none yet). */
  #at = new Uint32Array(1024);
  #len = new Uint32Array(1024);
  #hash = new Uint32Array(1024);
  #next = new Int32Array(1024);
  /** Open addressing by hash: number + 1 per slot, 0 empty; at most half full. */
  #table = new Int32Array(2048);
  #count = 0;
  #followed = 0;
  /** The request being numbered: its numbers by series index, the last series' number, its successor. */
  #ids = new Uint32Array(1024);
  #prev = -1;
  #expect = -1;

  /** Numbers handed out so far (the next new key gets this one). */
  get size(): number {
    return this.#count;
  }

  /** Series numbered as the successor of the series before them (one byte comparison each), in all. */
  get followed(): number {
    return this.#followed;
  }

  /** Bytes of keys held. */
  get keyBytes(): number {
    return this.#arenaLen;
  }

  /** Forgets every number: the next key numbered gets 0. */
  clear(): void {
    this.#table.fill(0);
    this.#count = 0;
    this.#arenaLen = 0;
    this.begin();
  }

  /**
   * Starts numbering a request (its series, by index, through `known` and `add`: the decoder calls
   * them as it reads each series, see @svc/remotewrite's LabelKeyNumbering); `ids` then hands out
   * the numbers.
   */
  begin(): void {
    this.#prev = -1;
    this.#expect = -1;
  }

  known(index: number, _bytes: Uint8Array, view: DataView, start: number, end: number): number {
    const id = this.#expect;
    if (id < 0 || !this.#same(id, view, start, end)) return -1;
    this.#followed++;
    this.#put(index, id);
    return this.#hash[id];
  }

  add(index: number, bytes: Uint8Array, view: DataView, start: number, end: number, hash: number): void {
    let id = this.#find(hash, view, start, end);
    if (id < 0) id = this.#add(hash, bytes, start, end);
    if (this.#prev >= 0) this.#next[this.#prev] = id;
    this.#put(index, id);
  }

  /** The numbers of the request's series 0..n−1 (a new array, the caller's). */
  ids(n: number): Uint32Array {
    return this.#ids.slice(0, n);
  }

  /**
   * Numbers series i's key `bytes[start[i], end[i])` (hash `hashes[i]`) into `out[i]`, for i < n, as
   * the decoder's calls would.
   */
  number(
    bytes: Uint8Array,
    start: Uint32Array,
    end: Uint32Array,
    hashes: Uint32Array,
    n: number,
    out: Uint32Array,
  ): void {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.begin();
    for (let i = 0; i < n; i++)
      if (this.known(i, bytes, view, start[i], end[i]) < 0)
        this.add(i, bytes, view, start[i], end[i], hashes[i]);
    out.set(this.#ids.subarray(0, n));
  }

  #put(index: number, id: number): void {
    if (index >= this.#ids.length) {
      const a = new Uint32Array(Math.max(index + 1, this.#ids.length * 2));
      a.set(this.#ids);
      this.#ids = a;
    }
    this.#ids[index] = id;
    this.#prev = id;
    this.#expect = this.#next[id];
  }

  /** The number of the key view[s, e) with hash h, or −1. */
  #find(h: number, view: DataView, s: number, e: number): number {
    const t = this.#table;
    const mask = t.length - 1;
    for (let slot = h & mask; ; slot = (slot + 1) & mask) {
      const v = t[slot];
      if (v === 0) return -1;
      const id = v - 1;
      if (this.#hash[id] === h && this.#same(id, view, s, e)) return id;
    }
  }

  #add(h: number, bytes: Uint8Array, s: number, e: number): number {
    const id = this.#count++;
    if (id === this.#at.length) this.#growIds();
    const len = e - s;
    if (this.#arenaLen + len > this.#arena.length) this.#growArena(len);
    this.#arena.set(bytes.subarray(s, e), this.#arenaLen);
    this.#at[id] = this.#arenaLen;
    this.#len[id] = len;
    this.#hash[id] = h;
    this.#next[id] = -1;
    this.#arenaLen += len;
    if (this.#count * 2 > this.#table.length) this.#rehash(this.#table.length * 2);
    else this.#insert(this.#table, h, id);
    return id;
  }

  #insert(t: Int32Array, h: number, id: number): void {
    const mask = t.length - 1;
    let slot = h & mask;
    while (t[slot] !== 0) slot = (slot + 1) & mask;
    t[slot] = id + 1;
  }

  #rehash(size: number): void {
    const t = new Int32Array(size);
    for (let id = 0; id < this.#count; id++) this.#insert(t, this.#hash[id], id);
    this.#table = t;
  }

  #growIds(): void {
    const cap = this.#at.length * 2;
    const grow = <A extends Uint32Array | Int32Array>(a: A, b: A): A => {
      b.set(a);
      return b;
    };
    this.#at = grow(this.#at, new Uint32Array(cap));
    this.#len = grow(this.#len, new Uint32Array(cap));
    this.#hash = grow(this.#hash, new Uint32Array(cap));
    this.#next = grow(this.#next, new Int32Array(cap));
  }

  #growArena(need: number): void {
    const a = new Uint8Array(Math.max(this.#arena.length * 2, this.#arenaLen + need));
    a.set(this.#arena.subarray(0, this.#arenaLen));
    this.#arena = a;
    this.#arenaView = new DataView(a.buffer);
  }

  /**
   * Whether number id's key equals view[s, e): 8 bytes a step as two little-endian words, XORed and
   * ORed so a step has one branch (a quarter faster than a branch per word, and than Buffer.compare).
   */
  #same(id: number, view: DataView, s: number, e: number): boolean {
    if (this.#len[id] !== e - s) return false;
    const a = this.#arenaView;
    const off = this.#at[id] - s;
    let i = s;
    for (; i + 8 <= e; i += 8) {
      const d =
        (a.getUint32(off + i, true) ^ view.getUint32(i, true)) |
        (a.getUint32(off + i + 4, true) ^ view.getUint32(i + 4, true));
      if (d !== 0) return false;
    }
    for (; i < e; i++) if (a.getUint8(off + i) !== view.getUint8(i)) return false;
    return true;
  }
}
