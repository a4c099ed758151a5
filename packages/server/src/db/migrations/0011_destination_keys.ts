import type { Kysely } from "kysely";

// The sealed integration key of PagerDuty and Opsgenie destinations ("" for the other kinds) (issue 30).
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("destinations")
    .addColumn("sealed_key", "text", (c) => c.notNull().defaultTo(""))
    .execute();
}
