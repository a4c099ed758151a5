/**
 * Stateless seeded randomness: a value depends only on (seed, key, step, slot), so the output for a
 * step is the same whether it was produced by backfill or by tick, in any batching.
 */

/** 32-bit FNV-1a of a string, for turning VM names into seeds. */
export function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** A murmur3-style finalizer over the mixed inputs; returns a float in [0, 1). */
export function rand(seed: number, key: number, step: number, slot: number): number {
  let h = (seed ^ Math.imul(key, 0x9e3779b1)) >>> 0;
  h = Math.imul(h ^ (step >>> 0), 0x85ebca6b);
  h ^= Math.imul(Math.floor(step / 0x100000000), 0xc2b2ae35);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) ^ Math.imul(slot + 1, 0x27d4eb2f);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return (h >>> 0) / 0x100000000;
}

/** Approximately normal (mean 0, sd 1) from four uniforms; cheap and bounded (|x| < 3.5). */
export function gauss(seed: number, key: number, step: number, slot: number): number {
  let s = 0;
  for (let i = 0; i < 4; i++) s += rand(seed, key, step, slot * 4 + i);
  return (s - 2) * Math.sqrt(3);
}
