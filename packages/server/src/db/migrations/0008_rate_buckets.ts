import type { Kysely } from "kysely";

/**
 * Token buckets shared by replicas (cluster/shared-buckets.ts): one row per family and key, the
 * tokens left at `at` (ms). `full_time` is when the bucket is full again; rows past it say nothing
 * a missing row would not, so they are pruned through its index and the table stays bounded by the
 * keys active within one refill.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable("rate_buckets")
    .addColumn("scope", "text", (c) => c.notNull())
    .addColumn("key", "text", (c) => c.notNull())
    .addColumn("tokens", "double precision", (c) => c.notNull())
    .addColumn("at", "bigint", (c) => c.notNull())
    .addColumn("full_time", "double precision", (c) => c.notNull())
    .addPrimaryKeyConstraint("rate_buckets_pk", ["scope", "key"])
    .execute();
  await db.schema.createIndex("rate_buckets_full").on("rate_buckets").column("full_time").execute();
}
