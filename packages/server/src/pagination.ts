import { createHmac, timingSafeEqual } from "node:crypto";
import { invalidArgument } from "./errors.ts";

export const MAX_PAGE_SIZE = 50;

/** pageSize clamped to 1..50; 0 (unset) means the maximum. */
export function clampPageSize(n: number): number {
  if (!n || n < 1) return MAX_PAGE_SIZE;
  return Math.min(n, MAX_PAGE_SIZE);
}

/**
 * Opaque, tamper-evident page tokens: base64url(JSON) + "." + HMAC-SHA256 truncated to 16 bytes. The
 * payload names the list (`scope`) so a token of one listing or project is refused by another.
 */
export function encodePageToken(key: Buffer, scope: string, position: string): string {
  const body = Buffer.from(JSON.stringify({ s: scope, p: position })).toString("base64url");
  return `${body}.${sign(key, body)}`;
}

export function decodePageToken(key: Buffer, scope: string, token: string): string {
  const [body, mac] = token.split(".");
  const bad = () =>
    invalidArgument("pageToken", "is not a token from a previous response of this listing", {
      reason: "INVALID_PAGE_TOKEN",
    });
  if (!body || !mac) throw bad();
  const want = Buffer.from(sign(key, body));
  const got = Buffer.from(mac);
  if (want.length !== got.length || !timingSafeEqual(want, got)) throw bad();
  let parsed: { s?: unknown; p?: unknown };
  try {
    parsed = JSON.parse(Buffer.from(body, "base64url").toString("utf8"));
  } catch {
    throw bad();
  }
  if (parsed.s !== scope || typeof parsed.p !== "string") throw bad();
  return parsed.p;
}

function sign(key: Buffer, body: string): string {
  return createHmac("sha256", key).update(body).digest().subarray(0, 16).toString("base64url");
}
