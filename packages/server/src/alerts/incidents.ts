import type { Db } from "../db/database.ts";
import type { IncidentEventTable, IncidentTable } from "../db/schema.ts";
import { invalidArgument, notFound, SvcError } from "../errors.ts";
import { newId } from "../ids.ts";
import { PROJECT_ID, parseProjectName, parseVmName } from "../inventory/names.ts";
import { clampPageSize, decodePageToken, encodePageToken } from "../pagination.ts";

/**
 * Incidents as people see and handle them: reads, acknowledge, snooze, and the history purge. The
 * evaluator (transitions.ts) opens, resolves and retires incidents; the operations here never change an
 * incident's state, its values or its notification schedule. Callers have already authorized the
 * principal in the incident's project (http/services/incidents.ts).
 */

export const incidentStates = ["OPEN", "RESOLVED", "RETIRED"] as const;
export type IncidentState = (typeof incidentStates)[number];

/** Longest snooze, ms (issue 15: at most 30 days ahead). */
export const MAX_SNOOZE_MS = 30 * 86_400_000;

/** Incident ids are made by the evaluator; accept any short id of letters, digits, `-` and `_`. */
const INCIDENT_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function incidentName(projectId: string, id: string): string {
  return `projects/${projectId}/incidents/${id}`;
}

export function parseIncidentName(name: string, field = "name"): { projectId: string; id: string } {
  const m = /^projects\/([^/]+)\/incidents\/([^/]+)$/.exec(name);
  if (!m || !PROJECT_ID.test(m[1]) || !INCIDENT_ID.test(m[2])) {
    throw invalidArgument(
      field,
      name ? "must be projects/<project_id>/incidents/<id>" : "is required (an incident name)",
    );
  }
  return { projectId: m[1], id: m[2] };
}

function alertRuleName(projectId: string, ruleId: string): string {
  return `projects/${projectId}/alertRules/${ruleId}`;
}

function parseAlertRuleName(name: string, field: string): { projectId: string; id: string } {
  const m = /^projects\/([^/]+)\/alertRules\/([^/]+)$/.exec(name);
  if (!m || !PROJECT_ID.test(m[1]) || !UUID.test(m[2])) {
    throw invalidArgument(field, "must be projects/<project_id>/alertRules/<uuid>");
  }
  return { projectId: m[1], id: m[2] };
}

function userName(userId: string | null): string {
  return userId ? `users/${userId}` : "";
}

function unixSeconds(ms: number | null): bigint {
  return ms === null ? 0n : BigInt(Math.floor(ms / 1000));
}

/** The generated IncidentEvent message's fields. */
export interface IncidentEventView {
  id: string;
  kind: IncidentEventTable["kind"];
  timeUnix: bigint;
  /** users/<id> for human operations, "evaluator" otherwise. */
  actor: string;
  /** JSON object. */
  detail: string;
}

/** The generated Incident message's fields: times in Unix seconds (0 = absent), names whole. */
export interface IncidentView {
  name: string;
  rule: string;
  ruleVersion: string;
  ruleDisplayName: string;
  severity: string;
  metricId: string;
  operator: string;
  threshold: number;
  vmName: string;
  mountpoint: string;
  state: IncidentState;
  retireReason: string;
  openTimeUnix: bigint;
  closeTimeUnix: bigint;
  firingValue?: number;
  lastValue?: number;
  noData: boolean;
  evaluationError: boolean;
  acknowledgedBy: string;
  acknowledgeTimeUnix: bigint;
  snoozeUntilUnix: bigint;
  snoozedBy: string;
  nextNotifyTimeUnix: bigint;
  events: IncidentEventView[];
}

