/** Limits of the Prometheus-compatible query API: defaults in one place, validated once. */

export interface PromApiOptions {
  /** Longest accepted expression (also each `match[]`), UTF-8 bytes. */
  readonly maxExpressionBytes: number;
  /** Most points a range query may return per series ((end − start) / step + 1). */
  readonly maxPointsPerSeries: number;
  /** Largest JSON response body, bytes; past it the answer is 422 `execution`. */
  readonly maxResponseBytes: number;
  /** Longest evaluation, ms; a smaller `timeout` parameter shortens it, a larger one cannot extend it. */
  readonly timeoutMs: number;
  /** Data older than now − retention does not exist; ranges are clamped to it. Milliseconds. */
  readonly retentionMs: number;
  /** Version reported by `status/buildinfo` (the Prometheus API level the surface follows). */
  readonly version: string;
}

export const defaultPromApiOptions: PromApiOptions = Object.freeze({
  maxExpressionBytes: 16 * 1024, // 16 KiB
  maxPointsPerSeries: 10_000, // points
  maxResponseBytes: 4 * 1024 * 1024, // 4 MiB
  timeoutMs: 10_000, // 10 s
  retentionMs: 7 * 24 * 3_600_000, // 7 days
  version: "3.5.0",
});

/** Merges overrides onto the defaults, validates, freezes. Throws RangeError on a bad value. */
export function resolvePromApiOptions(overrides: Partial<PromApiOptions> = {}): PromApiOptions {
  const defined = Object.fromEntries(Object.entries(overrides).filter(([, v]) => v !== undefined));
  const o = { ...defaultPromApiOptions, ...defined } as PromApiOptions;
  for (const k of [
    "maxExpressionBytes",
    "maxPointsPerSeries",
    "maxResponseBytes",
    "timeoutMs",
    "retentionMs",
  ] as const) {
    const v = o[k];
    if (!Number.isSafeInteger(v) || v <= 0)
      throw new RangeError(`promapi option ${k} must be a positive integer, got ${v}`);
  }
  if (!/^\d+\.\d+\.\d+/.test(o.version))
    throw new RangeError(`promapi option version must be semver, got ${o.version}`);
  return Object.freeze(o);
}
