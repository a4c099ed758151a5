/**
 * Data-quality arithmetic of QueryVMMonitoring (docs/api.md#queryvmmonitoring), pure and in Unix seconds: which step
 * timestamps a series should have, which it has, and the runs it lacks. Missing is reported, never
 * filled.
 */

export interface GapS {
  /** First missing step timestamp, Unix s (inclusive). */
  readonly startTimeUnix: number;
  /** Last missing step timestamp, Unix s (inclusive). */
  readonly endTimeUnix: number;
}

export interface Coverage {
  readonly expectedPoints: number;
  readonly presentPoints: number;
  readonly gaps: GapS[];
}

/**
 * Coverage of one series over the step grid `fromS, fromS + stepS, … ≤ toS` (both inclusive, both on
 * the grid). `present` holds the series' point times (ascending, on the grid); points outside
 * [fromS, toS] count as present but not expected. An empty grid (fromS > toS) expects nothing.
 */
export function coverage(present: ArrayLike<number>, fromS: number, toS: number, stepS: number): Coverage {
  const gaps: GapS[] = [];
  if (fromS > toS) return { expectedPoints: 0, presentPoints: present.length, gaps };
  const expectedPoints = Math.floor((toS - fromS) / stepS) + 1;
  let i = 0;
  let gapStart: number | undefined;
  for (let t = fromS; t <= toS; t += stepS) {
    while (i < present.length && present[i] < t) i++;
    const has = i < present.length && present[i] === t;
    if (!has && gapStart === undefined) gapStart = t;
    if (has && gapStart !== undefined) {
      gaps.push({ startTimeUnix: gapStart, endTimeUnix: t - stepS });
      gapStart = undefined;
    }
  }
  if (gapStart !== undefined) gaps.push({ startTimeUnix: gapStart, endTimeUnix: toS });
  return { expectedPoints, presentPoints: present.length, gaps };
}

/**
 * The part of [startS, endS] in which the VM existed, on the step grid: from its creation (or its
 * first point, when samples predate the inventory record) to its deletion. Returns from > to when the
 * VM did not exist in the range.
 */
export function lifetimeWindow(
  startS: number,
  endS: number,
  stepS: number,
  createS: number,
  deleteS: number | undefined,
  firstPointS: number | undefined,
): { fromS: number; toS: number } {
  let born = Math.ceil(createS / stepS) * stepS;
  if (firstPointS !== undefined && firstPointS < born) born = firstPointS;
  const fromS = Math.max(startS, born);
  const toS = deleteS === undefined ? endS : Math.min(endS, Math.floor(deleteS / stepS) * stepS);
  return { fromS, toS };
}

/** True when the newest observation is more than `staleAfterS` before `atS` (or there is none). */
export function isStale(lastObservedS: number | undefined, atS: number, staleAfterS: number): boolean {
  return lastObservedS === undefined || atS - lastObservedS > staleAfterS;
}