/** A row (and, for GetIncident, its events in time order) as the Incident message. */
export function incidentView(r: IncidentTable, events: readonly IncidentEventTable[] = []): IncidentView {
  return {
    name: incidentName(r.project_id, r.id),
    rule: alertRuleName(r.project_id, r.rule_id),
    ruleVersion: String(r.rule_version),
    ruleDisplayName: r.rule_display_name,
    severity: r.severity,
    metricId: r.metric_id,
    operator: r.operator,
    threshold: r.threshold,
    vmName: r.vm_name,
    mountpoint: r.mountpoint,
    state: r.state,
    retireReason: r.retire_reason,
    openTimeUnix: unixSeconds(r.open_time),
    closeTimeUnix: unixSeconds(r.close_time),
    firingValue: r.firing_value ?? undefined,
    lastValue: r.last_value ?? undefined,
    noData: Boolean(r.no_data),
    evaluationError: Boolean(r.evaluation_error),
    acknowledgedBy: userName(r.ack_user_id),
    acknowledgeTimeUnix: unixSeconds(r.ack_time),
    snoozeUntilUnix: unixSeconds(r.snooze_until),
    snoozedBy: userName(r.snooze_user_id),
    nextNotifyTimeUnix: unixSeconds(r.next_notify_time),
    events: events.map((e) => ({
      id: e.id,
      kind: e.kind,
      timeUnix: unixSeconds(e.time),
      actor: e.actor,
      detail: e.detail,
    })),
  };
}

export interface ListIncidentsInput {
  projectName: string;
  /** OPEN, RESOLVED or RETIRED; "" = all. */
  state: string;
  /** projects/<p>/alertRules/<uuid> of the same project; "" = all. */
  rule: string;
  /** Full VM name of the same project; "" = all. */
  vmName: string;
  pageSize: number;
  pageToken: string;
}

/**
 * One page of the project's incidents, newest first (open time, then id, both descending), without
 * events. The page token is signed and bound to the project and the filters: a token of another
 * listing, project or filter set is refused with INVALID_PAGE_TOKEN.
 */
export async function listIncidents(
  db: Db,
  pageKey: Buffer,
  req: ListIncidentsInput,
): Promise<{ incidents: IncidentView[]; nextPageToken?: string }> {
  const projectId = parseProjectName(req.projectName);
  if (req.state && !(incidentStates as readonly string[]).includes(req.state)) {
    throw invalidArgument("state", `must be one of ${incidentStates.join(", ")} (or empty for all)`);
  }
  let ruleId = "";
  if (req.rule) {
    const rule = parseAlertRuleName(req.rule, "rule");
    if (rule.projectId !== projectId) throw invalidArgument("rule", `must be a rule of ${req.projectName}`);
    ruleId = rule.id;
  }
  if (req.vmName && parseVmName(req.vmName, "vmName").projectId !== projectId) {
    throw invalidArgument("vmName", `must be a VM of ${req.projectName}`);
  }
  if (req.pageSize < 0) throw invalidArgument("pageSize", "must not be negative (0 means 50)");
  const size = clampPageSize(req.pageSize);
  const scope = `ListIncidents:${JSON.stringify([projectId, req.state, ruleId, req.vmName])}`;
  const after = req.pageToken ? parsePosition(decodePageToken(pageKey, scope, req.pageToken)) : undefined;

  let q = db.selectFrom("incidents").selectAll().where("project_id", "=", projectId);
  if (req.state) q = q.where("state", "=", req.state as IncidentState);
  if (ruleId) q = q.where("rule_id", "=", ruleId);
  if (req.vmName) q = q.where("vm_name", "=", req.vmName);
  if (after) {
    q = q.where((eb) =>
      eb.or([
        eb("open_time", "<", after.openTime),
        eb.and([eb("open_time", "=", after.openTime), eb("id", "<", after.id)]),
      ]),
    );
  }
  const rows = await q
    .orderBy("open_time", "desc")
    .orderBy("id", "desc")
    .limit(size + 1)
    .execute();
  const page = rows.slice(0, size);
  const incidents = page.map((r) => incidentView(r));
  const last = page[page.length - 1];
  return rows.length > size && last
    ? { incidents, nextPageToken: encodePageToken(pageKey, scope, `${last.open_time}/${last.id}`) }
    : { incidents };
}

function parsePosition(p: string): { openTime: number; id: string } {
  const m = /^(\d+)\/(.+)$/.exec(p);
  if (!m) {
    throw invalidArgument("pageToken", "is not a token from a previous response of this listing", {
      reason: "INVALID_PAGE_TOKEN",
    });
  }
  return { openTime: Number(m[1]), id: m[2] };
}

