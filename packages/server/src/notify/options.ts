/** The notifications domain's settings, units beside the numbers; resolveNotifyOptions checks them once. */
export interface NotifyOptions {
  /** Destinations per project (in-app not counted). */
  readonly maxDestinationsPerProject: number;
  /** Silences per project that have not expired (pending or active); expired ones are history. */
  readonly maxSilencesPerProject: number;
  /** Host names / IPs allowed although special (loopback, private): tests and the demo. Empty by default. */
  readonly allowHosts: readonly string[];
  /** Retry delays after failed attempts, ms (jitter ±20 % is added). */
  readonly retryDelaysMs: readonly number[];
  /** A message is not sent after this long, ms (retries for up to 24 h: docs/notifications.md#retries). */
  readonly messageTtlMs: number;
  /** At least this long after a 429, ms (longer when Retry-After says so). */
  readonly minRetryAfter429Ms: number;
  /** One attempt's request timeout, ms. */
  readonly requestTimeoutMs: number;
  /** A claimed delivery is retried by another pass after this, ms (a crashed attempt). */
  readonly leaseMs: number;
  /** Dispatcher poll interval, ms. */
  readonly pollIntervalMs: number;
  /** Deliveries attempted at once (one at a time per destination). */
  readonly concurrency: number;
  /** Delivery history kept, ms. */
  readonly historyRetentionMs: number;
  /** Email verification codes expire after, ms. */
  readonly verificationTtlMs: number;
  /** Sender address of emails. */
  readonly emailFrom: string;
}

export const defaultNotifyOptions: NotifyOptions = {
  maxDestinationsPerProject: 5,
  maxSilencesPerProject: 100,
  allowHosts: [],
  retryDelaysMs: [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000],
  messageTtlMs: 86_400_000,
  minRetryAfter429Ms: 60_000,
  requestTimeoutMs: 10_000,
  // Under a cycle (30 s): a crashed replica's claims are free again within one (issue 48).
  leaseMs: 25_000,
  pollIntervalMs: 1_000,
  concurrency: 16,
  historyRetentionMs: 90 * 86_400_000,
  verificationTtlMs: 86_400_000,
  emailFrom: "svc alerts <alerts@svc.invalid>",
};

export function resolveNotifyOptions(o: Partial<NotifyOptions> = {}): NotifyOptions {
  const r = { ...defaultNotifyOptions, ...o };
  for (const k of [
    "maxDestinationsPerProject",
    "maxSilencesPerProject",
    "messageTtlMs",
    "minRetryAfter429Ms",
    "requestTimeoutMs",
    "leaseMs",
    "pollIntervalMs",
    "concurrency",
    "historyRetentionMs",
    "verificationTtlMs",
  ] as const) {
    if (!Number.isSafeInteger(r[k]) || r[k] <= 0)
      throw new Error(`notify option ${k} must be a positive integer`);
  }
  // No attempt starts in a claim's second half (dispatcher.ts), so one ends while the lease holds.
  if (r.requestTimeoutMs * 2 > r.leaseMs)
    throw new Error(
      `notify option leaseMs (${r.leaseMs} ms) must be at least twice requestTimeoutMs (${r.requestTimeoutMs} ms)`,
    );
  if (r.retryDelaysMs.length === 0) throw new Error("notify option retryDelaysMs must not be empty");
  return Object.freeze(r);
}
