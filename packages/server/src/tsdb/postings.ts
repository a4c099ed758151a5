/**
 * Postings: sorted lists of series ids per label pair (Prometheus' index/postings.go), and the set
 * operations the matcher evaluation needs. Lists are ascending and duplicate-free.
 */

export type PostingsList = ArrayLike<number>;

/** A growable ascending list of ids backed by a Uint32Array. */
export class GrowablePostings {
  a = new Uint32Array(4);
  n = 0;

  /** Adds an id; appending in increasing order is O(1), anything else falls back to an insert. */
  add(id: number): void {
    if (this.n === this.a.length) {
      const b = new Uint32Array(this.a.length * 2);
      b.set(this.a);
      this.a = b;
    }
    if (this.n === 0 || this.a[this.n - 1] < id) {
      this.a[this.n++] = id;
      return;
    }
    const i = lowerBound(this.a, this.n, id);
    if (this.a[i] === id) return;
    this.a.copyWithin(i + 1, i, this.n);
    this.a[i] = id;
    this.n++;
  }

  remove(id: number): void {
    const i = lowerBound(this.a, this.n, id);
    if (i < this.n && this.a[i] === id) {
      this.a.copyWithin(i, i + 1, this.n);
      this.n--;
    }
  }

  /** A view of the live ids; valid until the next mutation. */
  view(): Uint32Array {
    return this.a.subarray(0, this.n);
  }
}

function lowerBound(a: ArrayLike<number>, n: number, x: number): number {
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Intersection of sorted lists; the result is a new array. */
export function intersect(lists: PostingsList[]): number[] {
  if (lists.length === 0) return [];
  const sorted = [...lists].sort((a, b) => a.length - b.length);
  let acc: number[] = Array.from(sorted[0]);
  for (let k = 1; k < sorted.length && acc.length > 0; k++) {
    const b = sorted[k];
    const out: number[] = [];
    let j = 0;
    for (const x of acc) {
      // galloping would help for very skewed sizes; binary search per element is enough here
      if (b.length > acc.length * 16) {
        j = lowerBoundFrom(b, j, x);
      } else {
        while (j < b.length && b[j] < x) j++;
      }
      if (j < b.length && b[j] === x) out.push(x);
    }
    acc = out;
  }
  return acc;
}

function lowerBoundFrom(a: PostingsList, from: number, x: number): number {
  let lo = from;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Union of sorted lists (k-way via pairwise merging); a new array. */
export function merge(lists: PostingsList[]): number[] {
  if (lists.length === 0) return [];
  let parts: PostingsList[] = lists;
  while (parts.length > 1) {
    const next: PostingsList[] = [];
    for (let i = 0; i < parts.length; i += 2) {
      next.push(i + 1 < parts.length ? merge2(parts[i], parts[i + 1]) : parts[i]);
    }
    parts = next;
  }
  return Array.from(parts[0]);
}

function merge2(a: PostingsList, b: PostingsList): number[] {
  const out: number[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] < b[j]) out.push(a[i++]);
    else if (a[i] > b[j]) out.push(b[j++]);
    else {
      out.push(a[i++]);
      j++;
    }
  }
  while (i < a.length) out.push(a[i++]);
  while (j < b.length) out.push(b[j++]);
  return out;
}

/** Elements of a not in b (both sorted); a new array. */
export function subtract(a: PostingsList, b: PostingsList): number[] {
  const out: number[] = [];
  let j = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    while (j < b.length && b[j] < x) j++;
    if (j >= b.length || b[j] !== x) out.push(x);
  }
  return out;
}
