/**
 * Merging one series' sample arrays from several sources (blocks oldest first, then the head) for a
 * read. A 7-day read over 2-hour blocks has ~85 parts; they almost never overlap, so the common case
 * is one concatenation, and overlapping parts are merged pairwise (O(n log k), not O(n·k)).
 */
import type { SampleArrays } from "./head.ts";

/**
 * Merges ascending sample arrays into one ascending array without duplicate timestamps; on equal
 * timestamps the earlier part wins (pass sources oldest-persisted first). Values are copied as raw
 * bits (staleness markers survive). May return one of the inputs when only one is non-empty; the
 * result otherwise is a new array owned by the caller.
 */
export function mergeParts(parts: readonly SampleArrays[]): SampleArrays {
  const live = parts.filter((p) => p.t.length > 0);
  if (live.length === 0) return { t: new Float64Array(0), v: new Float64Array(0) };
  if (live.length === 1) return live[0];
  if (disjointInOrder(live)) return concat(live);
  // Pairwise rounds keep the priority order: in merge2(a, b), a is always the earlier source.
  let round = live;
  while (round.length > 1) {
    const next: SampleArrays[] = [];
    for (let i = 0; i < round.length; i += 2)
      next.push(i + 1 < round.length ? merge2(round[i], round[i + 1]) : round[i]);
    round = next;
  }
  return round[0];
}

/** Parts in source order, each wholly after the previous one (the usual block layout). */
function disjointInOrder(parts: readonly SampleArrays[]): boolean {
  for (let i = 1; i < parts.length; i++) {
    const prev = parts[i - 1].t;
    if (prev[prev.length - 1] >= parts[i].t[0]) return false;
  }
  return true;
}

function concat(parts: readonly SampleArrays[]): SampleArrays {
  let total = 0;
  for (const p of parts) total += p.t.length;
  const t = new Float64Array(total);
  const v = new Float64Array(total);
  let n = 0;
  for (const p of parts) {
    // Same-type TypedArray#set copies bytes, so NaN payloads are kept.
    t.set(p.t, n);
    v.set(p.v, n);
    n += p.t.length;
  }
  return { t, v };
}

/** Two-way merge; `a` wins on equal timestamps. */
function merge2(a: SampleArrays, b: SampleArrays): SampleArrays {
  const na = a.t.length;
  const nb = b.t.length;
  const t = new Float64Array(na + nb);
  const v = new Float64Array(na + nb);
  const ov = new Uint32Array(v.buffer);
  const av = new Uint32Array(a.v.buffer, a.v.byteOffset, na * 2);
  const bv = new Uint32Array(b.v.buffer, b.v.byteOffset, nb * 2);
  let i = 0;
  let j = 0;
  let n = 0;
  while (i < na || j < nb) {
    const ta = i < na ? a.t[i] : Number.POSITIVE_INFINITY;
    const tb = j < nb ? b.t[j] : Number.POSITIVE_INFINITY;
    if (ta <= tb) {
      t[n] = ta;
      ov[2 * n] = av[2 * i];
      ov[2 * n + 1] = av[2 * i + 1];
      i++;
      if (ta === tb) j++;
    } else {
      t[n] = tb;
      ov[2 * n] = bv[2 * j];
      ov[2 * n + 1] = bv[2 * j + 1];
      j++;
    }
    n++;
  }
  return n === na + nb ? { t, v } : { t: t.slice(0, n), v: v.slice(0, n) };
}
