import type { Db } from "../db/database.ts";
import type { DeliveryTable, SilenceTable } from "../db/schema.ts";
import { destinationIdsOf } from "./outbox.ts";
import type { IncidentState, RecheckState } from "./recheck.ts";
import { silencesInForce } from "./silences.ts";

/**
 * What one destination's queue is rechecked against (recheck.ts), the sealed values its channel opens,
 * and when it was read (dispatcher.ts RECHECK_MAX_AGE_MS).
 */
export interface QueueState extends RecheckState {
  dest: RecheckState["dest"];
  silences: SilenceTable[];
  /** The queue's incidents as read: null when the row no longer exists; an id not here is unread. */
  incidents: Map<string, IncidentState | null>;
  /** performance.now() when the read began. */
  readAt: number;
  /** Set after a failed attempt: read again before the next one, whatever its age. */
  stale: boolean;
  /** The destination's URL, unsealed on first use. */
  url: string | undefined;
  /** PagerDuty's routing key or Opsgenie's API key, unsealed on first use. */
  key: string | undefined;
  /** Webhook signing secrets (sealed, newest first) and, on first use, unsealed. */
  sealedSecrets: string[];
  secrets: string[] | undefined;
}

/**
 * Reads what the recheck needs for the given destinations' queues, in three statements whatever
 * their number: the destination rows, the incidents of `deliveries`, the webhooks' live secrets.
 */
export async function readQueueStates(
  db: Db,
  destinationIds: string[],
  deliveries: DeliveryTable[],
  atMs: number,
): Promise<Map<string, QueueState>> {
  const readAt = performance.now();
  const dests = await db.selectFrom("destinations").selectAll().where("id", "in", destinationIds).execute();
  const incidentIds = [...new Set(deliveries.flatMap((d) => (d.incident_id ? [d.incident_id] : [])))];
  // Each incident with the spec of its rule's applied revision (what fanout addressed it by), so a
  // destination taken out of the rule since is no longer sent to (docs/notifications.md).
  const rows =
    incidentIds.length > 0
      ? await db
          .selectFrom("incidents as i")
          .leftJoin("alert_rules as r", "r.id", "i.rule_id")
          .leftJoin("alert_rule_revisions as v", (j) =>
            j.onRef("v.rule_id", "=", "r.id").onRef("v.version", "=", "r.applied_version"),
          )
          .select(["i.id", "i.state", "i.snooze_until", "i.rule_id", "i.vm_name", "v.spec"])
          .where("i.id", "in", incidentIds)
          .execute()
      : [];
  const incidents = rows.map(({ spec, ...i }) => ({
    ...i,
    destinations: spec === null ? null : new Set(destinationIdsOf(spec)),
  }));
  const silences = await silencesInForce(db, [...new Set(dests.map((d) => d.project_id))], atMs);
  const webhooks = dests.filter((d) => d.kind === "WEBHOOK").map((d) => d.id);
  const secrets =
    webhooks.length > 0
      ? await db
          .selectFrom("destination_secrets")
          .select(["destination_id", "sealed_secret"])
          .where("destination_id", "in", webhooks)
          .where((eb) => eb.or([eb("expire_time", "is", null), eb("expire_time", ">", atMs)]))
          .orderBy("destination_id")
          .orderBy("create_time", "desc")
          .execute()
      : [];
  const incidentById = new Map(incidents.map((i) => [i.id, i]));
  const states = new Map<string, QueueState>();
  for (const id of destinationIds) states.set(id, emptyState(readAt));
  for (const d of dests) {
    const st = states.get(d.id);
    if (st) {
      st.dest = d;
      st.silences = silences.filter((s) => s.project_id === d.project_id);
    }
  }
  for (const s of secrets) states.get(s.destination_id)?.sealedSecrets.push(s.sealed_secret);
  for (const d of deliveries) {
    if (d.incident_id)
      states.get(d.destination_id)?.incidents.set(d.incident_id, incidentById.get(d.incident_id) ?? null);
  }
  return states;
}

export function emptyState(readAt: number): QueueState {
  return {
    readAt,
    stale: false,
    dest: undefined,
    url: undefined,
    key: undefined,
    silences: [],
    sealedSecrets: [],
    secrets: undefined,
    incidents: new Map(),
  };
}
