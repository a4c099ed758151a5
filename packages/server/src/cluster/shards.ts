import type { Db } from "../db/database.ts";
import { holdLease } from "./lease.ts";

/**
 * Alert evaluation shared across replicas (issue 33): projects are hashed into `count` shards, each
 * evaluated by the replica holding its lease (`alert-evaluator/shard/<i>` in the leases table). Every
 * replica also holds a membership lease (`alert-evaluator/member/<holder>`); with M live members each
 * aims at ⌈count / M⌉ shards: it gives up what it holds beyond that (a replica joined) and takes free
 * or expired shards up to it (a replica left or died), preferring the shards that rank highest for it
 * (rendezvous hashing), so replicas rarely compete for the same shard.
 *
 * Leases last two cycles and are renewed at every tick and by every batch's write (the fence), so a
 * replica that dies has its shards taken over within three cycles, and one whose cycle outlives its
 * lease writes nothing more: the fence runs inside the batch's transaction and fails once another
 * holder has the row, and under PostgreSQL the taker's conditional UPDATE waits for that transaction.
 */
export interface ShardLeases {
  readonly count: number;
  /** Renews this replica's membership and share, rebalances it, and returns the shards it holds. */
  acquire(nowMs: number): Promise<ReadonlySet<number>>;
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
  /** The evaluation cycle, ms: leases last two of them. */
  readonly intervalMs: number;
  readonly count?: number;
}

export function createShardLeases(o: ShardLeaseOptions): ShardLeases {
  const count = o.count ?? DEFAULT_SHARDS;
  if (!Number.isSafeInteger(count) || count < 1 || count > 1024)
    throw new Error("evaluator shards must be an integer from 1 to 1024");
  const ttlMs = 2 * o.intervalMs;
  const { db, holder } = o;
  const rank = (shard: number) => fnv1a(`${holder}/${shard}`);
  return {
    count,
    async acquire(nowMs) {
      await holdLease(db, `${MEMBER}${holder}`, holder, nowMs, ttlMs);
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
      const mine = [...taken]
        .filter(([, r]) => r.holder === holder)
        .map(([s]) => s)
        .sort((a, b) => rank(b) - rank(a));
      const held = new Set<number>();
      for (const [i, s] of mine.entries()) {
        if (i >= target) {
          await db
            .deleteFrom("leases")
            .where("name", "=", shardLeaseName(s))
            .where("holder", "=", holder)
            .execute();
        } else if (await holdLease(db, shardLeaseName(s), holder, nowMs, ttlMs)) held.add(s);
      }
      if (held.size < target) {
        const free = Array.from({ length: count }, (_, s) => s)
          .filter((s) => {
            const r = taken.get(s);
            return !r || (r.holder !== holder && r.expire_time <= nowMs);
          })
          .sort((a, b) => rank(b) - rank(a));
        for (const s of free) {
          if (held.size >= target) break;
          if (await holdLease(db, shardLeaseName(s), holder, nowMs, ttlMs)) held.add(s);
        }
      }
      return held;
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
