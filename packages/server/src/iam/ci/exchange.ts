import type { Db } from "../../db/database.ts";
import { permissionDenied, unauthenticated } from "../../errors.ts";
import { newId } from "../../ids.ts";
import { projectName } from "../../inventory/names.ts";
import type { Capability } from "../capabilities.ts";
import type { CiTokenPrincipal, TokenResolver } from "../principal.ts";
import { generateSecret, hashSecret } from "../secrets.ts";
import { verifyAssertion } from "./assertion.ts";
import {
  CiAssertionInvalidError,
  CiTrustDisabledError,
  CiTrustStateError,
  CiUnverifiedExchangeError,
  UNVERIFIED_PROBLEMS,
} from "./errors.ts";
import { checkAgainstApproved, type ObservedIdentity } from "./identity.ts";
import { consumeJti } from "./jti.ts";
import { type CiContext, findTrust, intendedOf, stateOf } from "./trusts.ts";

export interface ExchangedToken {
  /** svct_…; returned once, stored only as a hash. */
  accessToken: string;
  projectName: string;
  expireTimeMs: number;
  /** Who exchanged: the trust's account and the identity token's claims, as its calls are recorded. */
  identity: CiTokenIdentity;
}

/** What a CI token's audit events name: its account, its trust and the exchanged identity token's claims. */
export interface CiTokenIdentity {
  readonly projectId: string;
  /** The service account's id. */
  readonly identityId: string;
  readonly trustId: string;
  readonly repository: string;
  readonly workflow: string;
  readonly ref: string;
}

/**
 * ExchangeCIToken: the assertion must verify against the trust's pinned issuer and audience and match
 * the approved identity claim by claim; the trust must be approved and its service account active.
 * The token carries the approved permissions of this moment; every request intersects them with the
 * account's current permissions (see {@link ciTokenResolver}).
 *
 * Until the signature has verified, an unknown trust name and a bad assertion get the same answer
 * ({@link CiUnverifiedExchangeError}); a malformed trust name is still invalid_argument, as its syntax
 * says nothing about which trusts exist.
 */
export async function exchange(
  ctx: CiContext,
  input: { trustName: string; assertion: string },
): Promise<ExchangedToken> {
  const { db, options } = ctx;
  const now = ctx.now();
  const r = await findTrust(db, input.trustName, "trustName");
  if (!r) throw new CiUnverifiedExchangeError();
  const claims = await verifyAssertion(ctx.jwks, input.assertion, {
    issuer: r.issuer,
    audience: r.audience,
    nowMs: now,
    leewaySeconds: options.leewaySeconds,
    maxLifetimeSeconds: options.maxAssertionLifetimeSeconds,
  }).catch((err: unknown) => {
    if (err instanceof CiAssertionInvalidError && UNVERIFIED_PROBLEMS.has(err.metadata.problem ?? ""))
      throw new CiUnverifiedExchangeError();
    throw err;
  });
  const state = stateOf(r, now);
  if (state === "DISABLED") throw new CiTrustDisabledError();
  if (state !== "APPROVED" || !r.observed) {
    throw new CiTrustStateError(
      state,
      `the trust is ${state}, not APPROVED; finish verification and approval first`,
    );
  }
  checkAgainstApproved(claims, JSON.parse(r.observed) as ObservedIdentity, intendedOf(r));
  const sa = await db
    .selectFrom("service_accounts")
    .select(["state"])
    .where("id", "=", r.service_account_id)
    .executeTakeFirst();
  if (sa?.state !== "ACTIVE")
    throw permissionDenied("IDENTITY_DISABLED", "the trust's service account is disabled");
  await consumeJti(ctx, claims);
  const accessToken = generateSecret("ciToken");
  const expireTimeMs = now + options.tokenTtlMs;
  await db
    .insertInto("ci_tokens")
    .values({
      id: newId(),
      trust_id: r.id,
      project_id: r.project_id,
      service_account_id: r.service_account_id,
      token_hash: hashSecret(accessToken),
      capabilities: r.permissions,
      permissions_version: r.permissions_version,
      create_time: now,
      expire_time: expireTimeMs,
      // What the audit log names for this token's calls (workflow_ref is repository/path@ref).
      repository: claims.repository,
      workflow: claims.workflow_ref,
      ref: claims.ref,
    })
    .execute();
  // Expired tokens are useless; prune them on the way (bounded by the index on expire_time).
  await db
    .deleteFrom("ci_tokens")
    .where("expire_time", "<", now - 3_600_000)
    .execute();
  return {
    accessToken,
    projectName: projectName(r.project_id),
    expireTimeMs,
    identity: {
      projectId: r.project_id,
      identityId: r.service_account_id,
      trustId: r.id,
      repository: claims.repository,
      workflow: claims.workflow_ref,
      ref: claims.ref,
    },
  };
}

/**
 * Resolves a svct_ bearer token on every request from the current rows: the trust must still be
 * approved at the same permission version, and the account's current permissions bound the token.
 */
export const ciTokenResolver: TokenResolver = async (db: Db, token: string, nowMs: number) => {
  const t = await db
    .selectFrom("ci_tokens")
    .selectAll()
    .where("token_hash", "=", hashSecret(token))
    .executeTakeFirst();
  if (!t) return undefined;
  if (t.expire_time <= nowMs) {
    throw unauthenticated(
      "the CI token expired (15 minutes); exchange a new identity token",
      "CREDENTIAL_EXPIRED",
    );
  }
  const trust = await db
    .selectFrom("ci_trusts")
    .select(["state", "permissions_version"])
    .where("id", "=", t.trust_id)
    .executeTakeFirst();
  if (!trust || trust.state === "DELETED")
    throw unauthenticated("the CI trust was deleted", "CREDENTIAL_REVOKED");
  if (trust.state === "DISABLED") throw new CiTrustDisabledError();
  if (trust.state !== "APPROVED" || trust.permissions_version !== t.permissions_version) {
    throw unauthenticated(
      "the CI trust changed since this token was issued (permissions edited or re-verification); exchange again",
      "CREDENTIAL_REVOKED",
    );
  }
  const sa = await db
    .selectFrom("service_accounts")
    .select(["state", "permissions"])
    .where("id", "=", t.service_account_id)
    .executeTakeFirst();
  const disabled = sa?.state !== "ACTIVE";
  const principal: CiTokenPrincipal = {
    kind: "CI_TOKEN",
    tokenId: t.id,
    trustId: t.trust_id,
    repository: t.repository,
    workflow: t.workflow,
    ref: t.ref,
    projectId: t.project_id,
    identityId: t.service_account_id,
    keyCapabilities: JSON.parse(t.capabilities) as Capability[],
    identityPermissions: disabled || !sa ? [] : (JSON.parse(sa.permissions) as Capability[]),
    identityProblem: disabled ? "IDENTITY_DISABLED" : undefined,
  };
  return principal;
};
