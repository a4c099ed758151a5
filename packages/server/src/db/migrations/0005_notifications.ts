import type { Kysely } from "kysely";

// Destinations, their recipients and sealed secrets, the delivery outbox and its attempts (issue 16).
export async function up(db: Kysely<unknown>): Promise<void> {
  const ms = "bigint";
  await db.schema
    .createTable("destinations")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("project_id", "text", (c) => c.notNull().references("projects.id"))
    .addColumn("kind", "text", (c) => c.notNull())
    .addColumn("display_name", "text", (c) => c.notNull())
    .addColumn("paused", "integer", (c) => c.notNull())
    .addColumn("url_display", "text", (c) => c.notNull())
    .addColumn("sealed_url", "text", (c) => c.notNull())
    .addColumn("create_time", ms, (c) => c.notNull())
    .addColumn("update_time", ms, (c) => c.notNull())
    .addColumn("delete_time", ms)
    .execute();
  await db.schema.createIndex("destinations_project").on("destinations").columns(["project_id"]).execute();
  await db.schema
    .createTable("destination_recipients")
    .addColumn("destination_id", "text", (c) => c.notNull().references("destinations.id"))
    .addColumn("user_id", "text", (c) => c.notNull())
    .addColumn("code_hash", "text", (c) => c.notNull())
    .addColumn("code_expire_time", ms, (c) => c.notNull())
    .addColumn("verify_time", ms)
    .addColumn("create_time", ms, (c) => c.notNull())
    .addPrimaryKeyConstraint("destination_recipients_pk", ["destination_id", "user_id"])
    .execute();
  await db.schema
    .createTable("destination_secrets")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("destination_id", "text", (c) => c.notNull().references("destinations.id"))
    .addColumn("sealed_secret", "text", (c) => c.notNull())
    .addColumn("create_time", ms, (c) => c.notNull())
    .addColumn("expire_time", ms)
    .execute();
  await db.schema
    .createIndex("destination_secrets_destination")
    .on("destination_secrets")
    .columns(["destination_id", "create_time"])
    .execute();
  await db.schema
    .createTable("deliveries")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("project_id", "text", (c) => c.notNull())
    .addColumn("destination_id", "text", (c) => c.notNull())
    .addColumn("event_id", "text", (c) => c.notNull())
    .addColumn("incident_id", "text")
    .addColumn("event_type", "text", (c) => c.notNull())
    .addColumn("message", "text", (c) => c.notNull())
    .addColumn("state", "text", (c) => c.notNull())
    .addColumn("skip_reason", "text", (c) => c.notNull())
    .addColumn("create_time", ms, (c) => c.notNull())
    .addColumn("expire_time", ms, (c) => c.notNull())
    .addColumn("next_attempt_time", ms, (c) => c.notNull())
    .addColumn("attempt_count", "integer", (c) => c.notNull())
    .addColumn("lease_until", ms)
    .addColumn("update_time", ms, (c) => c.notNull())
    .addUniqueConstraint("deliveries_event_destination", ["event_id", "destination_id"])
    .execute();
  await db.schema
    .createIndex("deliveries_due")
    .on("deliveries")
    .columns(["state", "next_attempt_time"])
    .execute();
  await db.schema
    .createIndex("deliveries_project")
    .on("deliveries")
    .columns(["project_id", "create_time"])
    .execute();
  await db.schema
    .createTable("delivery_attempts")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("delivery_id", "text", (c) => c.notNull())
    .addColumn("time", ms, (c) => c.notNull())
    .addColumn("status", "text", (c) => c.notNull())
    .addColumn("response_code", "integer", (c) => c.notNull())
    .addColumn("detail", "text", (c) => c.notNull())
    .addColumn("duration_ms", "integer", (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex("delivery_attempts_delivery")
    .on("delivery_attempts")
    .columns(["delivery_id", "time"])
    .execute();
  // Events not yet turned into deliveries have no fanout_time.
  await db.schema.alterTable("incident_events").addColumn("fanout_time", ms).execute();
  await db.schema
    .createIndex("incident_events_fanout")
    .on("incident_events")
    .columns(["fanout_time", "time"])
    .execute();
}
