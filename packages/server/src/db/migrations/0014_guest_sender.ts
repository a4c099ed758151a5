import type { Kysely } from "kysely";

/**
 * Which sender last fed a VM's guest series (svc-agent, node_exporter via vmagent, an OpenTelemetry
 * Collector…) and when, so the VM's page names it whichever replica took the request (null: none yet).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("vms").addColumn("guest_sender", "text").execute();
  await db.schema.alterTable("vms").addColumn("guest_seen_time", "bigint").execute();
}
