import { randomUUID } from "node:crypto";
import type { Db } from "../db/database.ts";
import type { DeliveryTable, IncidentTable } from "../db/schema.ts";
import type { NotificationMessage, NotificationType } from "./message.ts";

/**
 * The outbox's intake: incident events (written by the evaluator in the same transaction as each
 * transition) become one delivery per (event, destination of the rule), with a DeliveryID that every
 * retry keeps. Reads the incident and rule rows as data; it imports nothing of alerts/.
 */
const EVENT_TYPES: Readonly<Record<string, NotificationType>> = {
  OPENED: "incident.opened",
  RESOLVED: "incident.resolved",
  RETIRED: "incident.retired",
  REPEAT_DUE: "incident.repeat",
  ACKNOWLEDGED: "incident.acknowledged",
};

/** Kinds told of an acknowledgement: their own incident is acknowledged too. Others are not told. */
const ACK_KINDS = new Set(["PAGERDUTY", "OPSGENIE"]);

export interface FanoutDeps {
  readonly db: Db;
  readonly baseUrl: string;
  readonly messageTtlMs: number;
}

/** Deliveries per multi-row INSERT (15 parameters each). */
const INSERT_CHUNK = 50;

const shortVm = (name: string) => name.slice(name.lastIndexOf("/") + 1);
const fmt = (v: number | null | undefined) =>
  v === null || v === undefined ? "no value" : Number.isInteger(v) ? String(v) : v.toFixed(1);
const OPS: Readonly<Record<string, string>> = {
  GREATER_THAN: ">",
  GREATER_THAN_OR_EQUAL: "≥",
  LESS_THAN: "<",
  LESS_THAN_OR_EQUAL: "≤",
};

/** The destination ids a rule revision's spec (its JSON) names, in the rule's order. */
export function destinationIdsOf(spec: string): string[] {
  const names = (JSON.parse(spec) as { destinationNames?: string[] }).destinationNames ?? [];
  return names.map((n) => n.slice(n.lastIndexOf("/") + 1));
}

/** Turns up to `limit` unprocessed events into deliveries; returns how many events it processed. */
export async function fanout(deps: FanoutDeps, nowMs: number, limit = 500): Promise<number> {
  const { db } = deps;
  const events = await db
    .selectFrom("incident_events")
    .selectAll()
    .where("fanout_time", "is", null)
    .orderBy("time")
    .orderBy("id")
    .limit(limit)
    .execute();
  if (events.length === 0) return 0;
  // One transaction for the batch: a failure leaves every event of it for the next pass. Its reads are
  // one statement each whatever the batch holds (incidents, rules' applied specs, destinations), and its
  // deliveries are inserted a chunk of rows per statement.
  await db.transaction().execute(async (tx) => {
    const incidentIds = [...new Set(events.filter((e) => EVENT_TYPES[e.kind]).map((e) => e.incident_id))];
    const incidents =
      incidentIds.length > 0
        ? await tx.selectFrom("incidents").selectAll().where("id", "in", incidentIds).execute()
        : [];
    const incidentById = new Map(incidents.map((i) => [i.id, i]));
    const ruleIds = [...new Set(incidents.map((i) => i.rule_id))];
    const rules =
      ruleIds.length > 0
        ? await tx
            .selectFrom("alert_rules as r")
            .innerJoin("alert_rule_revisions as v", (j) =>
              j.onRef("v.rule_id", "=", "r.id").onRef("v.version", "=", "r.applied_version"),
            )
            .select(["r.id", "v.spec"])
            .where("r.id", "in", ruleIds)
            .execute()
        : [];
    // Destination ids named by each rule's applied revision, in the rule's order.
    const namedBy = new Map<string, string[]>();
    for (const r of rules) namedBy.set(r.id, destinationIdsOf(r.spec));
    const destinationIds = [...new Set([...namedBy.values()].flat())];
    const live =
      destinationIds.length > 0
        ? await tx
            .selectFrom("destinations")
            .select(["id", "project_id", "kind"])
            .where("id", "in", destinationIds)
            .where("delete_time", "is", null)
            .execute()
        : [];
    const projectOf = new Map(live.map((d) => [d.id, d.project_id]));
    const kindOf = new Map(live.map((d) => [d.id, d.kind]));
    const rows: DeliveryTable[] = [];
    for (const e of events) {
      const type = EVENT_TYPES[e.kind];
      // Human operations (acknowledge, snooze) notify no person: the incident list is their in-app
      // record. An acknowledgement only goes to incident tools that track it (ACK_KINDS).
      const inc = type ? incidentById.get(e.incident_id) : undefined;
      if (!type || !inc) continue;
      // The rule's destinations that still exist, in the incident's own project.
      const targets = [...new Set(namedBy.get(inc.rule_id) ?? [])].filter(
        (id) =>
          projectOf.get(id) === inc.project_id &&
          (type !== "incident.acknowledged" || ACK_KINDS.has(kindOf.get(id) ?? "")),
      );
      for (const destinationId of targets) {
        const deliveryId = `dlv_${randomUUID()}`;
        rows.push({
          id: deliveryId,
          project_id: inc.project_id,
          destination_id: destinationId,
          event_id: e.id,
          incident_id: inc.id,
          event_type: type,
          message: JSON.stringify(messageOf(deps.baseUrl, type, deliveryId, e.time, inc, e.actor)),
          state: "PENDING",
          skip_reason: "",
          create_time: nowMs,
          // The message is stale once the retry period after the transition is over.
          expire_time: e.time + deps.messageTtlMs,
          next_attempt_time: nowMs,
          attempt_count: 0,
          lease_until: null,
          update_time: nowMs,
        });
      }
    }
    for (let i = 0; i < rows.length; i += INSERT_CHUNK)
      await tx
        .insertInto("deliveries")
        .values(rows.slice(i, i + INSERT_CHUNK))
        .onConflict((oc) => oc.columns(["event_id", "destination_id"]).doNothing())
        .execute();
    await tx
      .updateTable("incident_events")
      .set({ fanout_time: nowMs })
      .where(
        "id",
        "in",
        events.map((e) => e.id),
      )
      .execute();
  });
  return events.length;
}

