import { SvcError } from "../../errors.ts";

/**
 * A family of token buckets by key (the CI exchange per trust, the console sign-in per address…).
 * `take` resolves when the key's bucket had a token and took it, and rejects with resource_exhausted
 * (RATE_LIMITED, Retry-After) when it had none. The in-process {@link TokenBuckets} serve one
 * process; cluster/shared-buckets.ts keeps the buckets in PostgreSQL so they hold across replicas.
 */
export interface RateLimiter {
  take(key: string, what: string): Promise<void>;
  /**
   * Returns the token a take of `key` took, up to the bucket's size: for limits that count only
   * failures (sign-in attempts, iam/sign-in-limits.ts), a take before the attempt and a give-back
   * after a success hold under concurrent attempts, where a check followed by a take would not.
   */
  giveBack(key: string): Promise<void>;
}

/** Size and refill of a family of buckets. */
export interface BucketSpec {
  /** Bucket size: requests allowed at once. */
  readonly burst: number;
  /** Refill rate, requests per minute. */
  readonly perMinute: number;
}

/**
 * Builds the rate limiter of one family; `scope` names the family (e.g. "ci.source") so families
 * sharing a store keep apart.
 */
export type RateLimiterFactory = (scope: string, spec: BucketSpec) => RateLimiter;

/** Seconds until a bucket holding `tokens` (< 1) has one again; 60 when it never refills. */
export function retryAfterSeconds(tokens: number, perMinute: number): number {
  const ratePerMs = perMinute / 60_000;
  return ratePerMs > 0 ? Math.max(1, Math.ceil((1 - tokens) / ratePerMs / 1000)) : 60;
}

/** The refusal of a take, the same whichever store said no. */
export function rateLimited(what: string, waitS: number): SvcError {
  return new SvcError("resource_exhausted", `too many ${what}; retry after ${waitS} s`, {
    reason: "RATE_LIMITED",
    metadata: { retryAfterSeconds: String(waitS) },
    retryAfterSeconds: waitS,
  });
}

/**
 * In-process token buckets by key. Right for one process (the SQLite default); several replicas
 * would each allow the configured rate. Full buckets are forgotten so memory stays bounded by
 * active keys.
 */
export class TokenBuckets implements RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  /**
   * @param burst bucket size (requests allowed at once)
   * @param perMinute refill rate, requests per minute
   * @param maxKeys keys tracked at most; the oldest are dropped beyond it
   */
  constructor(
    private readonly burst: number,
    private readonly perMinute: number,
    private readonly now: () => number,
    private readonly maxKeys = 100_000,
  ) {}

  /** Takes one token or rejects with resource_exhausted (RATE_LIMITED) and the seconds until one is free. */
  async take(key: string, what: string): Promise<void> {
    const now = this.now();
    const ratePerMs = this.perMinute / 60_000;
    const b = this.buckets.get(key) ?? { tokens: this.burst, at: now };
    b.tokens = Math.min(this.burst, b.tokens + (now - b.at) * ratePerMs);
    b.at = now;
    if (b.tokens < 1) throw rateLimited(what, retryAfterSeconds(b.tokens, this.perMinute));
    b.tokens -= 1;
    this.buckets.delete(key);
    this.buckets.set(key, b);
    if (this.buckets.size > this.maxKeys) {
      const oldest = this.buckets.keys().next().value;
      if (oldest !== undefined) this.buckets.delete(oldest);
    }
  }

  async giveBack(key: string): Promise<void> {
    const b = this.buckets.get(key);
    if (!b) return; // forgotten: as full as it can be
    b.tokens = Math.min(this.burst, b.tokens + 1);
  }
}

/** The in-process factory: one {@link TokenBuckets} per family, on the given clock. */
export function inProcessRateLimiters(now: () => number): RateLimiterFactory {
  return (_scope, spec) => new TokenBuckets(spec.burst, spec.perMinute, now);
}
