import type { Kysely } from "kysely";

/**
 * The audit log (issue 29): one row per call of a state-changing RPC and per console sign-in or
 * sign-out, refused calls included. Names and field names only, never a value a request carried.
 * `project_id` is "" for what is outside every project (the operator's own project and VM calls
 * name a project when they have one). Keys and service accounts remember when and from where they
 * were last used (written at most once a minute per key), and a CI token the repository, workflow
 * and ref of the identity token it was exchanged for, so its calls name them.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const ms = "bigint";
  await db.schema
    .createTable("audit_events")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("time", ms, (c) => c.notNull())
    .addColumn("project_id", "text", (c) => c.notNull())
    .addColumn("actor_kind", "text", (c) => c.notNull())
    .addColumn("actor", "text", (c) => c.notNull())
    .addColumn("actor_detail", "text", (c) => c.notNull())
    .addColumn("method", "text", (c) => c.notNull())
    .addColumn("resource", "text", (c) => c.notNull())
    .addColumn("request_id", "text", (c) => c.notNull())
    .addColumn("replay", "integer", (c) => c.notNull().defaultTo(0))
    .addColumn("outcome", "text", (c) => c.notNull())
    .addColumn("client_address", "text", (c) => c.notNull())
    .addColumn("user_agent", "text", (c) => c.notNull())
    .addColumn("changed_fields", "text", (c) => c.notNull())
    .execute();
  // Newest first within a project, and the purge by age across all of them.
  await db.schema
    .createIndex("audit_events_project_time")
    .on("audit_events")
    .columns(["project_id", "time", "id"])
    .execute();
  await db.schema.createIndex("audit_events_time").on("audit_events").columns(["time", "id"]).execute();
  // A retried requestId is recorded as a replay of the first call.
  await db.schema.createIndex("audit_events_request").on("audit_events").column("request_id").execute();

  for (const table of ["api_keys", "service_accounts"]) {
    await db.schema.alterTable(table).addColumn("last_used_time", ms).execute();
    await db.schema
      .alterTable(table)
      .addColumn("last_used_address", "text", (c) => c.notNull().defaultTo(""))
      .execute();
  }
  for (const column of ["repository", "workflow", "ref"]) {
    await db.schema
      .alterTable("ci_tokens")
      .addColumn(column, "text", (c) => c.notNull().defaultTo(""))
      .execute();
  }
}