/** The message of one delivery, fixed when it is created: every retry sends the same body. */
function messageOf(
  baseUrl: string,
  type: NotificationType,
  deliveryId: string,
  eventTime: number,
  inc: IncidentTable,
  actor: string,
): NotificationMessage {
  const incidentName = `projects/${inc.project_id}/incidents/${inc.id}`;
  const cond = `${fmt(type === "incident.opened" ? inc.firing_value : inc.last_value)} ${OPS[inc.operator] ?? inc.operator} ${fmt(inc.threshold)}`;
  const where = `${shortVm(inc.vm_name)}${inc.mountpoint ? ` ${inc.mountpoint}` : ""}`;
  const summary =
    type === "incident.opened"
      ? `FIRING: ${inc.rule_display_name} on ${where} (${cond})`
      : type === "incident.repeat"
        ? `STILL FIRING: ${inc.rule_display_name} on ${where} (${cond})`
        : type === "incident.acknowledged"
          ? `ACKNOWLEDGED by ${actor}: ${inc.rule_display_name} on ${where}`
          : type === "incident.resolved"
            ? `RESOLVED: ${inc.rule_display_name} on ${where}`
            : `RETIRED: ${inc.rule_display_name} on ${where} (${inc.retire_reason})`;
  return {
    type,
    deliveryId,
    timeUnix: Math.floor(eventTime / 1000),
    project: `projects/${inc.project_id}`,
    incident: {
      name: incidentName,
      state: type === "incident.resolved" ? "RESOLVED" : type === "incident.retired" ? "RETIRED" : "OPEN",
      severity: inc.severity,
      metricId: inc.metric_id,
      operator: inc.operator,
      threshold: inc.threshold,
      ...(inc.firing_value !== null ? { firingValue: inc.firing_value } : {}),
      ...(inc.last_value !== null ? { lastValue: inc.last_value } : {}),
      openTimeUnix: Math.floor(inc.open_time / 1000),
      ...(type === "incident.resolved" || type === "incident.retired"
        ? { closeTimeUnix: Math.floor(eventTime / 1000) }
        : {}),
      ...(type === "incident.retired" ? { retireReason: inc.retire_reason } : {}),
      ...(type === "incident.acknowledged" ? { acknowledgedBy: actor } : {}),
    },
    rule: {
      name: `projects/${inc.project_id}/alertRules/${inc.rule_id}`,
      displayName: inc.rule_display_name,
      version: String(inc.rule_version),
    },
    vm: { name: inc.vm_name, ...(inc.mountpoint ? { mountpoint: inc.mountpoint } : {}) },
    summary,
    link: `${baseUrl}/projects/${inc.project_id}/incidents/${inc.id}`,
  };
}
