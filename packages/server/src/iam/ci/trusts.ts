import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { noteCreated } from "../../call-notes.ts";
import type { Db } from "../../db/database.ts";
import type { CiTrustTable } from "../../db/schema.ts";
import { invalidArgument, notFound } from "../../errors.ts";
import { newId } from "../../ids.ts";
import { parseProjectName } from "../../inventory/names.ts";
import { type Capability, isCapability } from "../capabilities.ts";
import { requireMember, requireOwner } from "../membership.ts";
import { parseServiceAccountName, serviceAccountName } from "../service-accounts.ts";
import { verifyAssertion } from "./assertion.ts";
import { CiPairingInvalidError, CiSetupExpiredError, CiTrustStateError } from "./errors.ts";
import {
  checkAgainstIntended,
  type IntendedIdentity,
  type ObservedIdentity,
  observedFrom,
  validateIntended,
} from "./identity.ts";
import { consumeJti } from "./jti.ts";
import type { JwksCache } from "./jwks.ts";
import type { CiOptions } from "./options.ts";

/** Everything the CI domain needs; built once by the app. */
export interface CiContext {
  readonly db: Db;
  readonly now: () => number;
  readonly options: CiOptions;
  readonly jwks: JwksCache;
}

/** Public state; EXPIRED is a pending setup whose window has passed (computed, not stored). */
export type CiTrustState = "VERIFICATION_PENDING" | "EXPIRED" | "IDENTITY_OBSERVED" | "APPROVED" | "DISABLED";

export interface CiTrustView {
  name: string;
  serviceAccount: string;
  state: CiTrustState;
  issuer: string;
  audience: string;
  intended: { repository: string; workflow: string; branch: string; environment: string; event: string };
  observed?: {
    repository: string;
    repositoryId: string;
    repositoryOwner: string;
    repositoryOwnerId: string;
    workflowRef: string;
    ref: string;
    event: string;
    environment: string;
    jobWorkflowRef: string;
  };
  permissions: string[];
  /** Unix seconds; 0 when no verification window is open. */
  setupExpireTimeUnix: bigint;
  createTimeUnix: bigint;
  observeTimeUnix: bigint;
  approveTimeUnix: bigint;
  approver: string;
  setupId: string;
}

const sec = (ms: number | null) => BigInt(ms === null ? 0 : Math.floor(ms / 1000));

export function trustName(projectId: string, id: string): string {
  return `projects/${projectId}/ciTrusts/${id}`;
}

export function parseTrustName(name: string, field = "name"): { projectId: string; id: string } {
  const m = /^projects\/([a-z][a-z0-9-]{2,39})\/ciTrusts\/([a-z0-9]{1,40})$/.exec(name);
  if (!m) throw invalidArgument(field, "must be a trust name projects/<project_id>/ciTrusts/<id>");
  return { projectId: m[1], id: m[2] };
}

/** The audience is unique per trust, so an identity token minted for one trust is useless for another. */
export function trustAudience(projectId: string, id: string): string {
  return `svc:${trustName(projectId, id)}`;
}

export function stateOf(r: Pick<CiTrustTable, "state" | "setup_expire_time">, nowMs: number): CiTrustState {
  if (r.state === "DELETED") throw new Error("deleted trusts have no public state");
  if (r.state === "VERIFICATION_PENDING" && (r.setup_expire_time ?? 0) <= nowMs) return "EXPIRED";
  return r.state;
}

export function toView(r: CiTrustTable, nowMs: number): CiTrustView {
  const state = stateOf(r, nowMs);
  const o = r.observed ? (JSON.parse(r.observed) as ObservedIdentity) : undefined;
  return {
    name: trustName(r.project_id, r.id),
    serviceAccount: serviceAccountName(r.project_id, r.service_account_id),
    state,
    issuer: r.issuer,
    audience: r.audience,
    intended: {
      repository: r.intended_repository,
      workflow: r.intended_workflow,
      branch: r.intended_branch ?? "",
      environment: r.intended_environment ?? "",
      event: r.intended_event,
    },
    observed: o && {
      repository: o.repository,
      repositoryId: o.repository_id,
      repositoryOwner: o.repository_owner,
      repositoryOwnerId: o.repository_owner_id,
      workflowRef: o.workflow_ref,
      ref: o.ref,
      event: o.event,
      environment: o.environment,
      jobWorkflowRef: o.job_workflow_ref,
    },
    permissions: JSON.parse(r.permissions) as string[],
    setupExpireTimeUnix: state === "VERIFICATION_PENDING" ? sec(r.setup_expire_time) : 0n,
    createTimeUnix: sec(r.create_time),
    observeTimeUnix: sec(r.observe_time),
    approveTimeUnix: sec(r.approve_time),
    approver: r.approver_user_id ? `users/${r.approver_user_id}` : "",
    setupId: state === "VERIFICATION_PENDING" ? (r.setup_id ?? "") : "",
  };
}

