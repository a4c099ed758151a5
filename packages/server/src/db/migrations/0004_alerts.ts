import type { Kysely } from "kysely";

// Alert rules and their revisions, evaluated instances, incidents and their transition events (issue 15).
export async function up(db: Kysely<unknown>): Promise<void> {
  const ms = "bigint";
  await db.schema
    .createTable("alert_rules")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("project_id", "text", (c) => c.notNull().references("projects.id"))
    .addColumn("latest_version", "integer", (c) => c.notNull())
    .addColumn("applied_version", "integer", (c) => c.notNull())
    .addColumn("sync_status", "text", (c) => c.notNull())
    .addColumn("sync_reason", "text", (c) => c.notNull())
    .addColumn("create_time", ms, (c) => c.notNull())
    .addColumn("update_time", ms, (c) => c.notNull())
    .addColumn("delete_time", ms)
    .addColumn("last_eval_time", ms)
    .addColumn("last_eval_error", "text", (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex("alert_rules_project")
    .on("alert_rules")
    .columns(["project_id", "create_time"])
    .execute();
  await db.schema
    .createTable("alert_rule_revisions")
    .addColumn("rule_id", "text", (c) => c.notNull().references("alert_rules.id").onDelete("cascade"))
    .addColumn("version", "integer", (c) => c.notNull())
    .addColumn("project_id", "text", (c) => c.notNull())
    .addColumn("spec", "text", (c) => c.notNull())
    .addColumn("condition_key", "text", (c) => c.notNull())
    .addColumn("actor", "text", (c) => c.notNull())
    .addColumn("request_id", "text", (c) => c.notNull())
    .addColumn("create_time", ms, (c) => c.notNull())
    .addPrimaryKeyConstraint("alert_rule_revisions_pk", ["rule_id", "version"])
    .execute();
  await db.schema
    .createTable("alert_instances")
    .addColumn("rule_id", "text", (c) => c.notNull().references("alert_rules.id").onDelete("cascade"))
    .addColumn("instance_key", "text", (c) => c.notNull())
    .addColumn("project_id", "text", (c) => c.notNull())
    .addColumn("vm_name", "text", (c) => c.notNull())
    .addColumn("mountpoint", "text", (c) => c.notNull())
    .addColumn("revision", "integer", (c) => c.notNull())
    .addColumn("state", "text", (c) => c.notNull())
    .addColumn("state_since", ms, (c) => c.notNull())
    .addColumn("pending_since", ms)
    .addColumn("fired_at", ms)
    .addColumn("resolved_at", ms)
    .addColumn("retire_reason", "text", (c) => c.notNull())
    .addColumn("flag", "text", (c) => c.notNull())
    .addColumn("flag_since", ms)
    .addColumn("flag_message", "text", (c) => c.notNull())
    .addColumn("last_eval_time", ms)
    .addColumn("last_value", "double precision")
    .addColumn("incident_id", "text")
    .addColumn("update_time", ms, (c) => c.notNull())
    .addPrimaryKeyConstraint("alert_instances_pk", ["rule_id", "instance_key"])
    .execute();
  await db.schema
    .createTable("incidents")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("project_id", "text", (c) => c.notNull())
    .addColumn("rule_id", "text", (c) => c.notNull())
    .addColumn("rule_version", "integer", (c) => c.notNull())
    .addColumn("instance_key", "text", (c) => c.notNull())
    .addColumn("vm_name", "text", (c) => c.notNull())
    .addColumn("mountpoint", "text", (c) => c.notNull())
    .addColumn("state", "text", (c) => c.notNull())
    .addColumn("retire_reason", "text", (c) => c.notNull())
    .addColumn("rule_display_name", "text", (c) => c.notNull())
    .addColumn("severity", "text", (c) => c.notNull())
    .addColumn("metric_id", "text", (c) => c.notNull())
    .addColumn("operator", "text", (c) => c.notNull())
    .addColumn("threshold", "double precision", (c) => c.notNull())
    .addColumn("open_time", ms, (c) => c.notNull())
    .addColumn("close_time", ms)
    .addColumn("firing_value", "double precision")
    .addColumn("last_value", "double precision")
    .addColumn("no_data", "integer", (c) => c.notNull())
    .addColumn("evaluation_error", "integer", (c) => c.notNull())
    .addColumn("ack_user_id", "text")
    .addColumn("ack_time", ms)
    .addColumn("snooze_until", ms)
    .addColumn("snooze_user_id", "text")
    .addColumn("repeat_interval_ms", ms, (c) => c.notNull())
    .addColumn("next_notify_time", ms)
    .addColumn("update_time", ms, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex("incidents_project")
    .on("incidents")
    .columns(["project_id", "open_time"])
    .execute();
  await db.schema.createIndex("incidents_rule").on("incidents").columns(["rule_id", "state"]).execute();
  await db.schema
    .createIndex("incidents_state")
    .on("incidents")
    .columns(["state", "next_notify_time"])
    .execute();
  await db.schema
    .createTable("incident_events")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("project_id", "text", (c) => c.notNull())
    .addColumn("incident_id", "text", (c) => c.notNull())
    .addColumn("rule_id", "text", (c) => c.notNull())
    .addColumn("kind", "text", (c) => c.notNull())
    .addColumn("time", ms, (c) => c.notNull())
    .addColumn("actor", "text", (c) => c.notNull())
    .addColumn("detail", "text", (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex("incident_events_incident")
    .on("incident_events")
    .columns(["incident_id", "time"])
    .execute();
  await db.schema.createIndex("incident_events_time").on("incident_events").columns(["time", "id"]).execute();
}
