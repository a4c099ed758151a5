/**
 * The notification backlog across every project, for the provider's on-call (the operator token; the
 * SvcNotificationBacklog runbook in docs/operations.md): how much waits, which destinations hold it, and
 * the deliveries due longest with their attempts (the last one says why it is still waiting).
 */
import type { Db } from "../db/database.ts";
import { invalidArgument } from "../errors.ts";
import { type DeliveryView, withAttempts } from "./deliveries.ts";
import { destinationName } from "./destinations.ts";

const DEFAULT_TOP = 20;
const MAX_TOP = 500;

export interface DeliveryBacklog {
  pending: bigint;
  due: bigint;
  /** Absent when nothing is due (missing, not zero: zero would claim a delivery due right now). */
  oldestDueAgeSeconds?: bigint;
  destinations: {
    destination: string;
    kind: string;
    pending: bigint;
    due: bigint;
    oldestNextAttemptTimeUnix: bigint;
  }[];
  deliveries: DeliveryView[];
}

export async function listDeliveryBacklog(
  db: Db,
  nowMs: number,
  req: { pageSize: number },
): Promise<DeliveryBacklog> {
  if (!Number.isInteger(req.pageSize) || req.pageSize < 0 || req.pageSize > MAX_TOP)
    throw invalidArgument("pageSize", `must be from 0 (${DEFAULT_TOP}) to ${MAX_TOP}`);
  const top = req.pageSize || DEFAULT_TOP;
  // Per destination: what waits, what is due, since when (PENDING rows only, the deliveries_due index).
  const perDestination = await db
    .selectFrom("deliveries as d")
    .innerJoin("destinations as t", (j) =>
      j.onRef("t.id", "=", "d.destination_id").onRef("t.project_id", "=", "d.project_id"),
    )
    .where("d.state", "=", "PENDING")
    .select((eb) => [
      "d.project_id",
      "d.destination_id",
      "t.kind",
      eb.fn.countAll<number>().as("pending"),
      eb.fn.sum<number>(eb.case().when("d.next_attempt_time", "<=", nowMs).then(1).else(0).end()).as("due"),
      eb.fn.min<number>("d.next_attempt_time").as("oldest"),
    ])
    .groupBy(["d.project_id", "d.destination_id", "t.kind"])
    .execute();
  let pending = 0;
  let due = 0;
  for (const r of perDestination) {
    pending += Number(r.pending);
    due += Number(r.due);
  }
  const oldestDue = await db
    .selectFrom("deliveries")
    .where("state", "=", "PENDING")
    .where("next_attempt_time", "<=", nowMs)
    .select((eb) => eb.fn.min<number>("next_attempt_time").as("t"))
    .executeTakeFirst();
  const rows = await db
    .selectFrom("deliveries")
    .selectAll()
    .where("state", "=", "PENDING")
    .orderBy("next_attempt_time")
    .orderBy("id")
    .limit(top)
    .execute();
  const oldest = oldestDue?.t === null || oldestDue?.t === undefined ? undefined : Number(oldestDue.t);
  return {
    pending: BigInt(pending),
    due: BigInt(due),
    oldestDueAgeSeconds:
      oldest === undefined ? undefined : BigInt(Math.max(0, Math.floor((nowMs - oldest) / 1000))),
    destinations: perDestination
      .map((r) => ({
        destination: destinationName(r.project_id, r.destination_id),
        kind: r.kind,
        pending: BigInt(Number(r.pending)),
        due: BigInt(Number(r.due)),
        oldestNextAttemptTimeUnix: BigInt(Math.floor(Number(r.oldest) / 1000)),
      }))
      .sort((a, b) =>
        a.pending === b.pending ? a.destination.localeCompare(b.destination) : a.pending > b.pending ? -1 : 1,
      )
      .slice(0, top),
    deliveries: await withAttempts(db, rows),
  };
}
