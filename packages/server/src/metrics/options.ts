/**
 * Options of the VM metrics services (QueryVMMonitoring, ListVMMonitoring, discovery and export), with
 * defaults in one place and the unit beside each number. `resolveMetricsOptions` validates once.
 */
export interface MetricsOptions {
  /** Source sampling interval, ms (30 s: docs/api.md#queryvmmonitoring). Staleness and step minimums derive from it. */
  readonly samplingIntervalMs: number;
  /** Hosted retention, ms; query bounds are clamped to it. */
  readonly retentionMs: number;
  /** Smallest accepted step, seconds. */
  readonly minStepSeconds: number;
  /** Most points per series one query may return ((end − start) / step + 1). */
  readonly maxPointsPerSeries: number;
  /** Deadline of one QueryVMMonitoring call, ms, shared by all its metrics. */
  readonly queryTimeoutMs: number;
  /** A series is stale when its newest sample is more than this many sampling intervals before the end. */
  readonly staleAfterIntervals: number;
  /** How far back ListVMMonitoring and quality look for the newest samples, ms. */
  readonly latestLookbackMs: number;
  /** A latest CPU / memory value older than this is not shown in ListVMMonitoring, ms. */
  readonly latestValueMaxAgeMs: number;
  /** Export shards per project; fixed so discovery does not change as VMs come and go. */
  readonly exportShards: number;
  /** Export serves the newest sample of each series within this window, ms. */
  readonly exportWindowMs: number;
}

export const defaultMetricsOptions: MetricsOptions = Object.freeze({
  samplingIntervalMs: 30_000, // 30 s
  retentionMs: 7 * 24 * 3_600_000, // 7 days
  minStepSeconds: 30, // s
  maxPointsPerSeries: 10_000, // points
  queryTimeoutMs: 10_000, // 10 s
  staleAfterIntervals: 3, // intervals (90 s)
  latestLookbackMs: 3_600_000, // 1 h
  latestValueMaxAgeMs: 5 * 60_000, // 5 min
  exportShards: 4, // shards
  exportWindowMs: 5 * 60_000, // 5 min
});

export function resolveMetricsOptions(overrides: Partial<MetricsOptions> = {}): MetricsOptions {
  const o = { ...defaultMetricsOptions, ...overrides };
  for (const [k, v] of Object.entries(o)) {
    if (typeof v !== "number" || !Number.isFinite(v) || v <= 0)
      throw new RangeError(`metrics option ${k} must be a positive number, got ${v}`);
  }
  if (!Number.isInteger(o.exportShards) || o.exportShards > 256)
    throw new RangeError("metrics option exportShards must be an integer 1..256");
  if (o.minStepSeconds * 1000 < o.samplingIntervalMs)
    throw new RangeError("metrics option minStepSeconds is below the sampling interval");
  return Object.freeze(o);
}
