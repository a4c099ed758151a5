/**
 * What ingest resolved per series, by the series' label key as sent (CompactWriteRequest.labelBytes
 * and its ranges), found by the key's hash from the decoder and confirmed by comparing the bytes:
 * no string is made per series of a request. The keys of cached entries are copied into one growing
 * arena, not a buffer each. A key whose hash is already held by another key goes to a string-keyed
 * overflow map, so a collision costs speed, never correctness.
 */
export class SeriesCache<T extends { keyAt: number; keyLen: number }> {
  readonly #byHash = new Map<number, T>();
  readonly #overflow = new Map<string, T>();
  #arena = Buffer.allocUnsafe(64 * 1024);
  #arenaView = dataView(this.#arena);
  #arenaLen = 0;

  /** The entry for the key `bytes[start, end)` (whose labelHashes value is `hash`), or undefined. */
  get(hash: number, bytes: Uint8Array, view: DataView, start: number, end: number): T | undefined {
    const r = this.#byHash.get(hash);
    if (r === undefined || this.#same(r, view, start, end)) return r;
    if (this.#overflow.size === 0) return undefined;
    return this.#overflow.get(latin1(bytes, start, end));
  }

  /** Caches `entry` for the key `bytes[start, end)`; sets its keyAt and keyLen. */
  set(hash: number, bytes: Uint8Array, start: number, end: number, entry: T): void {
    const held = this.#byHash.get(hash);
    if (held !== undefined && this.#same(held, dataView(bytes), start, end)) {
      entry.keyAt = held.keyAt;
      entry.keyLen = held.keyLen;
      this.#byHash.set(hash, entry);
      return;
    }
    this.#store(bytes, start, end, entry);
    if (held === undefined) this.#byHash.set(hash, entry);
    else this.#overflow.set(latin1(bytes, start, end), entry);
  }

  get size(): number {
    return this.#byHash.size + this.#overflow.size;
  }

  /** Bytes of keys held. */
  get keyBytes(): number {
    return this.#arenaLen;
  }

  clear(): void {
    this.#byHash.clear();
    this.#overflow.clear();
    this.#arenaLen = 0;
  }

  #store(bytes: Uint8Array, start: number, end: number, entry: T): void {
    const len = end - start;
    if (this.#arenaLen + len > this.#arena.length) {
      const b = Buffer.allocUnsafe(Math.max(this.#arena.length * 2, this.#arenaLen + len));
      this.#arena.copy(b, 0, 0, this.#arenaLen);
      this.#arena = b;
      this.#arenaView = dataView(b);
    }
    this.#arena.set(bytes.subarray(start, end), this.#arenaLen);
    entry.keyAt = this.#arenaLen;
    entry.keyLen = len;
    this.#arenaLen += len;
  }

  /** Whether entry's key equals view[start, end), compared 4 bytes at a time. */
  #same(entry: T, view: DataView, start: number, end: number): boolean {
    const len = end - start;
    if (entry.keyLen !== len) return false;
    const a = this.#arenaView;
    const off = entry.keyAt - start;
    let i = start;
    for (; i + 4 <= end; i += 4) if (a.getUint32(off + i) !== view.getUint32(i)) return false;
    for (; i < end; i++) if (a.getUint8(off + i) !== view.getUint8(i)) return false;
    return true;
  }
}

export function dataView(b: Uint8Array): DataView {
  return new DataView(b.buffer, b.byteOffset, b.byteLength);
}

function latin1(b: Uint8Array, start: number, end: number): string {
  return Buffer.from(b.buffer, b.byteOffset + start, end - start).toString("latin1");
}
