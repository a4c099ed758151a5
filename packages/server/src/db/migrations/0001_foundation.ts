import type { Kysely } from "kysely";

// One migration per change; never edit a migration that has shipped.
export async function up(db: Kysely<unknown>): Promise<void> {
  const ms = "bigint";
  await db.schema
    .createTable("projects")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("display_name", "text", (c) => c.notNull())
    .addColumn("create_time", ms, (c) => c.notNull())
    .execute();
  await db.schema
    .createTable("users")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("email", "text", (c) => c.notNull().unique())
    .addColumn("display_name", "text", (c) => c.notNull())
    .addColumn("password_hash", "text", (c) => c.notNull())
    .addColumn("create_time", ms, (c) => c.notNull())
    .execute();
  await db.schema
    .createTable("memberships")
    .addColumn("project_id", "text", (c) => c.notNull().references("projects.id"))
    .addColumn("user_id", "text", (c) => c.notNull().references("users.id"))
    .addColumn("role", "text", (c) => c.notNull())
    .addColumn("create_time", ms, (c) => c.notNull())
    .addPrimaryKeyConstraint("memberships_pk", ["project_id", "user_id"])
    .execute();
  await db.schema
    .createTable("sessions")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("user_id", "text", (c) => c.notNull().references("users.id"))
    .addColumn("token_hash", "text", (c) => c.notNull().unique())
    .addColumn("create_time", ms, (c) => c.notNull())
    .addColumn("expire_time", ms, (c) => c.notNull())
    .addColumn("revoke_time", ms)
    .execute();
  await db.schema
    .createTable("vms")
    .addColumn("project_id", "text", (c) => c.notNull().references("projects.id"))
    .addColumn("vm_id", "text", (c) => c.notNull())
    .addColumn("location", "text", (c) => c.notNull())
    .addColumn("display_name", "text", (c) => c.notNull())
    .addColumn("state", "text", (c) => c.notNull())
    .addColumn("distribution", "text", (c) => c.notNull())
    .addColumn("monitoring_level", "text", (c) => c.notNull())
    .addColumn("vcpus", "integer", (c) => c.notNull())
    .addColumn("memory_bytes", ms, (c) => c.notNull())
    .addColumn("create_time", ms, (c) => c.notNull())
    .addColumn("delete_time", ms)
    .addPrimaryKeyConstraint("vms_pk", ["project_id", "vm_id"])
    .execute();
  await db.schema
    .createTable("vm_state_events")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("project_id", "text", (c) => c.notNull())
    .addColumn("vm_id", "text", (c) => c.notNull())
    .addColumn("state", "text", (c) => c.notNull())
    .addColumn("stop_reason", "text", (c) => c.notNull())
    .addColumn("time", ms, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex("vm_state_events_vm")
    .on("vm_state_events")
    .columns(["project_id", "vm_id", "time"])
    .execute();
  await db.schema
    .createTable("maintenance_windows")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("project_id", "text", (c) => c.notNull())
    .addColumn("vm_ids", "text", (c) => c.notNull())
    .addColumn("start_time", ms, (c) => c.notNull())
    .addColumn("end_time", ms, (c) => c.notNull())
    .addColumn("reason", "text", (c) => c.notNull())
    .execute();
  await db.schema
    .createTable("service_accounts")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("project_id", "text", (c) => c.notNull().references("projects.id"))
    .addColumn("display_name", "text", (c) => c.notNull())
    .addColumn("template", "text", (c) => c.notNull())
    .addColumn("permissions", "text", (c) => c.notNull())
    .addColumn("state", "text", (c) => c.notNull())
    .addColumn("create_time", ms, (c) => c.notNull())
    .execute();
  await db.schema
    .createTable("api_keys")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("project_id", "text", (c) => c.notNull().references("projects.id"))
    .addColumn("kind", "text", (c) => c.notNull())
    .addColumn("service_account_id", "text", (c) => c.references("service_accounts.id"))
    .addColumn("owner_user_id", "text", (c) => c.references("users.id"))
    .addColumn("creator_user_id", "text", (c) => c.notNull())
    .addColumn("display_name", "text", (c) => c.notNull())
    .addColumn("capabilities", "text", (c) => c.notNull())
    .addColumn("secret_hash", "text", (c) => c.notNull().unique())
    .addColumn("secret_hint", "text", (c) => c.notNull())
    .addColumn("rotation_group", "text", (c) => c.notNull())
    .addColumn("create_time", ms, (c) => c.notNull())
    .addColumn("expire_time", ms, (c) => c.notNull())
    .addColumn("revoke_time", ms)
    .execute();
  await db.schema.createIndex("api_keys_group").on("api_keys").column("rotation_group").execute();
  await db.schema
    .createTable("idempotency_records")
    .addColumn("scope", "text", (c) => c.notNull())
    .addColumn("request_id", "text", (c) => c.notNull())
    .addColumn("body_hash", "text", (c) => c.notNull())
    .addColumn("result", "text", (c) => c.notNull())
    .addColumn("create_time", ms, (c) => c.notNull())
    .addPrimaryKeyConstraint("idempotency_pk", ["scope", "request_id"])
    .execute();
}
