/** The alerts domain's settings, with the unit beside each number; resolveAlertOptions checks them once. */
export interface AlertOptions {
  /** Evaluation cycle, ms. */
  readonly evaluationIntervalMs: number;
  /** Sampling interval of the sources, ms (expected samples per window). */
  readonly samplingIntervalMs: number;
  /**
   * Largest gap between samples that still counts as covered, and how old the newest sample may be
   * for an evaluation to have data, ms (three sampling intervals: the "stale" rule of docs/api.md#queryvmmonitoring).
   */
  readonly maxGapMs: number;
  /** Rules per project (deleted rules do not count). */
  readonly maxRulesPerProject: number;
  /** Evaluated instances per project, over all enabled rules. */
  readonly maxInstancesPerProject: number;
  /** Longest PreviewAlertRule history, s. */
  readonly maxPreviewHistorySeconds: number;
  /** Longest sustainedSeconds, s. */
  readonly maxSustainedSeconds: number;
  /** Resolved and retired incidents, their events and deleted rules are purged after this, ms. */
  readonly historyRetentionMs: number;
  /** Metrics retention, ms (preview history older than this is CUT_BY_RETENTION). */
  readonly metricsRetentionMs: number;
  /** Deadline of one rule's store read, ms. */
  readonly queryTimeoutMs: number;
}

export const defaultAlertOptions: AlertOptions = {
  evaluationIntervalMs: 30_000,
  samplingIntervalMs: 30_000,
  maxGapMs: 90_000,
  maxRulesPerProject: 20,
  maxInstancesPerProject: 10_000,
  maxPreviewHistorySeconds: 86_400,
  maxSustainedSeconds: 86_400,
  historyRetentionMs: 90 * 86_400_000,
  metricsRetentionMs: 7 * 86_400_000,
  queryTimeoutMs: 10_000,
};

export function resolveAlertOptions(overrides: Partial<AlertOptions> = {}): AlertOptions {
  const o = { ...defaultAlertOptions, ...overrides };
  for (const [k, v] of Object.entries(o)) {
    if (!Number.isSafeInteger(v) || v <= 0) throw new Error(`alerts option ${k} must be a positive integer`);
  }
  if (o.maxGapMs < o.samplingIntervalMs)
    throw new Error("alerts option maxGapMs must be ≥ samplingIntervalMs");
  return Object.freeze(o);
}
