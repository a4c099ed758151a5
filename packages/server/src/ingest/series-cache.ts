/**
 * What ingest resolved per series, by the series' label key (CompactWriteRequest.labelKeys), found
 * by the key's hash from the decoder: a Map keyed by the key strings would hash every new ~130-byte
 * key string again, which was a tenth of the ingest path. A key whose hash is already held by
 * another key goes to a string-keyed overflow map, so a collision costs speed, never correctness.
 */
export class SeriesCache<T extends { readonly key: string }> {
  readonly #byHash = new Map<number, T>();
  readonly #overflow = new Map<string, T>();

  /** The entry for `key` (whose labelHashes value is `hash`), or undefined. */
  get(hash: number, key: string): T | undefined {
    const r = this.#byHash.get(hash);
    if (r === undefined || r.key === key) return r;
    return this.#overflow.get(key);
  }

  set(hash: number, entry: T): void {
    const held = this.#byHash.get(hash);
    if (held === undefined || held.key === entry.key) this.#byHash.set(hash, entry);
    else this.#overflow.set(entry.key, entry);
  }

  get size(): number {
    return this.#byHash.size + this.#overflow.size;
  }

  clear(): void {
    this.#byHash.clear();
    this.#overflow.clear();
  }
}
