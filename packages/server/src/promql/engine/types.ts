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

export function newStepSeries(labels: Labels, n: number, dropName = false): StepSeries {
  return { labels, values: new Float64Array(n), present: new Uint8Array(n), dropName };
}
