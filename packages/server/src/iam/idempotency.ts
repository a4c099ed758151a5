import { createHash } from "node:crypto";
import type { Db } from "../db/database.ts";
import { invalidArgument } from "../errors.ts";

/** Records are kept at least this long (docs/decisions.md: 48 hours, at least the 24 the API promises). */
export const IDEMPOTENCY_RETENTION_MS = 48 * 3600 * 1000;

const UUID_LIKE = /^[0-9A-Za-z][0-9A-Za-z._:-]{7,127}$/;

export function validateRequestId(requestId: string, field = "requestId"): void {
  if (!requestId) throw invalidArgument(field, "is required (a client-generated UUID)");
  if (!UUID_LIKE.test(requestId)) {
    throw invalidArgument(field, "must be 8..128 characters of letters, digits and ._:-");
  }
}

/** Hash of the request body without its requestId, so only an exact retry matches. */
export function bodyHash(body: unknown): string {
  return createHash("sha256").update(stableJson(body)).digest("hex");
}

function stableJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableJson).join(",")}]`;
  if (v && typeof v === "object") {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson(o[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(v) ?? "null";
}

/**
 * The recorded outcome for (scope, requestId): undefined when new; the stored result when the body is
 * the same; REQUEST_ID_REUSED when the body differs.
 */
export async function findReplay<T>(
  db: Db,
  scope: string,
  requestId: string,
  hash: string,
): Promise<T | undefined> {
  const r = await db
    .selectFrom("idempotency_records")
    .select(["body_hash", "result"])
    .where("scope", "=", scope)
    .where("request_id", "=", requestId)
    .executeTakeFirst();
  if (!r) return undefined;
  if (r.body_hash !== hash) {
    throw invalidArgument("requestId", "was already used with a different request body", {
      reason: "REQUEST_ID_REUSED",
    });
  }
  return JSON.parse(r.result) as T;
}

/**
 * Records `result` for (scope, requestId), to be replayed by findReplay. Inside the change's transaction
 * and first in it: a concurrent duplicate then fails on the primary key before doing anything.
 */
export async function recordResult(
  tx: Db,
  scope: string,
  requestId: string,
  hash: string,
  result: unknown,
  nowMs: number,
): Promise<void> {
  await tx
    .insertInto("idempotency_records")
    .values({
      scope,
      request_id: requestId,
      body_hash: hash,
      result: JSON.stringify(result),
      create_time: nowMs,
    })
    .execute();
}

export async function pruneIdempotency(db: Db, nowMs: number): Promise<void> {
  await db
    .deleteFrom("idempotency_records")
    .where("create_time", "<", nowMs - IDEMPOTENCY_RETENTION_MS)
    .execute();
}