export function intendedOf(r: CiTrustTable): IntendedIdentity {
  return {
    repository: r.intended_repository,
    workflow: r.intended_workflow,
    branch: r.intended_branch,
    environment: r.intended_environment,
    event: r.intended_event,
  };
}

const hashCode = (code: string) => createHash("sha256").update(code).digest();

function requireTrustOwner(db: Db, userId: string, projectId: string): Promise<void> {
  return requireOwner(db, projectId, userId, "manage CI trust connections");
}

/** A live (not deleted) trust, or not_found. */
export async function loadTrust(db: Db, name: string): Promise<CiTrustTable> {
  const r = await findTrust(db, name);
  if (!r) throw notFound(name);
  return r;
}

/** The trust row, or undefined when there is none or it was deleted. */
export async function findTrust(db: Db, name: string, field = "name"): Promise<CiTrustTable | undefined> {
  const { projectId, id } = parseTrustName(name, field);
  const r = await db
    .selectFrom("ci_trusts")
    .selectAll()
    .where("project_id", "=", projectId)
    .where("id", "=", id)
    .executeTakeFirst();
  return !r || r.state === "DELETED" ? undefined : r;
}

export interface StartSetupInput {
  serviceAccount: string;
  intended:
    | { repository: string; workflow: string; branch: string; environment: string; event: string }
    | undefined;
  issuer: string;
  /** Existing trust to verify again; empty for a new trust. */
  trust: string;
}

export interface StartedSetup {
  setupId: string;
  /** Returned once; only its hash is stored. */
  pairingCode: string;
  audience: string;
  expireTimeMs: number;
  trust: CiTrustView;
}

/**
 * Opens a 30-minute verification window. For an existing trust (re-verification after its repository
 * or workflow identity changed) the trust stops granting access at once and must be approved again.
 */
export async function startSetup(
  ctx: CiContext,
  userId: string,
  input: StartSetupInput,
): Promise<StartedSetup> {
  const { db, options } = ctx;
  const now = ctx.now();
  const sa = parseServiceAccountName(input.serviceAccount, "serviceAccount");
  await requireTrustOwner(db, userId, sa.projectId);
  if (!input.intended) throw invalidArgument("intended", "is required");
  const intended = validateIntended(input.intended);
  const issuer = input.issuer || options.defaultIssuer;
  if (!options.allowedIssuers.includes(issuer)) {
    throw invalidArgument("issuer", `must be one of ${options.allowedIssuers.join(", ")}`);
  }
  const account = await db
    .selectFrom("service_accounts")
    .select(["id", "state"])
    .where("project_id", "=", sa.projectId)
    .where("id", "=", sa.id)
    .executeTakeFirst();
  if (!account) throw notFound(input.serviceAccount);
  const pairingCode = `svcsetup_${randomBytes(24).toString("base64url")}`;
  const setupId = newId();
  const expireTimeMs = now + options.setupTtlMs;
  const fields = {
    service_account_id: sa.id,
    state: "VERIFICATION_PENDING" as const,
    issuer,
    intended_repository: intended.repository,
    intended_workflow: intended.workflow,
    intended_branch: intended.branch,
    intended_environment: intended.environment,
    intended_event: intended.event,
    setup_id: setupId,
    pairing_hash: hashCode(pairingCode).toString("hex"),
    setup_expire_time: expireTimeMs,
    observed: null,
    observe_time: null,
    approver_user_id: null,
    approve_time: null,
    update_time: now,
  };
  let row: CiTrustTable;
  if (input.trust) {
    const existing = await loadTrust(db, input.trust);
    if (existing.project_id !== sa.projectId || existing.service_account_id !== sa.id) {
      throw invalidArgument("trust", "belongs to another service account");
    }
    row = { ...existing, ...fields, permissions_version: existing.permissions_version + 1 };
    await db
      .updateTable("ci_trusts")
      .set({ ...fields, permissions_version: row.permissions_version })
      .where("id", "=", existing.id)
      .execute();
  } else {
    const id = newId();
    row = {
      id,
      project_id: sa.projectId,
      audience: trustAudience(sa.projectId, id),
      permissions: "[]",
      permissions_version: 0,
      creator_user_id: userId,
      create_time: now,
      ...fields,
    };
    noteCreated(trustName(row.project_id, id));
    await db.insertInto("ci_trusts").values(row).execute();
  }
  return { setupId, pairingCode, audience: row.audience, expireTimeMs, trust: toView(row, now) };
}

