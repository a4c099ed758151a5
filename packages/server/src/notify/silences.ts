import { randomBytes } from "node:crypto";
import { noteCreated } from "../call-notes.ts";
import type { Db } from "../db/database.ts";
import type { SilenceTable } from "../db/schema.ts";
import { invalidArgument, notFound, SvcError } from "../errors.ts";
import { checkFreeText, MAX_COMMENT } from "../free-text.ts";
import { attributionOf } from "../iam/actor.ts";
import { bodyHash, findReplay, recordResult, validateRequestId } from "../iam/idempotency.ts";
import { authorizeProject, type Principal, projectOfRequest } from "../iam/principal.ts";
import { PROJECT_ID, parseProjectName, parseVmName } from "../inventory/names.ts";
import { clampPageSize, decodePageToken, encodePageToken } from "../pagination.ts";
import { defaultNotifyOptions } from "./options.ts";

/**
 * Silences (issue 30): a scheduled window [start, end) that mutes the notifications of matching rules
 * and/or VMs, as Alertmanager's silences do. Nothing here touches evaluation or incidents: the dispatcher
 * reads the project's silences with the rest of its recheck and skips a matching delivery (SILENCED).
 * Rules are read as rows, so notify/ still imports nothing of alerts/.
 */

export const silenceStates = ["PENDING", "ACTIVE", "EXPIRED"] as const;
export type SilenceState = (typeof silenceStates)[number];

/** Longest window, ms. */
export const MAX_SILENCE_MS = 90 * 86_400_000;
/**
 * Longest window a key or CI token may set, ms (issue 41): automation silences a deployment or a
 * maintenance, not a quarter; a longer silence is a person's decision.
 */
export const MAX_CREDENTIAL_SILENCE_MS = 86_400_000;
/** How far ahead a silence may start, ms. */
export const MAX_SILENCE_LEAD_MS = 365 * 86_400_000;
const MAX_MATCHERS = 100;
const SILENCE_ID = /^[a-f0-9]{20}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export interface SilencesDeps {
  readonly db: Db;
  readonly now: () => number;
  readonly pageKey: Buffer;
  /** Silences per project not yet expired (SVC_MAX_SILENCES); the notify options' default when unset. */
  readonly maxPerProject?: number;
}

export function silenceName(projectId: string, id: string): string {
  return `projects/${projectId}/silences/${id}`;
}

export function parseSilenceName(name: string, field = "name"): { projectId: string; id: string } {
  const m = /^projects\/([^/]+)\/silences\/([^/]+)$/.exec(name);
  if (!m || !PROJECT_ID.test(m[1]) || !SILENCE_ID.test(m[2]))
    throw invalidArgument(field, name ? "must be projects/<project_id>/silences/<id>" : "is required");
  return { projectId: m[1], id: m[2] };
}

/** The generated Silence message's fields. */
export interface SilenceView {
  name: string;
  startTimeUnix: bigint;
  endTimeUnix: bigint;
  comment: string;
  ruleNames: string[];
  vmNames: string[];
  creator: string;
  updatedBy: string;
  state: SilenceState;
  createTimeUnix: bigint;
  updateTimeUnix: bigint;
  version: string;
  replayed: boolean;
}

const sec = (ms: number) => BigInt(Math.floor(ms / 1000));

export function silenceState(s: Pick<SilenceTable, "start_time" | "end_time">, atMs: number): SilenceState {
  if (s.end_time <= atMs) return "EXPIRED";
  return s.start_time > atMs ? "PENDING" : "ACTIVE";
}

function view(s: SilenceTable, nowMs: number, replayed = false): SilenceView {
  return {
    name: silenceName(s.project_id, s.id),
    startTimeUnix: sec(s.start_time),
    endTimeUnix: sec(s.end_time),
    comment: s.comment,
    ruleNames: (JSON.parse(s.rule_ids) as string[]).map((r) => `projects/${s.project_id}/alertRules/${r}`),
    vmNames: JSON.parse(s.vm_names) as string[],
    creator: s.creator,
    updatedBy: s.updated_by,
    state: silenceState(s, nowMs),
    createTimeUnix: sec(s.create_time),
    updateTimeUnix: sec(s.update_time),
    version: String(s.version),
    replayed,
  };
}

