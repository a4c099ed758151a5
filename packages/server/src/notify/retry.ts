import type { NotifyOptions } from "./options.ts";

/** What a failed attempt tells the schedule. */
export interface FailedAttempt {
  /** Attempts made so far, this one included (1 after the first). */
  readonly attempts: number;
  /** The HTTP status, 0 when there was none (a connection error, SMTP). */
  readonly code: number;
  /** The receiver's Retry-After, ms, when it sent one (used after a 429 only). */
  readonly retryAfterMs?: number;
  /** This attempt's time, ms. */
  readonly atMs: number;
  /** The message's expiry, ms: no attempt after it. */
  readonly expireTime: number;
}

/**
 * The retry schedule after a failed attempt (docs/notifications.md#retries): the attempts-th delay of
 * retryDelaysMs (the last one once past the end) spread by ±20 % (`random` in [0, 1): 0.5 is the delay
 * itself); after a 429 at least minRetryAfter429Ms and the receiver's Retry-After. Gives up (`giveUp`)
 * when the schedule is spent or the next attempt would come after the message expired. Pure.
 */
export function nextAttempt(
  f: FailedAttempt,
  options: Pick<NotifyOptions, "retryDelaysMs" | "minRetryAfter429Ms">,
  random: number,
): { next: number; giveUp: boolean } {
  const delays = options.retryDelaysMs;
  const base = delays[Math.min(f.attempts - 1, delays.length - 1)];
  const jitter = 1 + (random * 0.4 - 0.2);
  let delay = Math.round(base * jitter);
  if (f.code === 429) delay = Math.max(options.minRetryAfter429Ms, f.retryAfterMs ?? 0, delay);
  const next = f.atMs + delay;
  return { next, giveUp: f.attempts > delays.length || next > f.expireTime };
}
