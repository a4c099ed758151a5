/** Internal value shapes of the evaluator: column-oriented over the evaluation timestamps. */
import type { Labels } from "../../storage/interface.ts";

/** One instant-vector series over all evaluation steps. `present[i]` says whether step i has a value. */
export interface StepSeries {
  labels: Labels;
  values: Float64Array;
  present: Uint8Array;
  /** Delayed `__name__` removal: the name is dropped when the query finishes. */
  dropName: boolean;
  /** Sample timestamps per step, ms (set by instant selectors, read by `timestamp()`). */
  sampleTs?: Float64Array;
}

/** Raw samples of one series: ascending timestamps (ms), no staleness markers. */
export interface RawSeries {
  labels: Labels;
  timestamps: Float64Array;
  values: Float64Array;
  dropName: boolean;
}

/**
 * A range vector as functions see it: raw series plus the window end per step; a step's samples
 * are those in (end - range, end] (see `fillBounds`).
 */
export interface Windows {
  series: RawSeries[];
  /** Window end per step, ms (the step time after `@` and `offset`). */
  ends: Float64Array;
  rangeMs: number;
}

export type Value =
  | { type: "vector"; series: StepSeries[] }
  | { type: "scalar"; values: Float64Array }
  | { type: "string"; value: string }
  | { type: "matrix"; windows: Windows };

/**
 * Step columns are carved out of shared slabs: a query makes thousands of short columns, and a
 * separate ArrayBuffer for each costs more than the work done on it. Slabs are never reused, so a
 * column starts zeroed; one stays alive while any column cut from it does.
 */
const SLAB = 64 * 1024;
let f64Slab = new Float64Array(SLAB);
let f64Used = 0;
let u8Slab = new Uint8Array(SLAB);
let u8Used = 0;

/** A zeroed Float64Array of n elements (a view into a slab when small). */
export function stepF64(n: number): Float64Array {
  if (n > SLAB / 16) return new Float64Array(n);
  if (f64Used + n > SLAB) {
    f64Slab = new Float64Array(SLAB);
    f64Used = 0;
  }
  const a = f64Slab.subarray(f64Used, f64Used + n);
  f64Used += n;
  return a;
}

/** A zeroed Uint8Array of n elements (a view into a slab when small). */
export function stepU8(n: number): Uint8Array {
  if (n > SLAB / 16) return new Uint8Array(n);
  if (u8Used + n > SLAB) {
    u8Slab = new Uint8Array(SLAB);
    u8Used = 0;
  }
  const a = u8Slab.subarray(u8Used, u8Used + n);
  u8Used += n;
  return a;
}

export function newStepSeries(labels: Labels, n: number, dropName = false): StepSeries {
  return { labels, values: stepF64(n), present: stepU8(n), dropName };
}
