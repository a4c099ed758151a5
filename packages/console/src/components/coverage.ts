import type { SeriesQuality } from "@gen/svc/monitoring/v1/monitoring_pb.ts";
import { fmtDuration } from "../format.ts";

/**
 * Coverage, defined once (issue 43, item 1; docs/console.md#one-number-one-meaning): of the range's steps
 * while the VM existed (the API's `quality.series[].expectedPoints`), how many have a sample. A step of a
 * view with several series counts only when every series has a sample in it (the union of their
 * `gaps[]` is missing). Steps before the VM existed are not missing: they are said apart. The VM page's
 * data-quality card and each chart's caption print this one statement; nothing else counts steps.
 */
export interface Coverage {
  /** Steps of the range while the VM existed. */
  expected: number;
  /** Of those, steps with a sample (in every series of the view). */
  present: number;
  /** Runs of missing steps, and the longest run (seconds, drawn width). */
  gaps: { start: number; end: number }[];
  longestSeconds: number;
  /** Steps of the whole range [start, end], existence or not. */
  rangeSteps: number;
  stepSeconds: number;
}

export function coverageOf(
  quality: readonly SeriesQuality[],
  start: number,
  end: number,
  stepSeconds: number,
): Coverage | undefined {
  if (quality.length === 0) return undefined;
  const expected = quality.reduce((m, s) => Math.max(m, s.expectedPoints), 0);
  const missing = new Set<number>();
  for (const s of quality)
    for (const g of s.gaps)
      for (let t = Number(g.startTimeUnix); t <= Number(g.endTimeUnix); t += stepSeconds) missing.add(t);
  // Runs of consecutive missing steps: the shaded gaps.
  const sorted = [...missing].sort((a, b) => a - b);
  const gaps: { start: number; end: number }[] = [];
  for (const t of sorted) {
    const last = gaps[gaps.length - 1];
    if (last && t - last.end === stepSeconds) last.end = t;
    else gaps.push({ start: t, end: t });
  }
  const longestSeconds = gaps.reduce((m, g) => Math.max(m, g.end - g.start + stepSeconds), 0);
  return {
    expected,
    present: Math.max(0, expected - missing.size),
    gaps,
    longestSeconds,
    rangeSteps: Math.floor((end - start) / stepSeconds) + 1,
    stepSeconds,
  };
}

/** "30-min", "2-min", "30 s": a step's length as it qualifies a figure ("max of 30-min averages"). */
export function stepName(stepSeconds: number): string {
  if (stepSeconds < 60) return `${stepSeconds}-s`;
  if (stepSeconds < 3600) return `${stepSeconds / 60}-min`;
  return `${stepSeconds / 3600}-h`;
}

/** The one coverage statement, e.g. "48 of 48 steps (30 min each) have a sample · no gaps". */
export function coverageText(c: Coverage): string {
  const each = c.stepSeconds < 60 ? `${c.stepSeconds} s` : fmtDuration(c.stepSeconds);
  const parts = [`${c.present} of ${c.expected} steps (${each} each) have a sample`];
  parts.push(
    c.gaps.length === 0
      ? "no gaps"
      : `${c.gaps.length} gap${c.gaps.length === 1 ? "" : "s"} (shaded), longest ${fmtDuration(c.longestSeconds)}`,
  );
  const before = c.rangeSteps - c.expected;
  if (before > 0)
    parts.push(`${before} more step${before === 1 ? " is" : "s are"} from when the VM did not exist`);
  return parts.join(" · ");
}
