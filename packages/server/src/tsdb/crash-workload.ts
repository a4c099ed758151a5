/**
 * The deterministic workload of the crash test (crash.test.ts) and its child (crash-child.ts):
 * batch k holds one sample per series at T0 + k s, plus an out-of-order sample on series 0.
 * Small block range and WAL segments make cuts, checkpoints and rotations happen within seconds.
 */
import { type Labels, labelsFromRecord, staleNaN } from "../storage/interface.ts";
import type { TsdbOptions } from "./options.ts";

export const CRASH_T0 = Date.UTC(2025, 0, 1);
export const CRASH_SERIES = 16;
export const CRASH_STEP_MS = 1000;

export const crashSeries: Labels[] = Array.from({ length: CRASH_SERIES }, (_, i) =>
  labelsFromRecord({ __name__: "crash_metric", series: String(i), project_id: "p1" }),
);

export function crashOptions(now: () => number): Partial<TsdbOptions> {
  return {
    now,
    blockRangeMs: 60_000,
    outOfOrderWindowMs: 30_000,
    walSegmentBytes: 64 * 1024,
    checkpointEverySegments: 2,
    retentionMs: 365 * 24 * 3_600_000,
  };
}

/**
 * Samples of batch k: [series index, timestamp ms, value]. The staleness marker is the string
 * "stale": V8 canonicalises NaN payloads held in all-number arrays, so it is made at use (`crashValue`).
 */
export function crashBatch(k: number): [number, number, number | "stale"][] {
  const t = CRASH_T0 + k * CRASH_STEP_MS;
  const out: [number, number, number | "stale"][] = [];
  for (let s = 0; s < CRASH_SERIES; s++) {
    const v = s === 3 && k % 7 === 0 ? "stale" : (k * 31 + s) % 1000 === 0 ? -0 : k * 0.5 + s;
    out.push([s, t, v]);
  }
  out.push([0, t - 15_500, k + 0.25]); // late, but within the window
  return out;
}

export function crashValue(v: number | "stale"): number {
  return v === "stale" ? staleNaN() : v;
}
