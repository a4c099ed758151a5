import { type Kysely, PostgresAdapter, sql } from "kysely";

/**
 * Token buckets shared by replicas (cluster/shared-buckets.ts): one row per family and key, the
 * tokens left at `at` (ms). `full_time` is when the bucket is full again; rows past it say nothing
 * a missing row would not, so they are pruned through its index and the table stays bounded by the
 * keys active within one refill.
 *
 * On PostgreSQL the table is UNLOGGED: a take writes no WAL and waits for no flush (about 0.1 ms a
 * take instead of 0.5 ms here, docs/decisions.md). A crash of the server empties it and a standby
 * does not have it, which leaves every bucket full: one extra burst per key, never a refusal.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  // Kysely hands a migration no dialect; the adapter tells PostgreSQL from SQLite.
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  await db.schema
    .createTable("rate_buckets")
    .$call((t) => (postgres ? t.modifyFront(sql`unlogged`) : t))
    .addColumn("scope", "text", (c) => c.notNull())
    .addColumn("key", "text", (c) => c.notNull())
    .addColumn("tokens", "double precision", (c) => c.notNull())
    .addColumn("at", "bigint", (c) => c.notNull())
    .addColumn("full_time", "double precision", (c) => c.notNull())
    .addPrimaryKeyConstraint("rate_buckets_pk", ["scope", "key"])
    .execute();
  await db.schema.createIndex("rate_buckets_full").on("rate_buckets").column("full_time").execute();
}
