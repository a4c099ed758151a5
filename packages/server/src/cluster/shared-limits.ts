import type { DbHandle } from "../db/database.ts";
import { inProcessRateLimiters, type RateLimiterFactory } from "../iam/ci/ratelimit.ts";
import {
  type ConcurrencyOptions,
  createProjectLimiter,
  type ProjectLimiter,
} from "../metrics/concurrency.ts";
import { createSharedProjectLimiter } from "./project-slots.ts";
import { sharedRateLimiters } from "./shared-buckets.ts";

/** Where the rate limits and the per-project query cap keep their state, and how to let it go. */
export interface Limits {
  /** True when the limits hold across replicas (the control plane is PostgreSQL). */
  readonly shared: boolean;
  readonly rateLimiters: RateLimiterFactory;
  readonly projectLimiter: ProjectLimiter;
  close(): Promise<void>;
}

export interface LimitsDeps {
  readonly db: DbHandle;
  /** The control plane's postgres:// URL; the query slots take a connection of their own on it. */
  readonly databaseUrl: string | undefined;
  readonly now: () => number;
  readonly concurrency?: Partial<ConcurrencyOptions>;
}

/**
 * The limits of this process: shared through the database whenever the control plane is
 * PostgreSQL (the only layout with replicas), in process on SQLite, where there is one process and
 * a take costs no round trip.
 */
export function createLimits(deps: LimitsDeps): Limits {
  if (deps.db.dialect === "postgres" && deps.databaseUrl) {
    const projectLimiter = createSharedProjectLimiter(deps.databaseUrl, deps.concurrency);
    return {
      shared: true,
      rateLimiters: sharedRateLimiters(deps.db.db, deps.now),
      projectLimiter,
      close: () => projectLimiter.close(),
    };
  }
  return {
    shared: false,
    rateLimiters: inProcessRateLimiters(deps.now),
    projectLimiter: createProjectLimiter(deps.concurrency),
    close: async () => {},
  };
}
