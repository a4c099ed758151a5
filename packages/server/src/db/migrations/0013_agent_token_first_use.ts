import type { Kysely } from "kysely";

/**
 * When a guest-agent token first authenticated (null: never yet). A re-issued token leaves the VM's
 * previous one valid until the new one is first used or a grace period ends, as a key rotation's
 * overlap does (issue 41); its first use is what ends the previous tokens early.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("agent_tokens").addColumn("first_use_time", "bigint").execute();
}
