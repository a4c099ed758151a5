import type { Kysely } from "kysely";

/** Guest-agent tokens: each writes only its own VM's guest series. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable("agent_tokens")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("project_id", "text", (c) => c.notNull())
    .addColumn("vm_id", "text", (c) => c.notNull())
    .addColumn("token_hash", "text", (c) => c.notNull().unique())
    .addColumn("create_time", "bigint", (c) => c.notNull())
    .addColumn("revoke_time", "bigint")
    .execute();
  await db.schema
    .createIndex("agent_tokens_vm")
    .on("agent_tokens")
    .columns(["project_id", "vm_id"])
    .execute();
}