/**
 * The workflow's temporary verification step: pairing code plus an assertion requested with the
 * trust's audience. Records the observed identity; grants nothing.
 */
export async function verifySetup(
  ctx: CiContext,
  input: { setupId: string; pairingCode: string; assertion: string },
): Promise<{ trust: CiTrustView }> {
  const { db } = ctx;
  const now = ctx.now();
  if (!input.setupId || !/^[a-z0-9]{1,40}$/.test(input.setupId))
    throw invalidArgument("setupId", "is required");
  const r = await db
    .selectFrom("ci_trusts")
    .selectAll()
    .where("setup_id", "=", input.setupId)
    .executeTakeFirst();
  const want = r?.pairing_hash ? Buffer.from(r.pairing_hash, "hex") : randomBytes(32);
  const ok = timingSafeEqual(want, hashCode(input.pairingCode ?? ""));
  if (!r || !ok || r.state === "DELETED") throw new CiPairingInvalidError();
  const state = stateOf(r, now);
  if (state === "EXPIRED") throw new CiSetupExpiredError(r.setup_expire_time ?? 0);
  if (state !== "VERIFICATION_PENDING") {
    throw new CiTrustStateError(state, `the trust is ${state}; there is no verification pending`);
  }
  const claims = await verifyAssertion(ctx.jwks, input.assertion, {
    issuer: r.issuer,
    audience: r.audience,
    nowMs: now,
    leewaySeconds: ctx.options.leewaySeconds,
    maxLifetimeSeconds: ctx.options.maxAssertionLifetimeSeconds,
  });
  checkAgainstIntended(claims, intendedOf(r));
  await consumeJti(ctx, claims);
  const observed = observedFrom(claims);
  // Conditional on the same window, so two concurrent verifications cannot both record an identity.
  const res = await db
    .updateTable("ci_trusts")
    .set({
      state: "IDENTITY_OBSERVED",
      observed: JSON.stringify(observed),
      observe_time: now,
      ...NO_PAIRING,
      update_time: now,
    })
    .where("id", "=", r.id)
    .where("setup_id", "=", input.setupId)
    .where("state", "=", "VERIFICATION_PENDING")
    .executeTakeFirst();
  if (Number(res.numUpdatedRows) !== 1) throw new CiPairingInvalidError();
  return { trust: toView(await loadTrust(db, trustName(r.project_id, r.id)), now) };
}

async function accountPermissions(db: Db, r: CiTrustTable): Promise<Capability[]> {
  const sa = await db
    .selectFrom("service_accounts")
    .select("permissions")
    .where("id", "=", r.service_account_id)
    .executeTakeFirstOrThrow();
  return JSON.parse(sa.permissions) as Capability[];
}

function validatePermissions(perms: readonly string[], allowed: readonly Capability[]): Capability[] {
  if (perms.length === 0) throw invalidArgument("permissions", "approve at least one permission");
  const out = new Set<Capability>();
  for (const p of perms) {
    if (!isCapability(p)) throw invalidArgument("permissions", `"${p}" is not a capability`);
    if (!allowed.includes(p)) {
      throw invalidArgument(
        "permissions",
        `${p} exceeds the service account's permissions (${allowed.join(", ")})`,
      );
    }
    out.add(p);
  }
  return [...out].sort();
}

/** IDENTITY_OBSERVED → APPROVED with a subset of the service account's permissions. */
export async function approveTrust(
  ctx: CiContext,
  userId: string,
  input: { name: string; permissions: readonly string[] },
): Promise<CiTrustView> {
  await requireTrustOwner(ctx.db, userId, parseTrustName(input.name).projectId);
  const r = await loadTrust(ctx.db, input.name);
  const state = stateOf(r, ctx.now());
  if (state !== "IDENTITY_OBSERVED") {
    throw new CiTrustStateError(state, `only an observed identity can be approved; the trust is ${state}`);
  }
  const perms = validatePermissions(input.permissions, await accountPermissions(ctx.db, r));
  return viewUpdate(ctx, r, "IDENTITY_OBSERVED", {
    state: "APPROVED",
    permissions: JSON.stringify(perms),
    approver_user_id: userId,
    approve_time: ctx.now(),
  });
}