type SilenceMatch = Pick<SilenceTable, "start_time" | "end_time" | "rule_ids" | "vm_names">;

/** Whether the silence mutes a notification of `ruleId` about `vmName` at `atMs`. */
export function silenceMatches(s: SilenceMatch, ruleId: string, vmName: string, atMs: number): boolean {
  if (!(s.start_time <= atMs && atMs < s.end_time)) return false;
  const rules = JSON.parse(s.rule_ids) as string[];
  const vms = JSON.parse(s.vm_names) as string[];
  return (rules.length === 0 || rules.includes(ruleId)) && (vms.length === 0 || vms.includes(vmName));
}

/**
 * THE rule of silences (docs/alerts.md#silences), as Alertmanager's: every notification of an incident
 * (opened, repeat, acknowledged, resolved, retired) is muted when a silence matching its rule and VM is
 * active at the time it would be sent; nothing else counts (when the incident opened, what was sent
 * before). Returns the silences muting the incident at `atMs`, oldest first. The dispatcher skips a
 * delivery (SILENCED) when this is not empty at its attempt, and every incident the API answers carries
 * it as `silencedBy` at the answer's time (the console's page, list and VM list show that field), so all
 * of them say the same thing.
 */
export function silencesMutingIncident<S extends SilenceMatch & Pick<SilenceTable, "create_time" | "id">>(
  silences: readonly S[],
  incident: { readonly ruleId: string; readonly vmName: string },
  atMs: number,
): S[] {
  return silences
    .filter((s) => silenceMatches(s, incident.ruleId, incident.vmName, atMs))
    .sort((a, b) => a.create_time - b.create_time || a.id.localeCompare(b.id));
}

/** Silences of these projects in force at `atMs` (one statement whatever their number). */
export async function silencesInForce(db: Db, projectIds: readonly string[], atMs: number) {
  if (projectIds.length === 0) return [];
  return db
    .selectFrom("silences")
    .selectAll()
    .where("project_id", "in", [...projectIds])
    .where("end_time", ">", atMs)
    .where("start_time", "<=", atMs)
    .execute();
}

/**
 * Housekeeping: deletes the silences that ended before `beforeMs`. Ended silences are history, kept as
 * long as the deliveries they skipped (deliveries.ts purgeDeliveryHistory calls this in its transaction).
 */
export async function purgeEndedSilences(db: Db, beforeMs: number): Promise<void> {
  await db.deleteFrom("silences").where("end_time", "<", beforeMs).execute();
}

/**
 * `silencedBy` of each of a project's incidents at `atMs` (names of the silences muting it, by
 * {@link silencesMutingIncident}), in one read whatever their number.
 */
export async function silencedBy(
  db: Db,
  projectId: string,
  incidents: readonly { readonly ruleId: string; readonly vmName: string }[],
  atMs: number,
): Promise<string[][]> {
  const inForce = incidents.length > 0 ? await silencesInForce(db, [projectId], atMs) : [];
  return incidents.map((i) =>
    silencesMutingIncident(inForce, i, atMs).map((s) => silenceName(s.project_id, s.id)),
  );
}

export interface SilenceInput {
  startTimeUnix: bigint;
  endTimeUnix: bigint;
  comment: string;
  ruleNames: readonly string[];
  vmNames: readonly string[];
}

interface CheckedSilence {
  startMs: number;
  endMs: number;
  comment: string;
  ruleIds: string[];
  vmNames: string[];
}

/**
 * Checks a silence's fields, naming the field in each refusal. A start of 0 or in the past is `now`
 * (`keepStartMs` instead when the silence being edited has already started).
 */
