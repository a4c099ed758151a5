import type { Kysely } from "kysely";

/** Named leases: one replica at a time runs a singleton task (the alert evaluator's cycle). */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable("leases")
    .addColumn("name", "text", (c) => c.primaryKey())
    .addColumn("holder", "text", (c) => c.notNull())
    .addColumn("expire_time", "bigint", (c) => c.notNull())
    .execute();
}