/** The incident `name` with its project and id; NOT_FOUND when there is none. */
async function readNamed(
  db: Db,
  name: string,
): Promise<{ projectId: string; id: string; row: IncidentTable }> {
  const { projectId, id } = parseIncidentName(name);
  const row = await readIncident(db, projectId, id);
  if (!row) throw notFound(name);
  return { projectId, id, row };
}

/** The incident with its events, oldest first (time, then id). */
export async function getIncident(db: Db, name: string): Promise<IncidentView> {
  const { projectId, id, row } = await readNamed(db, name);
  const events = await db
    .selectFrom("incident_events")
    .selectAll()
    .where("incident_id", "=", id)
    .where("project_id", "=", projectId)
    .orderBy("time", "asc")
    .orderBy("id", "asc")
    .execute();
  return incidentView(row, events);
}

function readIncident(db: Db, projectId: string, id: string): Promise<IncidentTable | undefined> {
  return db
    .selectFrom("incidents")
    .selectAll()
    .where("project_id", "=", projectId)
    .where("id", "=", id)
    .executeTakeFirst();
}

/** failed_precondition / INCIDENT_CLOSED: human operations apply to open incidents only. */
function closed(name: string, state: string, what: string): SvcError {
  return new SvcError(
    "failed_precondition",
    `name: ${name} is ${state}; only an open incident can be ${what}`,
    {
      reason: "INCIDENT_CLOSED",
      metadata: { state },
    },
  );
}

type HumanEventKind = "ACKNOWLEDGED" | "SNOOZED" | "UNSNOOZED";

/** An UPDATE of the incident `row` that applies only while it is open. */
function updateWhileOpen(tx: Db, row: IncidentTable) {
  return tx
    .updateTable("incidents")
    .where("id", "=", row.id)
    .where("project_id", "=", row.project_id)
    .where("state", "=", "OPEN");
}

/**
 * Runs `update` (completing updateWhileOpen of the row: what to set, any further condition) and, when it
 * changed the row, writes the event, both in one transaction. Returns whether the row changed.
 */
async function updateWithEvent(
  db: Db,
  row: IncidentTable,
  kind: HumanEventKind,
  userId: string,
  nowMs: number,
  detail: Record<string, unknown>,
  update: (q: ReturnType<typeof updateWhileOpen>) => Promise<{ numUpdatedRows: bigint }>,
): Promise<boolean> {
  return db.transaction().execute(async (tx) => {
    const res = await update(updateWhileOpen(tx, row));
    if (Number(res.numUpdatedRows) !== 1) return false;
    await tx
      .insertInto("incident_events")
      .values({
        id: newId(),
        project_id: row.project_id,
        incident_id: row.id,
        rule_id: row.rule_id,
        kind,
        time: nowMs,
        actor: `users/${userId}`,
        detail: JSON.stringify(detail),
      })
      .execute();
    return true;
  });
}

/**
 * Records that `userId` paid attention to the incident at `nowMs`, with an ACKNOWLEDGED event. Changes
 * nothing else: state, values, snooze and notification times stay as they are. Only an open incident
 * can be acknowledged (INCIDENT_CLOSED otherwise).
 */
export async function acknowledgeIncident(
  db: Db,
  userId: string,
  name: string,
  nowMs: number,
): Promise<IncidentView> {
  const { projectId, id, row } = await readNamed(db, name);
  // Acknowledging twice keeps the first acknowledgement (who and when) and writes no second event, so a
  // retried call, or a second person arriving later, changes nothing. This is checked before the state:
  // a retry after the incident closed still answers with the incident, not an error.
  if (row.ack_user_id !== null) return getIncident(db, name);
  if (row.state !== "OPEN") throw closed(name, row.state, "acknowledged");
  const changed = await updateWithEvent(db, row, "ACKNOWLEDGED", userId, nowMs, {}, (q) =>
    q
      .set({ ack_user_id: userId, ack_time: nowMs, update_time: nowMs })
      .where("ack_user_id", "is", null)
      .executeTakeFirst(),
  );
  if (!changed) {
    // Someone acknowledged it, or the evaluator closed it, between the read and the update.
    const now = await readIncident(db, projectId, id);
    if (now && now.ack_user_id === null && now.state !== "OPEN")
      throw closed(name, now.state, "acknowledged");
  }
  return getIncident(db, name);
}

