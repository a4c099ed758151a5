import { createHmac, timingSafeEqual } from "node:crypto";
import fastifyCookie from "@fastify/cookie";
import { permissionDenied } from "../errors.ts";
import { bearerToken } from "../iam/principal.ts";
import { parseSecret } from "../iam/secrets.ts";

/**
 * The console's credential: the session token lives only in an HttpOnly, SameSite=Strict cookie, never
 * in the page's script, storage or URL. A state-changing call with that cookie must also carry the
 * CSRF token, which only a same-origin script can read (GET /console/api/session); every Connect call
 * is treated as state-changing, so reads carry it too.
 */
export const SESSION_COOKIE = "svc_session";
export const CSRF_HEADER = "x-svc-csrf";

/** HMAC of the session token: bound to the session, nothing to store, useless without the cookie. */
export function csrfTokenFor(key: Buffer, sessionToken: string): string {
  return createHmac("sha256", key).update(`svc-console-csrf\n${sessionToken}`).digest("base64url");
}

export function sessionTokenFromCookie(cookieHeader: string | null | undefined): string | undefined {
  if (!cookieHeader) return undefined;
  const token = fastifyCookie.parse(cookieHeader)[SESSION_COOKIE];
  // Only a console session ever travels in the cookie; a key pasted into it is ignored.
  return token && parseSecret(token) === "session" ? token : undefined;
}

/**
 * The credential of a request: the bearer token, or else the console's session cookie with its CSRF
 * header (CSRF_REJECTED without it). An Authorization header wins, so an automation client never needs
 * (or gets) the cookie path. Used by the Connect routes and the Prometheus API alike.
 */
export function requestCredential(
  headers: { authorization?: string | null; cookie?: string | null; csrf?: string | null },
  consoleKey: Buffer | undefined,
): string | undefined {
  if (headers.authorization) return bearerToken(headers.authorization);
  if (!consoleKey) return undefined;
  const session = sessionTokenFromCookie(headers.cookie);
  if (session) checkCsrf(consoleKey, session, headers.csrf);
  return session;
}

/** Throws CSRF_REJECTED unless the header carries this session's token. */
export function checkCsrf(key: Buffer, sessionToken: string, header: string | null | undefined): void {
  const expected = Buffer.from(csrfTokenFor(key, sessionToken));
  const got = Buffer.from(header ?? "");
  if (got.length !== expected.length || !timingSafeEqual(got, expected)) {
    throw permissionDenied(
      "CSRF_REJECTED",
      `a console call must carry the ${CSRF_HEADER} header from GET /console/api/session`,
    );
  }
}

export function sessionCookie(token: string, maxAgeSeconds: number, secure: boolean): string {
  return fastifyCookie.serialize(SESSION_COOKIE, token, {
    httpOnly: true,
    sameSite: "strict",
    secure,
    path: "/",
    maxAge: maxAgeSeconds,
  });
}

export function clearedSessionCookie(secure: boolean): string {
  return fastifyCookie.serialize(SESSION_COOKIE, "", {
    httpOnly: true,
    sameSite: "strict",
    secure,
    path: "/",
    maxAge: 0,
  });
}
