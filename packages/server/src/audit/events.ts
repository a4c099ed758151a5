import { sql } from "kysely";
import { type Db, lazyCommit } from "../db/database.ts";
import { invalidArgument } from "../errors.ts";
import type { Actor } from "../iam/actor.ts";
import { methodAccess } from "../iam/capabilities.ts";
import { newId } from "../ids.ts";
import { clampPageSize, decodePageToken, encodePageToken } from "../pagination.ts";

/**
 * Which methods change state, and so are audited: every method of the capability table whose name
 * is not a read. Derived, so a new mutating RPC is audited (and tested, audit/audit.test.ts) the day
 * its row is added.
 */
const READ = /^(Get|List|Query|Preview|WhoAmI)/;

export function isAudited(method: string): boolean {
  const name = method.slice(method.indexOf("/") + 1);
  return methodAccess[method] !== undefined && !READ.test(name);
}

/** The console's own sign-in and sign-out (console/routes.ts), recorded beside the RPCs. */
export const CONSOLE_SIGN_IN = "console/SignIn";
export const CONSOLE_SIGN_OUT = "console/SignOut";

export const auditedMethods: readonly string[] = [
  ...Object.keys(methodAccess).filter(isAudited),
  CONSOLE_SIGN_IN,
  CONSOLE_SIGN_OUT,
];

/** Who acted (iam/actor.ts names every kind). */
export type AuditActor = Actor;

export interface AuditEventInput {
  readonly time: number;
  /** "" outside every project. */
  readonly projectId: string;
  readonly actor: AuditActor;
  readonly method: string;
  readonly resource: string;
  readonly requestId: string;
  /** "ok", or the error's reason (PERMISSION_DENIED's CAPABILITY, NOT_FOUND, ...). */
  readonly outcome: string;
  readonly clientAddress: string;
  readonly userAgent: string;
  /** Names of the fields a change set, never their values. */
  readonly changedFields: readonly string[];
}

export interface AuditEvent extends AuditEventInput {
  readonly id: string;
  readonly replay: boolean;
}

const MAX_USER_AGENT = 256;

/**
 * Records one event. A call carrying a requestId that already succeeded for the same method in the
 * same project is recorded as its replay.
 */
export async function recordAuditEvent(db: Db, e: AuditEventInput): Promise<AuditEvent> {
  // An event written on its own (a call that changed nothing in a transaction: a refusal, an error)
  // does not wait for its WAL flush on PostgreSQL (docs/audit.md).
  return lazyCommit(db, (trx) => insertAuditEvent(trx, e));
}

/**
 * Inserts one event with `db`, a transaction's or the database's. A call carrying a requestId that
 * already succeeded for the same method in the same project is recorded as its replay.
 */
export async function insertAuditEvent(db: Db, e: AuditEventInput): Promise<AuditEvent> {
  const id = newId();
  const userAgent = e.userAgent.slice(0, MAX_USER_AGENT);
  // The replay check rides in the insert: one statement, one round trip on the hot path.
  const replay = e.requestId
    ? sql<number>`(case when exists (select 1 from audit_events where request_id = ${e.requestId} and project_id = ${e.projectId} and method = ${e.method} and outcome = 'ok') then 1 else 0 end)`
    : 0;
  const row = await db
    .insertInto("audit_events")
    .values({
      id,
      time: e.time,
      project_id: e.projectId,
      actor_kind: e.actor.kind,
      actor: e.actor.name,
      actor_detail: JSON.stringify(e.actor.detail),
      method: e.method,
      resource: e.resource,
      request_id: e.requestId,
      replay,
      outcome: e.outcome,
      client_address: e.clientAddress,
      user_agent: userAgent,
      changed_fields: JSON.stringify(e.changedFields),
    })
    .returning("replay")
    .executeTakeFirstOrThrow();
  return { ...e, id, userAgent, replay: Number(row.replay) === 1 };
}

export interface AuditFilter {
  /** undefined: every project (the operator's listing). */
  readonly projectId?: string;
  /** An actor's name (users/…, projects/…/keys/…, operator) or kind. */
  readonly actor?: string;
  readonly method?: string;
  /**
   * A resource name, matching it and the resources under it (a service account and its keys), or a
   * prefix of one ending in "/" (projects/p/alertRules/).
   */
  readonly resource?: string;
  readonly startTime?: number;
  readonly endTime?: number;
  readonly pageSize?: number;
  readonly pageToken?: string;
}

/**
 * Checks a listing's filters and names the field of the first bad one: a method that is not audited,
 * or a time range that ends before it starts.
 */
