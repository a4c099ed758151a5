import { createHash } from "node:crypto";
import { sql } from "kysely";
import type { Db } from "../db/database.ts";
import { type RateLimiterFactory, rateLimited, retryAfterSeconds } from "../iam/ci/ratelimit.ts";

export interface SharedBucketsOptions {
  /** How often expired rows (buckets full again) are deleted, ms of `now`. */
  readonly pruneIntervalMs: number;
}

export const defaultSharedBucketsOptions: SharedBucketsOptions = Object.freeze({
  pruneIntervalMs: 60_000, // 1 min
});

/** Refill time standing for "never" when a family does not refill (perMinute 0), ms. */
const NEVER_MS = 1e15;

/** Keys longer than this are stored as their SHA-256 (an index entry stays small whatever is sent). */
const MAX_KEY_CHARS = 200;

function keyOf(rawKey: string): string {
  return rawKey.length > MAX_KEY_CHARS
    ? `sha256:${createHash("sha256").update(rawKey).digest("hex")}`
    : rawKey;
}

/**
 * Token buckets in the control-plane database (table rate_buckets), so a limit holds across every
 * replica on it. A take is one statement: an upsert that refills the row by the time since its
 * last take and takes a token only when one is there (ON CONFLICT … DO UPDATE … WHERE), returning
 * the row when it took. Concurrent takes of one key queue on its row lock, so a burst of N allows
 * exactly N however the calls spread over replicas. A refusal reads the row once more to say when
 * to come back. Rows of buckets that are full again are pruned every pruneIntervalMs.
 *
 * Replicas refill by their own clocks; a clock behind the row's last take refills nothing rather
 * than going back in time, so skew between replicas can only make the limit stricter.
 */
export function sharedRateLimiters(
  db: Db,
  now: () => number,
  overrides: Partial<SharedBucketsOptions> = {},
): RateLimiterFactory {
  const o = Object.freeze({ ...defaultSharedBucketsOptions, ...overrides });
  let lastPrune = Number.NEGATIVE_INFINITY;
  const prune = async (nowMs: number) => {
    if (nowMs - lastPrune < o.pruneIntervalMs) return;
    lastPrune = nowMs;
    await db.deleteFrom("rate_buckets").where("full_time", "<=", nowMs).execute();
  };

  return (scope, spec) => {
    const { burst, perMinute } = spec;
    const ratePerMs = perMinute / 60_000;
    const msPerToken = ratePerMs > 0 ? 1 / ratePerMs : NEVER_MS;
    return {
      async take(rawKey, what) {
        const nowMs = now();
        if (burst < 1) throw rateLimited(what, retryAfterSeconds(0, perMinute));
        const key = keyOf(rawKey);
        // Typed parameters: PostgreSQL would otherwise infer bigint for the rate from `at`.
        const t = sql<number>`cast(${nowMs} as bigint)`;
        const rate = sql<number>`cast(${ratePerMs} as double precision)`;
        const size = sql<number>`cast(${burst} as double precision)`;
        const grown = sql<number>`rate_buckets.tokens + (case when ${t} > rate_buckets.at then ${t} - rate_buckets.at else 0 end) * ${rate}`;
        const refilled = sql<number>`(case when ${grown} >= ${size} then ${size} else ${grown} end)`;
        const took = await db
          .insertInto("rate_buckets")
          .values({ scope, key, tokens: burst - 1, at: nowMs, full_time: nowMs + msPerToken })
          .onConflict((oc) =>
            oc
              .columns(["scope", "key"])
              .doUpdateSet({
                tokens: sql<number>`${refilled} - 1`,
                at: sql<number>`case when ${t} > rate_buckets.at then ${t} else rate_buckets.at end`,
                full_time: sql<number>`${t} + (${size} - ${refilled} + 1) * cast(${msPerToken} as double precision)`,
              })
              .where(sql<boolean>`${refilled} >= 1`),
          )
          .returning("tokens")
          .executeTakeFirst();
        await prune(nowMs);
        if (took) return;
        const row = await db
          .selectFrom("rate_buckets")
          .select(["tokens", "at"])
          .where("scope", "=", scope)
          .where("key", "=", key)
          .executeTakeFirst();
        const tokens = row ? Math.min(burst, row.tokens + Math.max(0, nowMs - row.at) * ratePerMs) : 0;
        throw rateLimited(what, retryAfterSeconds(tokens, perMinute));
      },
      async giveBack(rawKey) {
        const key = keyOf(rawKey);
        const size = sql<number>`cast(${burst} as double precision)`;
        // One token back, never beyond the bucket's size; the bucket is full one token sooner.
        await db
          .updateTable("rate_buckets")
          .set({
            tokens: sql<number>`case when tokens + 1 > ${size} then ${size} else tokens + 1 end`,
            full_time: sql<number>`full_time - cast(${msPerToken} as double precision)`,
          })
          .where("scope", "=", scope)
          .where("key", "=", key)
          .execute();
      },
    };
  };
}
