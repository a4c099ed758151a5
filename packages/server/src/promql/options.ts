/** Engine options: defaults in one place, validated once by `resolveEngineOptions`. */

export interface EngineOptions {
  /** How far back an instant selector looks for the latest sample, ms (Prometheus: 5 min). */
  readonly lookbackDeltaMs: number;
  /** Maximum points per series a range query may return ((end - start) / step + 1). */
  readonly maxPointsPerSeries: number;
  /** Maximum samples the evaluation may hold at once (selected samples plus step values). */
  readonly maxSamples: number;
  /** Evaluation deadline, ms; checked cooperatively while evaluating. 0 disables. */
  readonly timeoutMs: number;
  /** Resolution of subqueries written without a step (`x[5m:]`), ms (Prometheus: the global evaluation interval). */
  readonly defaultSubqueryStepMs: number;
  /** Clock, ms since epoch; injectable for tests. */
  readonly now: () => number;
}

export const defaultEngineOptions: EngineOptions = Object.freeze({
  lookbackDeltaMs: 5 * 60_000,
  maxPointsPerSeries: 10_000,
  maxSamples: 50_000_000,
  timeoutMs: 10_000,
  defaultSubqueryStepMs: 60_000,
  now: () => Date.now(),
});

/** Merges overrides onto the defaults, validates, freezes. Throws RangeError on a bad value. */
export function resolveEngineOptions(overrides: Partial<EngineOptions> = {}): EngineOptions {
  const o = { ...defaultEngineOptions, ...overrides };
  const positive = (name: keyof EngineOptions, allowZero = false) => {
    const v = o[name] as number;
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0 || (!allowZero && v === 0)) {
      throw new RangeError(
        `engine option ${name} must be a ${allowZero ? "non-negative" : "positive"} number, got ${v}`,
      );
    }
  };
  positive("lookbackDeltaMs");
  positive("maxPointsPerSeries");
  positive("maxSamples");
  positive("timeoutMs", true);
  positive("defaultSubqueryStepMs");
  if (typeof o.now !== "function") throw new RangeError("engine option now must be a function");
  return Object.freeze(o);
}

/** Per-query options. */
export interface QueryOptions {
  /** Overrides the engine's lookback for this query, ms. */
  readonly lookbackDeltaMs?: number;
  /** Aborts evaluation (checked cooperatively); a fired signal throws QueryTimeoutError. */
  readonly signal?: AbortSignal;
  /** Overrides the engine's timeout for this query, ms (0 disables). */
  readonly timeoutMs?: number;
  /**
   * false: the query's CPU is not charged to its project's usage (the operator's own reads of
   * usage, metrics/usage.ts); default: charged.
   */
  readonly charge?: boolean;
}
