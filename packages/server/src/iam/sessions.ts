import type { Db } from "../db/database.ts";
import { invalidArgument, unauthenticated } from "../errors.ts";
import { MAX_EMAIL, MAX_PASSWORD } from "../free-text.ts";
import { newId } from "../ids.ts";
import { hashPassword, verifyPassword } from "./passwords.ts";
import { generateSecret, hashSecret } from "./secrets.ts";

export const SESSION_TTL_MS = 12 * 3600 * 1000;

// Compared against when the email is unknown, so a wrong email costs the same time as a wrong password.
let dummyHash: Promise<string> | undefined;

export async function login(
  db: Db,
  email: string,
  password: string,
  nowMs: number,
): Promise<{ sessionToken: string; expireTimeMs: number; userId: string }> {
  if (!email) throw invalidArgument("email", "is required");
  if (!password) throw invalidArgument("password", "is required");
  // No account has a longer one: refused before any lookup or hashing.
  if (email.length > MAX_EMAIL) throw invalidArgument("email", `must be at most ${MAX_EMAIL} characters`);
  if (password.length > MAX_PASSWORD)
    throw invalidArgument("password", `must be at most ${MAX_PASSWORD} characters`);
  const u = await db
    .selectFrom("users")
    .select(["id", "password_hash"])
    .where("email", "=", email.trim().toLowerCase())
    .executeTakeFirst();
  dummyHash ??= hashPassword("not-a-real-password-for-timing");
  const ok = await verifyPassword(password, u?.password_hash ?? (await dummyHash));
  if (!u || !ok) throw unauthenticated("email or password is wrong");
  const token = generateSecret("session");
  const expireTimeMs = nowMs + SESSION_TTL_MS;
  await db
    .insertInto("sessions")
    .values({
      id: newId(),
      user_id: u.id,
      token_hash: hashSecret(token),
      create_time: nowMs,
      expire_time: expireTimeMs,
      revoke_time: null,
    })
    .execute();
  return { sessionToken: token, expireTimeMs, userId: u.id };
}

export async function logout(db: Db, sessionId: string, nowMs: number): Promise<void> {
  await db.updateTable("sessions").set({ revoke_time: nowMs }).where("id", "=", sessionId).execute();
}