async function checkInput(
  db: Db,
  p: Principal,
  projectId: string,
  input: SilenceInput,
  nowMs: number,
  keepStartMs?: number,
): Promise<CheckedSilence> {
  if (!input.comment.trim())
    throw invalidArgument("comment", "is required (why the notifications are muted)");
  const comment = checkFreeText("comment", input.comment, { max: MAX_COMMENT, multiline: true });
  // int64 seconds beyond 2^53 ms are far past every limit below and refused as such.
  const reqStart = Number(input.startTimeUnix) * 1000;
  const endMs = Number(input.endTimeUnix) * 1000;
  const startMs = reqStart <= nowMs ? (keepStartMs ?? nowMs) : reqStart;
  if (startMs > nowMs + MAX_SILENCE_LEAD_MS)
    throw invalidArgument("startTimeUnix", "must be at most 365 days ahead");
  if (!input.endTimeUnix) throw invalidArgument("endTimeUnix", "is required (Unix seconds)");
  if (endMs <= startMs)
    throw invalidArgument(
      "endTimeUnix",
      `must be after the start (${new Date(startMs).toISOString()}); a silence ending before it starts mutes nothing`,
    );
  if (endMs - startMs > MAX_SILENCE_MS)
    throw invalidArgument("endTimeUnix", "must be at most 90 days after the start");
  if (p.kind !== "HUMAN_SESSION" && endMs - startMs > MAX_CREDENTIAL_SILENCE_MS)
    throw invalidArgument(
      "endTimeUnix",
      `must be at most 24 hours after the start (${new Date(startMs).toISOString()}) for a key or CI token; a longer silence is made by a person`,
    );
  if (input.ruleNames.length === 0 && input.vmNames.length === 0)
    throw invalidArgument(
      "ruleNames",
      "a silence needs at least one matcher: name rules (ruleNames) and/or VMs (vmNames)",
    );
  if (input.ruleNames.length > MAX_MATCHERS)
    throw invalidArgument("ruleNames", `must hold at most ${MAX_MATCHERS} rules`);
  if (input.vmNames.length > MAX_MATCHERS)
    throw invalidArgument("vmNames", `must hold at most ${MAX_MATCHERS} VMs`);
  const ruleIds: string[] = [];
  for (const [i, n] of input.ruleNames.entries()) {
    const field = `ruleNames[${i}]`;
    const m = /^projects\/([^/]+)\/alertRules\/([^/]+)$/.exec(n);
    if (!m || !UUID.test(m[2]))
      throw invalidArgument(field, "must be projects/<project_id>/alertRules/<uuid>");
    if (m[1] !== projectId) throw invalidArgument(field, `${n} belongs to another project`);
    if (ruleIds.includes(m[2])) throw invalidArgument(field, `${n} is listed twice`);
    const rule = await db
      .selectFrom("alert_rules")
      .select("id")
      .where("id", "=", m[2])
      .where("project_id", "=", projectId)
      .where("delete_time", "is", null)
      .executeTakeFirst();
    if (!rule) throw invalidArgument(field, `${n} names no rule of the project`);
    ruleIds.push(m[2]);
  }
  const vmNames: string[] = [];
  for (const [i, n] of input.vmNames.entries()) {
    const field = `vmNames[${i}]`;
    const ref = parseVmName(n, field);
    if (ref.projectId !== projectId) throw invalidArgument(field, `${n} belongs to another project`);
    if (vmNames.includes(n)) throw invalidArgument(field, `${n} is listed twice`);
    const vm = await db
      .selectFrom("vms")
      .select("vm_id")
      .where("project_id", "=", projectId)
      .where("location", "=", ref.location)
      .where("vm_id", "=", ref.vmId)
      .where("state", "!=", "DELETED")
      .executeTakeFirst();
    if (!vm) throw invalidArgument(field, `${n} names no VM of the project`);
    vmNames.push(n);
  }
  return { startMs, endMs, comment, ruleIds: ruleIds.sort(), vmNames: vmNames.sort() };
}

async function load(db: Db, projectId: string, id: string): Promise<SilenceTable> {
  const s = await db
    .selectFrom("silences")
    .selectAll()
    .where("project_id", "=", projectId)
    .where("id", "=", id)
    .executeTakeFirst();
  if (!s) throw notFound(silenceName(projectId, id));
  return s;
}

export interface CreateSilenceInput extends SilenceInput {
  projectName: string;
  requestId: string;
}