export function validateAuditFilter(f: AuditFilter): void {
  if (
    f.method &&
    !auditedMethods.includes(f.method) &&
    !auditedMethods.some((m) => m.endsWith(`/${f.method}`))
  )
    throw invalidArgument(
      "method",
      "is not an audited method (service/Method or Method, e.g. svc.iam.v1.KeyService/CreateKey)",
    );
  if (f.startTime !== undefined && f.endTime !== undefined && f.endTime < f.startTime)
    throw invalidArgument("endTimeUnixMs", "is before startTimeUnixMs");
  if (f.pageSize !== undefined && f.pageSize < 0) throw invalidArgument("pageSize", "must not be negative");
}

/** Newest first, paged with the signed page tokens of every listing (the position is time and id). */
export async function listAuditEvents(
  db: Db,
  pageKey: Buffer,
  f: AuditFilter,
): Promise<{ events: AuditEvent[]; nextPageToken: string }> {
  validateAuditFilter(f);
  const scope = `audit:${f.projectId ?? "*"}`;
  const size = clampPageSize(f.pageSize ?? 0);
  let q = db.selectFrom("audit_events").selectAll();
  if (f.projectId !== undefined) q = q.where("project_id", "=", f.projectId);
  if (f.actor)
    q = q.where((w) => w.or([w("actor", "=", f.actor ?? ""), w("actor_kind", "=", f.actor ?? "")]));
  if (f.method) {
    const full = f.method.includes("/") ? f.method : auditedMethods.find((m) => m.endsWith(`/${f.method}`));
    q = q.where("method", "=", full ?? f.method);
  }
  if (f.resource) {
    // substr, not LIKE: SQLite's LIKE ignores case and has no escape character unless told.
    const under = (prefix: string) => sql<string>`substr(resource, 1, ${prefix.length})`;
    const { resource } = f;
    q = resource.endsWith("/")
      ? q.where(under(resource), "=", resource)
      : q.where((w) => w.or([w("resource", "=", resource), w(under(`${resource}/`), "=", `${resource}/`)]));
  }
  if (f.startTime !== undefined) q = q.where("time", ">=", f.startTime);
  if (f.endTime !== undefined) q = q.where("time", "<", f.endTime);
  if (f.pageToken) {
    const [t, id] = decodePageToken(pageKey, scope, f.pageToken).split(" ");
    const time = Number(t);
    q = q.where((w) => w.or([w("time", "<", time), w.and([w("time", "=", time), w("id", "<", id ?? "")])]));
  }
  const rows = await q
    .orderBy("time", "desc")
    .orderBy("id", "desc")
    .limit(size + 1)
    .execute();
  const events = rows.slice(0, size).map(
    (r): AuditEvent => ({
      id: r.id,
      time: Number(r.time),
      projectId: r.project_id,
      actor: {
        kind: r.actor_kind as AuditActor["kind"],
        name: r.actor,
        detail: JSON.parse(r.actor_detail) as Record<string, string>,
      },
      method: r.method,
      resource: r.resource,
      requestId: r.request_id,
      replay: Number(r.replay) === 1,
      outcome: r.outcome,
      clientAddress: r.client_address,
      userAgent: r.user_agent,
      changedFields: JSON.parse(r.changed_fields) as string[],
    }),
  );
  const last = events[events.length - 1];
  const nextPageToken =
    rows.length > size && last ? encodePageToken(pageKey, scope, `${last.time} ${last.id}`) : "";
  return { events, nextPageToken };
}

/** SVC_AUDIT_RETENTION_DAYS' default: Google Cloud's Admin Activity logs are kept 400 days. */
export const DEFAULT_AUDIT_RETENTION_DAYS = 400;
const PURGE_BATCH = 1000;

/**
 * Deletes events older than the retention, a batch at a time so a large backlog never holds one long
 * transaction or lock; returns how many were deleted.
 */
export async function purgeAuditEvents(
  db: Db,
  nowMs: number,
  retentionDays: number,
  batch = PURGE_BATCH,
): Promise<number> {
  const cutoff = nowMs - retentionDays * 86_400_000;
  let total = 0;
  for (;;) {
    const ids = await db
      .selectFrom("audit_events")
      .select("id")
      .where("time", "<", cutoff)
      .orderBy("time")
      .limit(batch)
      .execute();
    if (ids.length === 0) return total;
    await db
      .deleteFrom("audit_events")
      .where(
        "id",
        "in",
        ids.map((r) => r.id),
      )
      .execute();
    total += ids.length;
    if (ids.length < batch) return total;
  }
}
