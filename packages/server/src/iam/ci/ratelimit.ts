import { SvcError } from "../../errors.ts";

/**
 * In-process token buckets by key. Good enough for one API replica; several replicas each allow the
 * configured rate. Full buckets are forgotten so memory stays bounded by active keys.
 */
export class TokenBuckets {
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

  /** Takes one token or throws resource_exhausted (RATE_LIMITED) with the seconds until one is free. */
  take(key: string, what: string): void {
    const now = this.now();
    const ratePerMs = this.perMinute / 60_000;
    const b = this.buckets.get(key) ?? { tokens: this.burst, at: now };
    b.tokens = Math.min(this.burst, b.tokens + (now - b.at) * ratePerMs);
    b.at = now;
    if (b.tokens < 1) {
      const waitS = ratePerMs > 0 ? Math.max(1, Math.ceil((1 - b.tokens) / ratePerMs / 1000)) : 60;
      throw new SvcError("resource_exhausted", `too many ${what}; retry after ${waitS} s`, {
        reason: "RATE_LIMITED",
        metadata: { retryAfterSeconds: String(waitS) },
        retryAfterSeconds: waitS,
      });
    }
    b.tokens -= 1;
    this.buckets.delete(key);
    this.buckets.set(key, b);
    if (this.buckets.size > this.maxKeys) {
      const oldest = this.buckets.keys().next().value;
      if (oldest !== undefined) this.buckets.delete(oldest);
    }
  }
}