export async function createSilence(
  deps: SilencesDeps,
  p: Principal,
  input: CreateSilenceInput,
): Promise<SilenceView> {
  const { db } = deps;
  const nowMs = deps.now();
  const projectId = projectOfRequest(p, input.projectName);
  await authorizeProject(db, p, projectId, "silences.write");
  validateRequestId(input.requestId);
  const scope = `silences:${projectId}`;
  const hash = bodyHash({
    projectId,
    start: String(input.startTimeUnix),
    end: String(input.endTimeUnix),
    comment: input.comment,
    ruleNames: input.ruleNames,
    vmNames: input.vmNames,
  });
  const replay = await findReplay<{ id: string }>(db, scope, input.requestId, hash);
  if (replay) {
    noteCreated(silenceName(projectId, replay.id));
    return view(await load(db, projectId, replay.id), nowMs, true);
  }
  const c = await checkInput(db, p, projectId, input, nowMs);
  await checkSilenceLimit(
    db,
    projectId,
    nowMs,
    deps.maxPerProject ?? defaultNotifyOptions.maxSilencesPerProject,
  );
  const id = randomBytes(10).toString("hex");
  noteCreated(silenceName(projectId, id));
  const actor = attributionOf(p);
  const row: SilenceTable = {
    id,
    project_id: projectId,
    start_time: c.startMs,
    end_time: c.endMs,
    comment: c.comment,
    rule_ids: JSON.stringify(c.ruleIds),
    vm_names: JSON.stringify(c.vmNames),
    creator: actor,
    updated_by: actor,
    version: 1,
    create_time: nowMs,
    update_time: nowMs,
  };
  await db.transaction().execute(async (tx) => {
    await recordResult(tx, scope, input.requestId, hash, { id }, nowMs);
    await tx.insertInto("silences").values(row).execute();
  });
  return view(row, nowMs);
}

/** Pending and active silences count against the project's limit, as rules and destinations do. */
async function checkSilenceLimit(db: Db, projectId: string, nowMs: number, limit: number): Promise<void> {
  const { n } = await db
    .selectFrom("silences")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where("project_id", "=", projectId)
    .where("end_time", ">", nowMs)
    .executeTakeFirstOrThrow();
  if (Number(n) >= limit)
    throw new SvcError(
      "failed_precondition",
      `the project has ${n} silences not yet expired, the limit is ${limit}; expire one first`,
      { reason: "SILENCE_LIMIT_EXCEEDED", metadata: { limit: String(limit), count: String(n) } },
    );
}

export async function getSilence(deps: SilencesDeps, p: Principal, name: string): Promise<SilenceView> {
  const { projectId, id } = parseSilenceName(name);
  await authorizeProject(deps.db, p, projectId, "monitoring.read");
  return view(await load(deps.db, projectId, id), deps.now());
}

export interface ListSilencesInput {
  projectName: string;
  state: string;
  pageSize: number;
  pageToken: string;
}

/** One page of the project's silences, newest first (create time, then id); optionally of one state. */
export async function listSilences(
  deps: SilencesDeps,
  p: Principal,
  req: ListSilencesInput,
): Promise<{ silences: SilenceView[]; nextPageToken?: string }> {
  const { db } = deps;
  const nowMs = deps.now();
  const projectId = parseProjectName(req.projectName, "projectName");
  await authorizeProject(db, p, projectId, "monitoring.read");
  if (req.state && !(silenceStates as readonly string[]).includes(req.state))
    throw invalidArgument("state", `must be one of ${silenceStates.join(", ")} (or empty for all)`);
  if (req.pageSize < 0) throw invalidArgument("pageSize", "must not be negative (0 means 50)");
  const size = clampPageSize(req.pageSize);
  const scope = `ListSilences:${JSON.stringify([projectId, req.state])}`;
  let after: { time: number; id: string } | undefined;
  if (req.pageToken) {
    const m = /^(\d+)\/([a-f0-9]+)$/.exec(decodePageToken(deps.pageKey, scope, req.pageToken));
    if (!m) throw invalidArgument("pageToken", "is not a token from a previous response of this listing");
    after = { time: Number(m[1]), id: m[2] };
  }
  let q = db.selectFrom("silences").selectAll().where("project_id", "=", projectId);
  if (req.state === "EXPIRED") q = q.where("end_time", "<=", nowMs);
  if (req.state === "ACTIVE") q = q.where("end_time", ">", nowMs).where("start_time", "<=", nowMs);
  if (req.state === "PENDING") q = q.where("start_time", ">", nowMs);
  if (after) {
    const a = after;
    q = q.where((eb) =>
      eb.or([eb("create_time", "<", a.time), eb.and([eb("create_time", "=", a.time), eb("id", "<", a.id)])]),
    );
  }
  const rows = await q
    .orderBy("create_time", "desc")
    .orderBy("id", "desc")
    .limit(size + 1)
    .execute();
  const page = rows.slice(0, size);
  const silences = page.map((s) => view(s, nowMs));
  const last = page[page.length - 1];
  return rows.length > size && last
    ? { silences, nextPageToken: encodePageToken(deps.pageKey, scope, `${last.create_time}/${last.id}`) }
    : { silences };
}

