import { timingSafeEqual } from "node:crypto";
import type { Db } from "../db/database.ts";
import { capabilityDenied, invalidArgument, permissionDenied, unauthenticated } from "../errors.ts";
import { parseProjectName } from "../inventory/names.ts";
import { type Capability, rolePermissions } from "./capabilities.ts";
import { requireMember, roleOf } from "./membership.ts";
import { type CachedKey, keyCacheOf } from "./principal-cache.ts";
import { hashSecret, parseSecret } from "./secrets.ts";

/**
 * Who is calling, as the database says now: a key's principal may come from the per-process cache, which
 * a request uses only under the auth revision it has just read (principal-cache.ts).
 */
export type Principal =
  | { readonly kind: "OPERATOR" }
  | { readonly kind: "HUMAN_SESSION"; readonly userId: string; readonly sessionId: string }
  | KeyPrincipal
  | CiTokenPrincipal;

/** What keys and CI tokens share: one project, capabilities, and the identity's state read for this request. */
interface ScopedCredential {
  readonly projectId: string;
  /** users/<id> for personal keys, the service account id otherwise. */
  readonly identityId: string;
  readonly keyCapabilities: readonly Capability[];
  /** The identity's current permissions in projectId (empty when the grant is gone). */
  readonly identityPermissions: readonly Capability[];
  /** Set when the identity is disabled or its grant was removed. */
  readonly identityProblem?: "IDENTITY_DISABLED" | "GRANT_REMOVED";
}

export interface KeyPrincipal extends ScopedCredential {
  readonly kind: "PERSONAL_KEY" | "SERVICE_ACCOUNT_KEY";
  readonly keyId: string;
}

/** A 15-minute token from ExchangeCIToken, acting as the trust's service account. */
export interface CiTokenPrincipal extends ScopedCredential {
  readonly kind: "CI_TOKEN";
  readonly tokenId: string;
  readonly trustId: string;
  /** Of the identity token exchanged for this one (the audit log names them). */
  readonly repository: string;
  readonly workflow: string;
  readonly ref: string;
}

/** Resolves a bearer token for kinds other than keys and sessions (the CI exchange registers one). */
export type TokenResolver = (db: Db, token: string, nowMs: number) => Promise<Principal | undefined>;

export interface AuthenticateOptions {
  readonly operatorToken?: string;
  readonly ciTokenResolver?: TokenResolver;
}

/** Reads `Authorization: Bearer <token>`; never echoes the token in an error. */
export function bearerToken(header: string | null | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Bearer ([\x21-\x7e]+)$/i.exec(header.trim());
  return m?.[1];
}

