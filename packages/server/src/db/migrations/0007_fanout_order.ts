import type { Kysely } from "kysely";

/**
 * The fan-out reads the oldest events not yet fanned out, `fanout_time IS NULL ORDER BY time, id
 * LIMIT n`. With (fanout_time, time) SQLite sorted every unprocessed event of the same time (an
 * evaluator cycle's transitions share one) at each batch; with id in the index it reads the first n.
 * Replaces incident_events_fanout, a prefix of the new index.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex("incident_events_fanout_order")
    .on("incident_events")
    .columns(["fanout_time", "time", "id"])
    .execute();
  await db.schema.dropIndex("incident_events_fanout").execute();
}