function expired(name: string, endMs: number): SvcError {
  return new SvcError(
    "failed_precondition",
    `name: ${name} expired at ${new Date(endMs).toISOString()}; create a new silence instead`,
    { reason: "SILENCE_EXPIRED", metadata: { endTimeUnix: String(Math.floor(endMs / 1000)) } },
  );
}

function versionConflict(current: number): SvcError {
  return new SvcError(
    "aborted",
    `expectedVersion: the silence's current version is ${current}: read it and retry with expectedVersion "${current}"`,
    { reason: "VERSION_CONFLICT", metadata: { currentVersion: String(current) } },
  );
}

export interface UpdateSilenceInput extends SilenceInput {
  name: string;
  expectedVersion: string;
}

/** Replaces the window, comment and matchers of a silence that has not expired. */
export async function updateSilence(
  deps: SilencesDeps,
  p: Principal,
  input: UpdateSilenceInput,
): Promise<SilenceView> {
  const { db } = deps;
  const nowMs = deps.now();
  const { projectId, id } = parseSilenceName(input.name);
  await authorizeProject(db, p, projectId, "silences.write");
  const s = await load(db, projectId, id);
  if (input.expectedVersion && input.expectedVersion !== String(s.version)) throw versionConflict(s.version);
  if (s.end_time <= nowMs) throw expired(input.name, s.end_time);
  const c = await checkInput(
    db,
    p,
    projectId,
    input,
    nowMs,
    s.start_time <= nowMs ? s.start_time : undefined,
  );
  const res = await db
    .updateTable("silences")
    .set({
      start_time: c.startMs,
      end_time: c.endMs,
      comment: c.comment,
      rule_ids: JSON.stringify(c.ruleIds),
      vm_names: JSON.stringify(c.vmNames),
      updated_by: attributionOf(p),
      version: s.version + 1,
      update_time: nowMs,
    })
    .where("id", "=", id)
    .where("version", "=", s.version)
    .executeTakeFirst();
  if (Number(res.numUpdatedRows) !== 1) throw versionConflict((await load(db, projectId, id)).version);
  return view(await load(db, projectId, id), nowMs);
}

/** Ends the silence now; an expired one is answered unchanged (an exact retry changes nothing). */
export async function expireSilence(deps: SilencesDeps, p: Principal, name: string): Promise<SilenceView> {
  const { db } = deps;
  const nowMs = deps.now();
  const { projectId, id } = parseSilenceName(name);
  await authorizeProject(db, p, projectId, "silences.write");
  const s = await load(db, projectId, id);
  if (s.end_time <= nowMs) return view(s, nowMs);
  await db
    .updateTable("silences")
    .set({
      start_time: Math.min(s.start_time, nowMs),
      end_time: nowMs,
      updated_by: attributionOf(p),
      version: s.version + 1,
      update_time: nowMs,
    })
    .where("id", "=", id)
    .where("end_time", ">", nowMs)
    .execute();
  return view(await load(db, projectId, id), nowMs);
}
