import { randomUUID } from "node:crypto";
import type { Db } from "../db/database.ts";
import type { IncidentEventTable, IncidentTable } from "../db/schema.ts";
import type { RuleSpec } from "./spec.ts";

/**
 * Incident transitions written by the evaluator and by rule deletion, each inside the caller's
 * transaction together with the instance row, so a restart never sees one without the other. Every
 * transition leaves a durable event row; notifications are delivered from those rows.
 */

export const EVALUATOR_ACTOR = "evaluator";

export async function insertEvent(
  tx: Db,
  e: Omit<IncidentEventTable, "id" | "detail" | "fanout_time"> & { detail?: Record<string, unknown> },
): Promise<void> {
  await tx
    .insertInto("incident_events")
    .values({ ...e, id: randomUUID(), detail: JSON.stringify(e.detail ?? {}), fanout_time: null })
    .execute();
}

export interface OpenIncident {
  readonly projectId: string;
  readonly ruleId: string;
  readonly ruleVersion: number;
  readonly spec: RuleSpec;
  readonly instanceKey: string;
  readonly vmName: string;
  readonly mountpoint: string;
  readonly value: number | null;
  readonly atMs: number;
}

/** Opens the incident of a firing episode; returns its id. */
export async function openIncident(tx: Db, o: OpenIncident): Promise<string> {
  const id = randomUUID();
  const repeatMs = o.spec.repeatIntervalSeconds * 1000;
  const row: IncidentTable = {
    id,
    project_id: o.projectId,
    rule_id: o.ruleId,
    rule_version: o.ruleVersion,
    instance_key: o.instanceKey,
    vm_name: o.vmName,
    mountpoint: o.mountpoint,
    state: "OPEN",
    retire_reason: "",
    rule_display_name: o.spec.displayName,
    severity: o.spec.severity,
    metric_id: o.spec.metricId,
    operator: o.spec.operator,
    threshold: o.spec.threshold,
    open_time: o.atMs,
    close_time: null,
    firing_value: o.value,
    last_value: o.value,
    no_data: 0,
    evaluation_error: 0,
    ack_user_id: null,
    ack_time: null,
    snooze_until: null,
    snooze_user_id: null,
    repeat_interval_ms: repeatMs,
    next_notify_time: repeatMs > 0 ? o.atMs + repeatMs : null,
    update_time: o.atMs,
  };
  await tx.insertInto("incidents").values(row).execute();
  await insertEvent(tx, {
    project_id: o.projectId,
    incident_id: id,
    rule_id: o.ruleId,
    kind: "OPENED",
    time: o.atMs,
    actor: EVALUATOR_ACTOR,
    detail: { value: o.value, threshold: o.spec.threshold, operator: o.spec.operator },
  });
  return id;
}

/** Resolves an open incident: only after an observed recovery (the evaluator's `false`). */
export async function resolveIncident(
  tx: Db,
  id: string,
  projectId: string,
  ruleId: string,
  value: number | null,
  atMs: number,
): Promise<void> {
  const r = await tx
    .updateTable("incidents")
    .set({
      state: "RESOLVED",
      close_time: atMs,
      last_value: value,
      no_data: 0,
      evaluation_error: 0,
      next_notify_time: null,
      update_time: atMs,
    })
    .where("id", "=", id)
    .where("state", "=", "OPEN")
    .executeTakeFirst();
  if (Number(r.numUpdatedRows) === 0) return;
  await insertEvent(tx, {
    project_id: projectId,
    incident_id: id,
    rule_id: ruleId,
    kind: "RESOLVED",
    time: atMs,
    actor: EVALUATOR_ACTOR,
    detail: { value },
  });
}

/** Retires open incidents (of a rule, or of some instances of it) with a reason; no recovery is claimed. */
export async function retireIncidents(
  tx: Db,
  projectId: string,
  ruleId: string,
  reason: string,
  atMs: number,
  actor: string,
  instanceKeys?: readonly string[],
): Promise<number> {
  if (instanceKeys && instanceKeys.length === 0) return 0;
  let q = tx.selectFrom("incidents").select("id").where("rule_id", "=", ruleId).where("state", "=", "OPEN");
  if (instanceKeys) q = q.where("instance_key", "in", instanceKeys);
  const open = await q.execute();
  for (const { id } of open) {
    await tx
      .updateTable("incidents")
      .set({
        state: "RETIRED",
        retire_reason: reason,
        close_time: atMs,
        next_notify_time: null,
        update_time: atMs,
      })
      .where("id", "=", id)
      .execute();
    await insertEvent(tx, {
      project_id: projectId,
      incident_id: id,
      rule_id: ruleId,
      kind: "RETIRED",
      time: atMs,
      actor,
      detail: { reason },
    });
  }
  return open.length;
}

/** Retires a rule's live instances (all, or those keys) with a reason, and their open incidents. */
export async function retireInstances(
  tx: Db,
  projectId: string,
  ruleId: string,
  reason: string,
  atMs: number,
  actor: string,
  instanceKeys?: readonly string[],
): Promise<{ instances: number; incidents: number }> {
  if (instanceKeys && instanceKeys.length === 0) return { instances: 0, incidents: 0 };
  let q = tx
    .updateTable("alert_instances")
    .set({ state: "RETIRED", retire_reason: reason, state_since: atMs, update_time: atMs, incident_id: null })
    .where("rule_id", "=", ruleId)
    .where("state", "!=", "RETIRED");
  if (instanceKeys) q = q.where("instance_key", "in", instanceKeys);
  const r = await q.executeTakeFirst();
  const incidents = await retireIncidents(tx, projectId, ruleId, reason, atMs, actor, instanceKeys);
  return { instances: Number(r.numUpdatedRows), incidents };
}