/** Replaces the approved permissions; outstanding tokens stop working (version bump). */
export async function updatePermissions(
  ctx: CiContext,
  userId: string,
  input: { name: string; permissions: readonly string[] },
): Promise<CiTrustView> {
  await requireTrustOwner(ctx.db, userId, parseTrustName(input.name).projectId);
  const r = await loadTrust(ctx.db, input.name);
  if (r.state !== "APPROVED" && r.state !== "DISABLED") {
    const state = stateOf(r, ctx.now());
    throw new CiTrustStateError(state, `the trust is ${state}; approve it instead`);
  }
  const perms = validatePermissions(input.permissions, await accountPermissions(ctx.db, r));
  return viewUpdate(ctx, r, r.state, { permissions: JSON.stringify(perms) });
}

/** A pending pairing cleared: once the identity is observed, or the trust is disabled or deleted. */
const NO_PAIRING = { pairing_hash: null, setup_id: null, setup_expire_time: null } as const;

/** The trust `name`, for a user who must own its project. */
async function loadOwnedTrust(ctx: CiContext, userId: string, name: string): Promise<CiTrustTable> {
  await requireTrustOwner(ctx.db, userId, parseTrustName(name).projectId);
  return loadTrust(ctx.db, name);
}

/** Emergency revocation: exchanges and outstanding tokens stop at once. */
export async function disableTrust(ctx: CiContext, userId: string, name: string): Promise<CiTrustView> {
  const r = await loadOwnedTrust(ctx, userId, name);
  return viewUpdate(ctx, r, r.state, { state: "DISABLED", ...NO_PAIRING });
}

export async function deleteTrust(ctx: CiContext, userId: string, name: string): Promise<void> {
  const r = await loadOwnedTrust(ctx, userId, name);
  await update(ctx, r, r.state, { state: "DELETED", ...NO_PAIRING });
  await ctx.db.deleteFrom("ci_tokens").where("trust_id", "=", r.id).execute();
}

export async function getTrust(ctx: CiContext, userId: string, name: string): Promise<CiTrustView> {
  // The project from the name first: another project's caller learns nothing of whether it exists.
  await requireMember(ctx.db, parseTrustName(name).projectId, userId);
  const r = await loadTrust(ctx.db, name);
  return toView(r, ctx.now());
}

export async function listTrusts(ctx: CiContext, userId: string, parent: string): Promise<CiTrustView[]> {
  const projectId = parseProjectName(parent, "parent");
  await requireMember(ctx.db, projectId, userId);
  const rows = await ctx.db
    .selectFrom("ci_trusts")
    .selectAll()
    .where("project_id", "=", projectId)
    .where("state", "!=", "DELETED")
    .orderBy("create_time")
    .orderBy("id")
    .execute();
  const now = ctx.now();
  return rows.map((r) => toView(r, now));
}

async function viewUpdate(
  ctx: CiContext,
  r: CiTrustTable,
  fromState: CiTrustTable["state"],
  set: Partial<CiTrustTable>,
): Promise<CiTrustView> {
  return toView(await update(ctx, r, fromState, set), ctx.now());
}

/** Applies a change guarded by the state read, bumping the version so outstanding tokens die. */
async function update(
  ctx: CiContext,
  r: CiTrustTable,
  fromState: CiTrustTable["state"],
  set: Partial<CiTrustTable>,
): Promise<CiTrustTable> {
  const now = ctx.now();
  const version = r.permissions_version + 1;
  const res = await ctx.db
    .updateTable("ci_trusts")
    .set({ ...set, permissions_version: version, update_time: now })
    .where("id", "=", r.id)
    .where("state", "=", fromState)
    .where("permissions_version", "=", r.permissions_version)
    .executeTakeFirst();
  if (Number(res.numUpdatedRows) !== 1) {
    throw new CiTrustStateError(r.state, "the trust changed concurrently; read it again and retry");
  }
  return { ...r, ...set, permissions_version: version, update_time: now };
}
