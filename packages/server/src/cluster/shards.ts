import type { Db } from "../db/database.ts";
import { holdLease } from "./lease.ts";

/**
 * Alert evaluation shared across replicas (issue 33): projects are hashed into `count` shards, each
 * evaluated by the replica holding its lease (`alert-evaluator/shard/<i>` in the leases table). Every
 * replica also holds a membership lease (`alert-evaluator/member/<holder>`); with M live members each
 * aims at ⌈count / M⌉ shards: it takes free or expired shards up to it (a replica left or died) and,
 * when asked to (`shed`, right after a cycle evaluated them), gives up what it holds beyond it (a
 * replica joined), preferring the shards that rank highest for it (rendezvous hashing), so replicas
 * rarely compete for the same shard.
 *
 * Leases last two thirds of a cycle and are renewed every sixth of one (`renewIntervalMs`, issue 48),
 * and by every batch's write (the fence), so a replica that dies has its shards taken over within
 * ttl + one renewal (25 s of a 30 s cycle), less than a cycle; one whose cycle outlives its lease
 * writes nothing more: the fence runs inside the batch's transaction and fails once another holder has
 * the row, and under PostgreSQL the taker's conditional UPDATE waits for that transaction.
 */
export interface ShardLeases {
  readonly count: number;
  /** How often a replica renews its leases and looks for free shards, ms (a sixth of the cycle). */
  readonly renewIntervalMs: number;
  /**
   * Renews this replica's membership and shards, takes free or expired shards up to its share, and
   * with `shed` gives back what it holds beyond it; returns the shards it holds.
   */
  acquire(nowMs: number, opts?: { shed?: boolean }): Promise<ReadonlySet<number>>;
  /** What the last acquire saw: shards this replica holds, shards with no live lease after it. */
  readonly status: { readonly held: number; readonly unowned: number | undefined };
  /** Inside a batch's transaction: renews the shard's lease if this replica still holds it; false if not. */
  fence(tx: Db, shard: number, nowMs: number): Promise<boolean>;
  /** Gives every lease up (a clean shutdown), so the others need not wait for them to expire. */
  release(): Promise<void>;
}

// Divisible by 1–6, so up to six replicas split the shards evenly.
export const DEFAULT_SHARDS = 60;
const PREFIX = "alert-evaluator/";
const MEMBER = `${PREFIX}member/`;
const SHARD = `${PREFIX}shard/`;

export const shardLeaseName = (shard: number) => `${SHARD}${shard}`;

/** FNV-1a (32 bit) of a string. */
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** The shard of a project: stable across replicas and restarts for one shard count. */
export function shardOf(projectId: string, count: number): number {
  return fnv1a(projectId) % count;
}

export interface ShardLeaseOptions {
  readonly db: Db;
  /** This replica (cluster/lease.ts processHolderId). */
  readonly holder: string;
  /** The evaluation cycle, ms: leases last two thirds of it, renewed every sixth. */
  readonly intervalMs: number;
  readonly count?: number;
}

export function createShardLeases(o: ShardLeaseOptions): ShardLeases {
  const count = o.count ?? DEFAULT_SHARDS;
  if (!Number.isSafeInteger(count) || count < 1 || count > 1024)
    throw new Error("evaluator shards must be an integer from 1 to 1024");
  const ttlMs = Math.round((2 * o.intervalMs) / 3);
  const renewIntervalMs = Math.max(1, Math.round(o.intervalMs / 6));
  const { db, holder } = o;
  const rank = (shard: number) => fnv1a(`${holder}/${shard}`);
  const status = { held: 0, unowned: undefined as number | undefined };
  /**
   * acquire runs one at a time (the timer's, the keeper's and an apply's may overlap), so one round's
   * renewal never reads the leases halfway through another round's takes.
   */
  let acquiring: Promise<unknown> = Promise.resolve();
  async function acquireOnce(nowMs: number, opts?: { shed?: boolean }): Promise<ReadonlySet<number>> {
    await holdLease(db, `${MEMBER}${holder}`, holder, nowMs, ttlMs);
    // Every shard lease this replica still holds, renewed in one statement.
    const renewed = await db
      .updateTable("leases")
      .set({ expire_time: nowMs + ttlMs })
      .where("holder", "=", holder)
      .where("name", "like", `${SHARD}%`)
      .where("expire_time", ">", nowMs)
      .returning("name")
      .execute();
    const rows = await db
      .selectFrom("leases")
      .select(["name", "holder", "expire_time"])
      .where("name", "like", `${PREFIX}%`)
      .execute();
    const members = rows.filter((r) => r.name.startsWith(MEMBER) && r.expire_time > nowMs).length;
    const target = Math.ceil(count / Math.max(1, members));
    const taken = new Map<number, { holder: string; expire_time: number }>();
    for (const r of rows) if (r.name.startsWith(SHARD)) taken.set(Number(r.name.slice(SHARD.length)), r);
    // What this replica holds, its best-ranked first; beyond the target goes back (a replica joined).
    const mine = renewed
      .map((r) => Number(r.name.slice(SHARD.length)))
      .filter((s) => taken.get(s)?.holder === holder)
      .sort((a, b) => rank(b) - rank(a));
    const held = new Set<number>();
    /** Free shards another replica took first. */
    const lost = new Set<number>();
    for (const [i, s] of mine.entries()) {
      if (i < target || !opts?.shed) held.add(s);
      else
        await db
          .deleteFrom("leases")
          .where("name", "=", shardLeaseName(s))
          .where("holder", "=", holder)
          .execute();
    }
    if (held.size < target) {
      const free = Array.from({ length: count }, (_, s) => s)
        .filter((s) => {
          const r = taken.get(s);
          return !held.has(s) && (!r || r.expire_time <= nowMs);
        })
        .sort((a, b) => rank(b) - rank(a));
      for (const s of free) {
        if (held.size >= target) break;
        if (await holdLease(db, shardLeaseName(s), holder, nowMs, ttlMs)) held.add(s);
        else lost.add(s);
      }
    }
    // Unowned after this round: no live lease, neither ours nor another's (a lost race counts as owned).
    let unowned = 0;
    for (let s = 0; s < count; s++) {
      const r = taken.get(s);
      if (held.has(s) || lost.has(s)) continue;
      if (!r || r.expire_time <= nowMs || r.holder === holder) unowned++;
    }
    status.held = held.size;
    status.unowned = unowned;
    return held;
  }
  return {
    count,
    renewIntervalMs,
    status,
    acquire(nowMs, opts) {
      const run = acquiring.then(() => acquireOnce(nowMs, opts));
      acquiring = run.catch(() => {});
      return run;
    },
    async fence(tx, shard, nowMs) {
      const r = await tx
        .updateTable("leases")
        .set({ expire_time: nowMs + ttlMs })
        .where("name", "=", shardLeaseName(shard))
        .where("holder", "=", holder)
        .executeTakeFirst();
      return Number(r.numUpdatedRows) > 0;
    },
    async release() {
      await db
        .deleteFrom("leases")
        .where("holder", "=", holder)
        .where("name", "like", `${PREFIX}%`)
        .execute();
    },
  };
}
