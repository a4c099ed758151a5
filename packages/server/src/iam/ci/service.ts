import type { Db } from "../../db/database.ts";
import type { TokenResolver } from "../principal.ts";
import { ciTokenResolver, type ExchangedToken, exchange } from "./exchange.ts";
import { JwksCache } from "./jwks.ts";
import { type CiOptions, resolveCiOptions } from "./options.ts";
import { inProcessRateLimiters, type RateLimiter, type RateLimiterFactory } from "./ratelimit.ts";
import * as trusts from "./trusts.ts";

export interface CiAutomationDeps {
  readonly db: Db;
  readonly now: () => number;
  readonly options?: Partial<CiOptions>;
  /** For tests; defaults to global fetch. */
  readonly fetch?: typeof globalThis.fetch;
  /** Where the rate limits keep their buckets; in this process by default (cluster/shared-limits.ts). */
  readonly rateLimiters?: RateLimiterFactory;
}

/**
 * The CI trust component: management, verification and exchange over one JWKS cache and one set of
 * rate limits. The unauthenticated operations (verify, exchange) are limited per trust or setup and
 * per source address.
 */
export class CiAutomation {
  readonly options: CiOptions;
  readonly resolver: TokenResolver = ciTokenResolver;
  private readonly ctx: trusts.CiContext;
  private readonly perTarget: RateLimiter;
  private readonly perSource: RateLimiter;

  constructor(deps: CiAutomationDeps) {
    this.options = resolveCiOptions(deps.options);
    const o = this.options;
    const jwks = new JwksCache({
      cooldownMs: o.jwksCooldownMs,
      maxAgeMs: o.jwksMaxAgeMs,
      fetchTimeoutMs: o.fetchTimeoutMs,
      now: deps.now,
      fetch: deps.fetch,
    });
    this.ctx = { db: deps.db, now: deps.now, options: o, jwks };
    const buckets = deps.rateLimiters ?? inProcessRateLimiters(deps.now);
    this.perTarget = buckets("ci.target", { burst: o.perTrustBurst, perMinute: o.perTrustPerMinute });
    this.perSource = buckets("ci.source", { burst: o.perSourceBurst, perMinute: o.perSourcePerMinute });
  }

  startSetup(userId: string, input: trusts.StartSetupInput): Promise<trusts.StartedSetup> {
    return trusts.startSetup(this.ctx, userId, input);
  }

  /** @param source the caller's address, for the per-source limit */
  async verifySetup(
    input: { setupId: string; pairingCode: string; assertion: string },
    source: string,
  ): Promise<{ trust: trusts.CiTrustView }> {
    await this.perSource.take(source, "CI requests from this address");
    await this.perTarget.take(`setup:${input.setupId}`, "verification attempts for this setup");
    return trusts.verifySetup(this.ctx, input);
  }

  async exchange(input: { trustName: string; assertion: string }, source: string): Promise<ExchangedToken> {
    await this.perSource.take(source, "CI requests from this address");
    await this.perTarget.take(`trust:${input.trustName}`, "exchanges for this trust");
    return exchange(this.ctx, input);
  }

  approve(
    userId: string,
    input: { name: string; permissions: readonly string[] },
  ): Promise<trusts.CiTrustView> {
    return trusts.approveTrust(this.ctx, userId, input);
  }

  updatePermissions(
    userId: string,
    input: { name: string; permissions: readonly string[] },
  ): Promise<trusts.CiTrustView> {
    return trusts.updatePermissions(this.ctx, userId, input);
  }

  disable(userId: string, name: string): Promise<trusts.CiTrustView> {
    return trusts.disableTrust(this.ctx, userId, name);
  }

  delete(userId: string, name: string): Promise<void> {
    return trusts.deleteTrust(this.ctx, userId, name);
  }

  get(userId: string, name: string): Promise<trusts.CiTrustView> {
    return trusts.getTrust(this.ctx, userId, name);
  }

  list(userId: string, parent: string): Promise<trusts.CiTrustView[]> {
    return trusts.listTrusts(this.ctx, userId, parent);
  }
}
