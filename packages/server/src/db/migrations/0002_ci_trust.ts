import type { Kysely } from "kysely";

// CI trust connections, exchanged CI tokens and used assertion ids (issue 6).
export async function up(db: Kysely<unknown>): Promise<void> {
  const ms = "bigint";
  await db.schema
    .createTable("ci_trusts")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("project_id", "text", (c) => c.notNull().references("projects.id"))
    .addColumn("service_account_id", "text", (c) => c.notNull().references("service_accounts.id"))
    .addColumn("state", "text", (c) => c.notNull())
    .addColumn("issuer", "text", (c) => c.notNull())
    .addColumn("audience", "text", (c) => c.notNull())
    .addColumn("intended_repository", "text", (c) => c.notNull())
    .addColumn("intended_workflow", "text", (c) => c.notNull())
    .addColumn("intended_branch", "text")
    .addColumn("intended_environment", "text")
    .addColumn("intended_event", "text", (c) => c.notNull())
    .addColumn("setup_id", "text", (c) => c.unique())
    .addColumn("pairing_hash", "text")
    .addColumn("setup_expire_time", ms)
    .addColumn("observed", "text")
    .addColumn("observe_time", ms)
    .addColumn("permissions", "text", (c) => c.notNull())
    .addColumn("permissions_version", "integer", (c) => c.notNull())
    .addColumn("approver_user_id", "text")
    .addColumn("approve_time", ms)
    .addColumn("creator_user_id", "text", (c) => c.notNull())
    .addColumn("create_time", ms, (c) => c.notNull())
    .addColumn("update_time", ms, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex("ci_trusts_project")
    .on("ci_trusts")
    .columns(["project_id", "create_time"])
    .execute();
  await db.schema
    .createTable("ci_tokens")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("trust_id", "text", (c) => c.notNull().references("ci_trusts.id"))
    .addColumn("project_id", "text", (c) => c.notNull())
    .addColumn("service_account_id", "text", (c) => c.notNull())
    .addColumn("token_hash", "text", (c) => c.notNull().unique())
    .addColumn("capabilities", "text", (c) => c.notNull())
    .addColumn("permissions_version", "integer", (c) => c.notNull())
    .addColumn("create_time", ms, (c) => c.notNull())
    .addColumn("expire_time", ms, (c) => c.notNull())
    .execute();
  await db.schema.createIndex("ci_tokens_expire").on("ci_tokens").column("expire_time").execute();
  await db.schema
    .createTable("ci_assertion_jtis")
    .addColumn("issuer", "text", (c) => c.notNull())
    .addColumn("jti", "text", (c) => c.notNull())
    .addColumn("expire_time", ms, (c) => c.notNull())
    .addPrimaryKeyConstraint("ci_assertion_jtis_pk", ["issuer", "jti"])
    .execute();
  await db.schema
    .createIndex("ci_assertion_jtis_expire")
    .on("ci_assertion_jtis")
    .column("expire_time")
    .execute();
}
