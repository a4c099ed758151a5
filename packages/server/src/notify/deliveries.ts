import type { Db } from "../db/database.ts";
import type { DeliveryAttemptTable, DeliveryTable } from "../db/schema.ts";
import { invalidArgument, notFound } from "../errors.ts";
import { notificationRead } from "../iam/capabilities.ts";
import { authorizeProject, type Principal } from "../iam/principal.ts";
import { parseProjectName } from "../inventory/names.ts";
import { clampPageSize, decodePageToken, encodePageToken } from "../pagination.ts";
import { destinationName, parseDestinationName } from "./destinations.ts";
import { purgeEndedSilences } from "./silences.ts";

export const deliveryStates = ["PENDING", "SENT", "FAILED", "SKIPPED"] as const;

export interface DeliveryView {
  name: string;
  deliveryId: string;
  destination: string;
  incident: string;
  eventType: string;
  state: string;
  skipReason: string;
  createTimeUnix: bigint;
  nextAttemptTimeUnix: bigint;
  expireTimeUnix: bigint;
  attempts: {
    attemptId: string;
    timeUnix: bigint;
    status: string;
    responseCode: number;
    detail: string;
    durationMs: number;
  }[];
}

const sec = (ms: number) => BigInt(Math.floor(ms / 1000));

function view(d: DeliveryTable, attempts: readonly DeliveryAttemptTable[]): DeliveryView {
  return {
    name: `${destinationName(d.project_id, d.destination_id)}/deliveries/${d.id}`,
    deliveryId: d.id,
    destination: destinationName(d.project_id, d.destination_id),
    incident: d.incident_id ? `projects/${d.project_id}/incidents/${d.incident_id}` : "",
    eventType: d.event_type,
    state: d.state,
    skipReason: d.skip_reason,
    createTimeUnix: sec(d.create_time),
    nextAttemptTimeUnix: d.state === "PENDING" ? sec(d.next_attempt_time) : 0n,
    expireTimeUnix: sec(d.expire_time),
    attempts: attempts.map((a) => ({
      attemptId: a.id,
      timeUnix: sec(a.time),
      status: a.status,
      responseCode: a.response_code,
      detail: a.detail,
      durationMs: a.duration_ms,
    })),
  };
}

export async function withAttempts(db: Db, rows: DeliveryTable[]): Promise<DeliveryView[]> {
  if (rows.length === 0) return [];
  const attempts = await db
    .selectFrom("delivery_attempts")
    .selectAll()
    .where(
      "delivery_id",
      "in",
      rows.map((r) => r.id),
    )
    .orderBy("time")
    .orderBy("id")
    .execute();
  const by = new Map<string, DeliveryAttemptTable[]>();
  for (const a of attempts) by.set(a.delivery_id, [...(by.get(a.delivery_id) ?? []), a]);
  return rows.map((r) => view(r, by.get(r.id) ?? []));
}

export async function getDelivery(db: Db, p: Principal, name: string): Promise<DeliveryView> {
  const m = /^(projects\/[^/]+\/destinations\/[^/]+)\/deliveries\/(dlv_[0-9a-f-]{36})$/.exec(name);
  if (!m) throw invalidArgument("name", "must be projects/<p>/destinations/<d>/deliveries/<delivery_id>");
  const { projectId, id } = parseDestinationName(m[1]);
  await authorizeProject(db, p, projectId, notificationRead);
  const d = await db
    .selectFrom("deliveries")
    .selectAll()
    .where("id", "=", m[2])
    .where("project_id", "=", projectId)
    .where("destination_id", "=", id)
    .executeTakeFirst();
  if (!d) throw notFound(name);
  return (await withAttempts(db, [d]))[0];
}

/** Deliveries newest first, with their attempts; filters by destination, incident and state. */
export async function listDeliveries(
  db: Db,
  p: Principal,
  pageKey: Buffer,
  req: {
    projectName: string;
    destination: string;
    incident: string;
    state: string;
    pageSize: number;
    pageToken: string;
  },
): Promise<{ deliveries: DeliveryView[]; nextPageToken?: string }> {
  const projectId = parseProjectName(req.projectName);
  await authorizeProject(db, p, projectId, notificationRead);
  if (req.pageSize < 0) throw invalidArgument("pageSize", "must not be negative");
  const size = clampPageSize(req.pageSize);
  let q = db.selectFrom("deliveries").selectAll().where("project_id", "=", projectId);
  let destId = "";
  if (req.destination) {
    const d = parseDestinationName(req.destination, "destination");
    if (d.projectId !== projectId) throw invalidArgument("destination", "belongs to another project");
    destId = d.id;
    q = q.where("destination_id", "=", d.id);
  }
  let incidentId = "";
  if (req.incident) {
    const m = /^projects\/([^/]+)\/incidents\/([A-Za-z0-9_-]{1,64})$/.exec(req.incident);
    if (!m) throw invalidArgument("incident", "must be projects/<p>/incidents/<id>");
    if (m[1] !== projectId) throw invalidArgument("incident", "belongs to another project");
    incidentId = m[2];
    q = q.where("incident_id", "=", incidentId);
  }
  if (req.state) {
    if (!(deliveryStates as readonly string[]).includes(req.state))
      throw invalidArgument("state", `must be one of ${deliveryStates.join(", ")}`);
    q = q.where("state", "=", req.state as DeliveryTable["state"]);
  }
  const scope = `ListDeliveries:${JSON.stringify([projectId, destId, incidentId, req.state])}`;
  if (req.pageToken) {
    const [t, id] = decodePageToken(pageKey, scope, req.pageToken).split("/");
    const before = Number(t);
    q = q.where((eb) =>
      eb.or([eb("create_time", "<", before), eb.and([eb("create_time", "=", before), eb("id", "<", id)])]),
    );
  }
  const rows = await q
    .orderBy("create_time", "desc")
    .orderBy("id", "desc")
    .limit(size + 1)
    .execute();
  const page = rows.slice(0, size);
  const last = page[page.length - 1];
  return {
    deliveries: await withAttempts(db, page),
    nextPageToken:
      rows.length > size && last
        ? encodePageToken(pageKey, scope, `${last.create_time}/${last.id}`)
        : undefined,
  };
}

/**
 * The hourly purge of notification history older than `retentionMs`: finished deliveries with their
 * attempts, and the silences that ended as long ago, in one transaction.
 */
export async function purgeDeliveryHistory(db: Db, atMs: number, retentionMs: number): Promise<void> {
  const before = atMs - retentionMs;
  const old = db
    .selectFrom("deliveries")
    .select("id")
    .where("state", "!=", "PENDING")
    .where("update_time", "<", before);
  await db.transaction().execute(async (tx) => {
    await tx.deleteFrom("delivery_attempts").where("delivery_id", "in", old).execute();
    await tx
      .deleteFrom("deliveries")
      .where("state", "!=", "PENDING")
      .where("update_time", "<", before)
      .execute();
    await purgeEndedSilences(tx, before);
  });
}