export async function authenticate(
  db: Db,
  token: string | undefined,
  nowMs: number,
  opts: AuthenticateOptions = {},
): Promise<Principal> {
  if (!token) throw unauthenticated("missing Authorization: Bearer credential");
  if (opts.operatorToken && safeEqual(token, opts.operatorToken)) return { kind: "OPERATOR" };
  const kind = parseSecret(token);
  if (kind === undefined) throw unauthenticated("the bearer credential is not a valid svc credential");
  if (kind === "session") return sessionPrincipal(db, token, nowMs);
  if (kind === "agent") throw unauthenticated("a guest-agent token only writes its VM's metrics");
  if (kind === "ciToken") {
    const p = await opts.ciTokenResolver?.(db, token, nowMs);
    if (!p) throw unauthenticated("the CI token is unknown, expired or revoked", "CREDENTIAL_EXPIRED");
    return p;
  }
  return keyPrincipal(db, token, nowMs);
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

async function sessionPrincipal(db: Db, token: string, nowMs: number): Promise<Principal> {
  const s = await db
    .selectFrom("sessions")
    .select(["id", "user_id", "expire_time", "revoke_time"])
    .where("token_hash", "=", hashSecret(token))
    .executeTakeFirst();
  if (!s || s.revoke_time !== null) throw unauthenticated("the session is unknown or ended");
  if (s.expire_time <= nowMs) throw unauthenticated("the session expired", "CREDENTIAL_EXPIRED");
  return { kind: "HUMAN_SESSION", userId: s.user_id, sessionId: s.id };
}

async function keyPrincipal(db: Db, token: string, nowMs: number): Promise<KeyPrincipal> {
  const hash = hashSecret(token);
  // One read of the auth revision instead of the key's two when the key is cached (principal-cache.ts).
  const cache = keyCacheOf(db);
  const revision = cache ? await cache.revision() : Number.NaN;
  const cached = cache?.get(hash, revision);
  if (cached) return usableKey(cached, nowMs);
  const k = await db.selectFrom("api_keys").selectAll().where("secret_hash", "=", hash).executeTakeFirst();
  if (!k) throw unauthenticated("the key is unknown");
  const keyCapabilities = JSON.parse(k.capabilities) as Capability[];
  let principal: KeyPrincipal;
  if (k.kind === "SERVICE_ACCOUNT") {
    const sa = await db
      .selectFrom("service_accounts")
      .select(["state", "permissions"])
      .where("id", "=", k.service_account_id ?? "")
      .executeTakeFirst();
    const disabled = sa?.state !== "ACTIVE";
    principal = {
      kind: "SERVICE_ACCOUNT_KEY",
      keyId: k.id,
      projectId: k.project_id,
      identityId: k.service_account_id ?? "",
      keyCapabilities,
      identityPermissions: disabled ? [] : (JSON.parse(sa.permissions) as Capability[]),
      identityProblem: disabled ? "IDENTITY_DISABLED" : undefined,
    };
  } else {
    const role = await roleOf(db, k.project_id, k.owner_user_id ?? "");
    principal = {
      kind: "PERSONAL_KEY",
      keyId: k.id,
      projectId: k.project_id,
      identityId: k.owner_user_id ?? "",
      keyCapabilities,
      identityPermissions: role ? rolePermissions[role] : [],
      identityProblem: role ? undefined : "GRANT_REMOVED",
    };
  }
  const entry = { principal, expireTime: k.expire_time, revokeTime: k.revoke_time, revision };
  cache?.set(hash, entry);
  return usableKey(entry, nowMs);
}

/** The key's principal, unless the clock has passed its revocation (scheduled by a rotation) or expiry. */
function usableKey(k: CachedKey, nowMs: number): KeyPrincipal {
  if (k.revokeTime !== null && k.revokeTime <= nowMs) {
    throw unauthenticated("the key was revoked", "CREDENTIAL_REVOKED");
  }
  if (k.expireTime <= nowMs) throw unauthenticated("the key expired", "CREDENTIAL_EXPIRED");
  return k.principal;
}

/**
 * The HTTP surfaces' check (Prometheus API, scrape discovery and export): authenticates the
 * `Authorization` header and authorizes `capability` in the project of the path, before any read.
 */
export async function authorizeBearer(
  db: Db,
  authorization: string | undefined,
  projectId: string,
  capability: ProjectAccess,
  nowMs: number,
  opts: AuthenticateOptions,
): Promise<Principal> {
  const principal = await authenticate(db, bearerToken(authorization), nowMs, opts);
  await authorizeProject(db, principal, projectId, capability);
  return principal;
}

/** A capability, or one for people (by role) and another for keys and CI tokens (capabilities.ts). */
export type ProjectAccess = Capability | { readonly people: Capability; readonly credentials: Capability };

const forPeople = (a: ProjectAccess): Capability => (typeof a === "string" ? a : a.people);
const forCredentials = (a: ProjectAccess): Capability => (typeof a === "string" ? a : a.credentials);

/**
 * What a key or CI token may do wherever it is used: it carries the capability, and its identity is
 * active and still holds it (effective = both). Needs no project, so it is checked before a request's
 * body is read (http/auth.ts), and again by authorizeProject.
 */
export function authorizeCredential(p: KeyPrincipal | CiTokenPrincipal, access: ProjectAccess): void {
  const capability = forCredentials(access);
  if (!p.keyCapabilities.includes(capability)) {
    throw capabilityDenied(capability, `the credential does not carry ${capability}`);
  }
  if (p.identityProblem === "IDENTITY_DISABLED") {
    throw permissionDenied("IDENTITY_DISABLED", "the credential's identity is disabled");
  }
  if (p.identityProblem === "GRANT_REMOVED" || !p.identityPermissions.includes(capability)) {
    throw permissionDenied("GRANT_REMOVED", `the credential's identity no longer holds ${capability}`);
  }
}

/**
 * Checks that the principal may use `access` in `projectId`: the project boundary first, then the
 * credential's capabilities, then the identity's current state and grants (effective = both).
 */
export async function authorizeProject(
  db: Db,
  p: Principal,
  projectId: string,
  access: ProjectAccess,
): Promise<void> {
  switch (p.kind) {
    case "OPERATOR":
      throw permissionDenied("PROJECT_BOUNDARY", "the operator token has no access to project data");
    case "HUMAN_SESSION": {
      const capability = forPeople(access);
      const role = await requireMember(db, projectId, p.userId);
      if (!rolePermissions[role].includes(capability)) {
        throw capabilityDenied(capability, `your role ${role} does not grant ${capability}`);
      }
      return;
    }
    case "PERSONAL_KEY":
    case "SERVICE_ACCOUNT_KEY":
    case "CI_TOKEN": {
      if (p.projectId !== projectId) {
        throw permissionDenied("PROJECT_BOUNDARY", "the credential is bound to another project");
      }
      authorizeCredential(p, access);
      return;
    }
  }
}

/**
 * The project a request is for: `projectName` when given, else the one project a key or CI token is
 * bound to (a console session must name it). Authorization still follows (authorizeProject).
 */
export function projectOfRequest(p: Principal, projectName: string): string {
  if (projectName) return parseProjectName(projectName);
  if (p.kind === "PERSONAL_KEY" || p.kind === "SERVICE_ACCOUNT_KEY" || p.kind === "CI_TOKEN")
    return p.projectId;
  throw invalidArgument("projectName", "is required (projects/<project_id>) for a console session");
}
