/** Identifiers svc gives the resources it creates (users, keys, events, incidents, …). */
import { randomBytes } from "node:crypto";

/** Short random identifier for resource names: 16 lowercase base32 characters. */
export function newId(): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyz234567";
  let s = "";
  for (const b of randomBytes(16)) s += alphabet[b & 31];
  return s;
}
