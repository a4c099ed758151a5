import type { Kysely } from "kysely";

// Silences: scheduled windows that mute the notifications of matching rules and/or VMs (issue 30).
export async function up(db: Kysely<unknown>): Promise<void> {
  const ms = "bigint";
  await db.schema
    .createTable("silences")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("project_id", "text", (c) => c.notNull().references("projects.id"))
    .addColumn("start_time", ms, (c) => c.notNull())
    .addColumn("end_time", ms, (c) => c.notNull())
    .addColumn("comment", "text", (c) => c.notNull())
    // JSON arrays of rule ids and full VM names; an empty array matches every rule / VM.
    .addColumn("rule_ids", "text", (c) => c.notNull())
    .addColumn("vm_names", "text", (c) => c.notNull())
    .addColumn("creator", "text", (c) => c.notNull())
    .addColumn("updated_by", "text", (c) => c.notNull())
    .addColumn("version", "integer", (c) => c.notNull())
    .addColumn("create_time", ms, (c) => c.notNull())
    .addColumn("update_time", ms, (c) => c.notNull())
    .execute();
  // The dispatcher's recheck reads a project's silences that have not ended.
  await db.schema
    .createIndex("silences_project_end")
    .on("silences")
    .columns(["project_id", "end_time"])
    .execute();
  await db.schema
    .createIndex("silences_project_create")
    .on("silences")
    .columns(["project_id", "create_time"])
    .execute();
  // A closing message muted by a silence still goes where the incident's opening was sent: the
  // dispatcher looks that up by incident and destination.
  await db.schema
    .createIndex("deliveries_incident_destination")
    .on("deliveries")
    .columns(["incident_id", "destination_id"])
    .execute();
}
