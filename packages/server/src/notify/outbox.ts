import { randomUUID } from "node:crypto";
import type { Db } from "../db/database.ts";
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
};

export interface FanoutDeps {
  readonly db: Db;
  readonly baseUrl: string;
  readonly messageTtlMs: number;
}

const shortVm = (name: string) => name.slice(name.lastIndexOf("/") + 1);
const fmt = (v: number | null | undefined) =>
  v === null || v === undefined ? "no value" : Number.isInteger(v) ? String(v) : v.toFixed(1);
const OPS: Readonly<Record<string, string>> = {
  GREATER_THAN: ">",
  GREATER_THAN_OR_EQUAL: "≥",
  LESS_THAN: "<",
  LESS_THAN_OR_EQUAL: "≤",
};

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
  // One transaction for the batch: a failure leaves every event of it for the next pass.
  await db.transaction().execute(async (tx) => {
    const byRule = new Map<string, { id: string }[]>();
    const liveDestinationsOf = async (ruleId: string, projectId: string): Promise<{ id: string }[]> => {
      const known = byRule.get(ruleId);
      if (known) return known;
      const rule = await tx
        .selectFrom("alert_rules as r")
        .innerJoin("alert_rule_revisions as v", (j) =>
          j.onRef("v.rule_id", "=", "r.id").onRef("v.version", "=", "r.applied_version"),
        )
        .select(["v.spec"])
        .where("r.id", "=", ruleId)
        .executeTakeFirst();
      const names: string[] = rule
        ? ((JSON.parse(rule.spec) as { destinationNames?: string[] }).destinationNames ?? [])
        : [];
      const ids = names.map((n) => n.slice(n.lastIndexOf("/") + 1));
      const live =
        ids.length > 0
          ? await tx
              .selectFrom("destinations")
              .select("id")
              .where("project_id", "=", projectId)
              .where("id", "in", ids)
              .where("delete_time", "is", null)
              .execute()
          : [];
      byRule.set(ruleId, live);
      return live;
    };
    for (const e of events) {
      const type = EVENT_TYPES[e.kind];
      // Human operations (acknowledge, snooze) notify nobody: the incident list is their in-app record.
      if (type) {
        const inc = await tx
          .selectFrom("incidents")
          .selectAll()
          .where("id", "=", e.incident_id)
          .executeTakeFirst();
        // A batch usually holds many events of few rules: each rule's destinations are read once.
        const live = inc ? await liveDestinationsOf(inc.rule_id, inc.project_id) : [];
        for (const d of live) {
          if (!inc) break;
          const deliveryId = `dlv_${randomUUID()}`;
          const incidentName = `projects/${inc.project_id}/incidents/${inc.id}`;
          const cond = `${fmt(type === "incident.opened" ? inc.firing_value : inc.last_value)} ${OPS[inc.operator] ?? inc.operator} ${fmt(inc.threshold)}`;
          const where = `${shortVm(inc.vm_name)}${inc.mountpoint ? ` ${inc.mountpoint}` : ""}`;
          const summary =
            type === "incident.opened"
              ? `FIRING: ${inc.rule_display_name} on ${where} (${cond})`
              : type === "incident.repeat"
                ? `STILL FIRING: ${inc.rule_display_name} on ${where} (${cond})`
                : type === "incident.resolved"
                  ? `RESOLVED: ${inc.rule_display_name} on ${where}`
                  : `RETIRED: ${inc.rule_display_name} on ${where} (${inc.retire_reason})`;
          const message: NotificationMessage = {
            type,
            deliveryId,
            timeUnix: Math.floor(e.time / 1000),
            project: `projects/${inc.project_id}`,
            incident: {
              name: incidentName,
              state:
                type === "incident.resolved" ? "RESOLVED" : type === "incident.retired" ? "RETIRED" : "OPEN",
              severity: inc.severity,
              metricId: inc.metric_id,
              operator: inc.operator,
              threshold: inc.threshold,
              ...(inc.firing_value !== null ? { firingValue: inc.firing_value } : {}),
              ...(inc.last_value !== null ? { lastValue: inc.last_value } : {}),
              openTimeUnix: Math.floor(inc.open_time / 1000),
              ...(type === "incident.resolved" || type === "incident.retired"
                ? { closeTimeUnix: Math.floor(e.time / 1000) }
                : {}),
              ...(type === "incident.retired" ? { retireReason: inc.retire_reason } : {}),
            },
            rule: {
              name: `projects/${inc.project_id}/alertRules/${inc.rule_id}`,
              displayName: inc.rule_display_name,
              version: String(inc.rule_version),
            },
            vm: { name: inc.vm_name, ...(inc.mountpoint ? { mountpoint: inc.mountpoint } : {}) },
            summary,
            link: `${deps.baseUrl}/#/incidents/${inc.id}`,
          };
          await tx
            .insertInto("deliveries")
            .values({
              id: deliveryId,
              project_id: inc.project_id,
              destination_id: d.id,
              event_id: e.id,
              incident_id: inc.id,
              event_type: type,
              message: JSON.stringify(message),
              state: "PENDING",
              skip_reason: "",
              create_time: nowMs,
              // The message is stale once the retry period after the transition is over.
              expire_time: e.time + deps.messageTtlMs,
              next_attempt_time: nowMs,
              attempt_count: 0,
              lease_until: null,
              update_time: nowMs,
            })
            .onConflict((oc) => oc.columns(["event_id", "destination_id"]).doNothing())
            .execute();
        }
      }
    }
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