/**
 * Suppresses the incident's notifications until `untilMs` (future, at most 30 days ahead), with a
 * SNOOZED event whose detail carries `snoozeUntilUnix`. Evaluation, state and notification times are
 * unaffected; the notifier rechecks the snooze before sending. Snoozing again replaces the time (a new
 * event); the same time again is an exact retry and changes nothing. Open incidents only.
 */
export async function snoozeIncident(
  db: Db,
  userId: string,
  name: string,
  untilMs: number,
  nowMs: number,
): Promise<IncidentView> {
  const { projectId, id } = parseIncidentName(name);
  if (!Number.isFinite(untilMs) || untilMs === 0) {
    throw invalidArgument("snoozeUntilUnix", "is required (Unix seconds in the future)");
  }
  if (untilMs <= nowMs) throw invalidArgument("snoozeUntilUnix", "must be in the future");
  if (untilMs > nowMs + MAX_SNOOZE_MS) {
    throw invalidArgument("snoozeUntilUnix", "must be at most 30 days ahead");
  }
  const row = await readIncident(db, projectId, id);
  if (!row) throw notFound(name);
  if (row.state !== "OPEN") throw closed(name, row.state, "snoozed");
  if (row.snooze_until === untilMs && row.snooze_user_id === userId) return getIncident(db, name);
  const changed = await updateWithEvent(
    db,
    row,
    "SNOOZED",
    userId,
    nowMs,
    { snoozeUntilUnix: Math.floor(untilMs / 1000) },
    (q) => q.set({ snooze_until: untilMs, snooze_user_id: userId, update_time: nowMs }).executeTakeFirst(),
  );
  if (!changed) {
    const now = await readIncident(db, projectId, id);
    if (now && now.state !== "OPEN") throw closed(name, now.state, "snoozed");
  }
  return getIncident(db, name);
}

/**
 * Clears the incident's snooze, with an UNSNOOZED event whose detail carries the cleared
 * `snoozeUntilUnix`. An incident without a snooze is answered unchanged, without an event. Open
 * incidents only.
 */
export async function unsnoozeIncident(
  db: Db,
  userId: string,
  name: string,
  nowMs: number,
): Promise<IncidentView> {
  const { projectId, id, row } = await readNamed(db, name);
  if (row.snooze_until === null) return getIncident(db, name);
  if (row.state !== "OPEN") throw closed(name, row.state, "unsnoozed");
  const changed = await updateWithEvent(
    db,
    row,
    "UNSNOOZED",
    userId,
    nowMs,
    { snoozeUntilUnix: Math.floor(row.snooze_until / 1000) },
    (q) =>
      q
        .set({ snooze_until: null, snooze_user_id: null, update_time: nowMs })
        .where("snooze_until", "is not", null)
        .executeTakeFirst(),
  );
  if (!changed) {
    const now = await readIncident(db, projectId, id);
    if (now && now.snooze_until !== null && now.state !== "OPEN") throw closed(name, now.state, "unsnoozed");
  }
  return getIncident(db, name);
}

/**
 * Deletes resolved and retired incidents closed before `nowMs - retentionMs`, and their events, in one
 * transaction. Open incidents are kept whatever their age.
 */
export async function purgeIncidentHistory(
  db: Db,
  nowMs: number,
  retentionMs: number,
): Promise<{ incidents: number; events: number }> {
  const cutoff = nowMs - retentionMs;
  return db.transaction().execute(async (tx) => {
    const old = tx
      .selectFrom("incidents")
      .select("id")
      .where("state", "in", ["RESOLVED", "RETIRED"])
      .where("close_time", "<", cutoff);
    const events = await tx.deleteFrom("incident_events").where("incident_id", "in", old).executeTakeFirst();
    const incidents = await tx
      .deleteFrom("incidents")
      .where("state", "in", ["RESOLVED", "RETIRED"])
      .where("close_time", "<", cutoff)
      .executeTakeFirst();
    return { incidents: Number(incidents.numDeletedRows), events: Number(events.numDeletedRows) };
  });
}
