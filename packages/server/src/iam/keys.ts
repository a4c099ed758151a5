import { noteCreated } from "../call-notes.ts";
import type { Db } from "../db/database.ts";
import type { ApiKeyTable } from "../db/schema.ts";
import { invalidArgument, notFound, SvcError } from "../errors.ts";
import { checkFreeText, MAX_CREDENTIAL_NAME } from "../free-text.ts";
import { newId } from "../ids.ts";
import { parseProjectName } from "../inventory/names.ts";
import { type Capability, isCapability, rolePermissions } from "./capabilities.ts";
import { bodyHash, findReplay, recordResult, validateRequestId } from "./idempotency.ts";
import { type Actor, requireMember, requireOwner } from "./membership.ts";
import { generateSecret, hashSecret, secretHint } from "./secrets.ts";
import { parseServiceAccountName } from "./service-accounts.ts";

export const DEFAULT_EXPIRE_DAYS = 90;
export const MAX_EXPIRE_DAYS = 365;
export const MAX_OVERLAP_SECONDS = 86_400;
const DAY_MS = 86_400_000;

export interface KeyView {
  name: string;
  displayName: string;
  kind: "PERSONAL" | "SERVICE_ACCOUNT";
  capabilities: string[];
  secretHint: string;
  createTimeUnix: bigint;
  expireTimeUnix: bigint;
  state: "ACTIVE" | "REVOKED" | "EXPIRED";
  revokeTimeUnix: bigint;
  creator: string;
  /** An active key that a rotation retires: when it stops; 0n otherwise. */
  stopTimeUnix: bigint;
  /** With stopTimeUnix: the newest key of its rotation lineage, which replaces it ("" when unknown). */
  replacedBy: string;
  lastUsedTimeUnix: bigint;
  lastClientAddress: string;
}

export interface CreatedKey {
  key: KeyView;
  /** Only on the first response. */
  secret?: string;
  replayed: boolean;
}

interface Parent {
  projectId: string;
  serviceAccountId: string | null;
}

function parseParent(parent: string): Parent {
  if (parent.includes("/serviceAccounts/")) {
    const { projectId, id } = parseServiceAccountName(parent, "parent");
    return { projectId, serviceAccountId: id };
  }
  return { projectId: parseProjectName(parent, "parent"), serviceAccountId: null };
}

export function keyName(r: Pick<ApiKeyTable, "project_id" | "service_account_id" | "id">): string {
  return r.service_account_id
    ? `projects/${r.project_id}/serviceAccounts/${r.service_account_id}/keys/${r.id}`
    : `projects/${r.project_id}/keys/${r.id}`;
}

function parseKeyName(name: string): { projectId: string; serviceAccountId: string | null; id: string } {
  const m =
    /^projects\/([a-z][a-z0-9-]{2,39})(?:\/serviceAccounts\/([a-z0-9]{1,40}))?\/keys\/([a-z0-9]{1,40})$/.exec(
      name,
    );
  if (!m) throw invalidArgument("name", "must be a key name as returned by the API");
  return { projectId: m[1], serviceAccountId: m[2] ?? null, id: m[3] };
}

export function keyView(r: ApiKeyTable, nowMs: number, replacedBy = ""): KeyView {
  const revoked = r.revoke_time !== null && r.revoke_time <= nowMs;
  // A revoke time still ahead is a rotation's overlap: the key works until then.
  const stopping = r.revoke_time !== null && !revoked && r.expire_time > nowMs;
  return {
    name: keyName(r),
    displayName: r.display_name,
    kind: r.kind,
    capabilities: JSON.parse(r.capabilities) as string[],
    secretHint: r.secret_hint,
    createTimeUnix: BigInt(Math.floor(r.create_time / 1000)),
    expireTimeUnix: BigInt(Math.floor(r.expire_time / 1000)),
    state: revoked ? "REVOKED" : r.expire_time <= nowMs ? "EXPIRED" : "ACTIVE",
    revokeTimeUnix: BigInt(revoked && r.revoke_time !== null ? Math.floor(r.revoke_time / 1000) : 0),
    creator: `users/${r.creator_user_id}`,
    stopTimeUnix: BigInt(stopping && r.revoke_time !== null ? Math.floor(r.revoke_time / 1000) : 0),
    replacedBy: stopping ? replacedBy : "",
    lastUsedTimeUnix: BigInt(Math.floor(Number(r.last_used_time ?? 0) / 1000)),
    lastClientAddress: r.last_used_address,
  };
}

function expireDays(days: number, field = "expireDays"): number {
  if (!Number.isInteger(days) || days < 0) throw invalidArgument(field, "must be a whole number of days");
  if (days > MAX_EXPIRE_DAYS) {
    throw invalidArgument(field, `must be at most ${MAX_EXPIRE_DAYS} days (one year)`, {
      reason: "EXPIRY_TOO_LONG",
      metadata: { maxDays: String(MAX_EXPIRE_DAYS) },
    });
  }
  return days === 0 ? DEFAULT_EXPIRE_DAYS : days;
}

/** The actor must be an owner of the project (personal keys: any member, for themselves). */
async function checkActorCanManage(db: Db, actor: Actor, parent: Parent): Promise<readonly Capability[]> {
  if (parent.serviceAccountId === null) {
    return rolePermissions[await requireMember(db, parent.projectId, actor.userId)];
  }
  await requireOwner(db, parent.projectId, actor.userId, "manage service-account keys");
  const sa = await db
    .selectFrom("service_accounts")
    .select(["permissions"])
    .where("project_id", "=", parent.projectId)
    .where("id", "=", parent.serviceAccountId)
    .executeTakeFirst();
  if (!sa) throw notFound(`projects/${parent.projectId}/serviceAccounts/${parent.serviceAccountId}`);
  return JSON.parse(sa.permissions) as Capability[];
}

function validateCapabilities(caps: readonly string[], allowed: readonly Capability[]): Capability[] {
  if (caps.length === 0) throw invalidArgument("capabilities", "at least one capability is required");
  const out: Capability[] = [];
  for (const c of caps) {
    if (!isCapability(c)) throw invalidArgument("capabilities", `"${c}" is not a capability`);
    if (!allowed.includes(c)) {
      throw invalidArgument(
        "capabilities",
        `${c} exceeds the identity's permissions (${allowed.join(", ")})`,
      );
    }
    if (!out.includes(c)) out.push(c);
  }
  return out.sort();
}

export interface CreateKeyInput {
  parent: string;
  displayName: string;
  capabilities: readonly string[];
  expireDays: number;
  requestId: string;
}

export async function createKey(
  db: Db,
  actor: Actor,
  input: CreateKeyInput,
  nowMs: number,
): Promise<CreatedKey> {
  // Authorization first (issue 35): the parent names the project; a stranger or a viewer is refused
  // before any other field is looked at.
  const parent = parseParent(input.parent);
  const allowed = await checkActorCanManage(db, actor, parent);
  validateRequestId(input.requestId);
  const displayName = checkFreeText("displayName", input.displayName, {
    max: MAX_CREDENTIAL_NAME,
    required: true,
  });
  const days = expireDays(input.expireDays);
  const scope = `CreateKey:${actor.userId}`;
  const hash = bodyHash({ ...input, requestId: undefined });
  const replay = await findReplay<{ keyId: string }>(db, scope, input.requestId, hash);
  if (replay) {
    const again = await replayed(db, replay.keyId, nowMs);
    noteCreated(again.key.name);
    return again;
  }
  const caps = validateCapabilities(input.capabilities, allowed);
  return issue(db, actor, scope, input.requestId, hash, nowMs, {
    projectId: parent.projectId,
    serviceAccountId: parent.serviceAccountId,
    displayName,
    caps,
    days,
    rotationGroup: newId(),
    created: true,
  });
}

async function replayed(db: Db, keyId: string, nowMs: number): Promise<CreatedKey> {
  const r = await db.selectFrom("api_keys").selectAll().where("id", "=", keyId).executeTakeFirstOrThrow();
  return { key: keyView(r, nowMs), replayed: true };
}

interface IssueSpec {
  projectId: string;
  serviceAccountId: string | null;
  displayName: string;
  caps: Capability[];
  days: number;
  rotationGroup: string;
  /** Rotation: keys of the group other than the new one stop at this time. */
  retireOthersAtMs?: number;
  /** Recovery: this key (whose secret was lost) is revoked in the same transaction, before the insert. */
  revokeKeyId?: string;
  /** CreateKey: its event names the new key (a rotation's and a recovery's name the key they replace). */
  created?: boolean;
}

async function issue(
  db: Db,
  actor: Actor,
  scope: string,
  requestId: string,
  hash: string,
  nowMs: number,
  spec: IssueSpec,
): Promise<CreatedKey> {
  const secret = generateSecret(spec.serviceAccountId ? "serviceAccount" : "personal");
  const row: ApiKeyTable = {
    id: newId(),
    project_id: spec.projectId,
    kind: spec.serviceAccountId ? "SERVICE_ACCOUNT" : "PERSONAL",
    service_account_id: spec.serviceAccountId,
    owner_user_id: spec.serviceAccountId ? null : actor.userId,
    creator_user_id: actor.userId,
    display_name: spec.displayName,
    capabilities: JSON.stringify(spec.caps),
    secret_hash: hashSecret(secret),
    secret_hint: secretHint(secret),
    rotation_group: spec.rotationGroup,
    create_time: nowMs,
    expire_time: nowMs + spec.days * DAY_MS,
    revoke_time: null,
    last_used_time: null,
    last_used_address: "",
  };
  if (spec.created) noteCreated(keyName(row));
  try {
    await db.transaction().execute(async (tx) => {
      // The idempotency record goes first: a concurrent duplicate fails on its primary key and
      // issues nothing.
      await recordResult(
        tx,
        scope,
        requestId,
        hash,
        spec.revokeKeyId ? { keyId: row.id, lostKeyId: spec.revokeKeyId } : { keyId: row.id },
        nowMs,
      );
      if (spec.revokeKeyId !== undefined) {
        // Claims the lost key for this recovery: a concurrent recovery of the same key under another
        // request id fails on this primary key and issues nothing.
        await recordResult(
          tx,
          recoveredScope(spec.revokeKeyId),
          spec.revokeKeyId,
          "",
          { recoveredBy: requestId },
          nowMs,
        );
        await tx
          .updateTable("api_keys")
          .set({ revoke_time: nowMs })
          .where("id", "=", spec.revokeKeyId)
          .where((eb) => eb.or([eb("revoke_time", "is", null), eb("revoke_time", ">", nowMs)]))
          .execute();
      }
      await tx.insertInto("api_keys").values(row).execute();
      if (spec.retireOthersAtMs !== undefined) {
        const at = spec.retireOthersAtMs;
        await tx
          .updateTable("api_keys")
          .set({ revoke_time: at })
          .where("rotation_group", "=", spec.rotationGroup)
          .where("id", "!=", row.id)
          .where((eb) => eb.or([eb("revoke_time", "is", null), eb("revoke_time", ">", at)]))
          .execute();
      }
    });
  } catch (err) {
    const replay = await findReplay<{ keyId: string }>(db, scope, requestId, hash);
    if (replay) return replayed(db, replay.keyId, nowMs);
    throw err;
  }
  return { key: keyView(row, nowMs), secret, replayed: false };
}

/** Authorizes from the name, then loads: a caller without access learns nothing of whether it exists. */
async function loadKey(db: Db, actor: Actor, name: string): Promise<ApiKeyTable> {
  const ref = parseKeyName(name);
  await checkActorCanManage(db, actor, ref);
  const r = await db
    .selectFrom("api_keys")
    .selectAll()
    .where("project_id", "=", ref.projectId)
    .where("id", "=", ref.id)
    .executeTakeFirst();
  if (!r || r.service_account_id !== ref.serviceAccountId) throw notFound(name);
  if (r.kind === "PERSONAL" && r.owner_user_id !== actor.userId) {
    // Another member's personal key is theirs to manage; say not found rather than confirm it exists.
    throw notFound(name);
  }
  return r;
}

export async function listKeys(db: Db, actor: Actor, parent: string, nowMs: number): Promise<KeyView[]> {
  const p = parseParent(parent);
  await checkActorCanManage(db, actor, p);
  let q = db.selectFrom("api_keys").selectAll().where("project_id", "=", p.projectId);
  q = p.serviceAccountId
    ? q.where("service_account_id", "=", p.serviceAccountId)
    : q.where("kind", "=", "PERSONAL").where("owner_user_id", "=", actor.userId);
  const rows = await q.orderBy("create_time").orderBy("id").execute();
  // Keys of one rotation lineage share a parent, so the list holds each retiring key's replacement: the
  // lineage's newest key that no rotation retires (rows are oldest first; a rotation in the same
  // millisecond ties on create_time, so the missing revoke time decides).
  const newest = new Map<string, ApiKeyTable>();
  for (const r of rows) if (r.revoke_time === null) newest.set(r.rotation_group, r);
  return rows.map((r) => {
    const n = newest.get(r.rotation_group);
    return keyView(r, nowMs, n && n.id !== r.id ? keyName(n) : "");
  });
}

export interface RotateKeyInput {
  name: string;
  overlapSeconds: number;
  expireDays: number;
  requestId: string;
}

/** New key with the same parent and capabilities; older keys of its lineage stop after the overlap. */
export async function rotateKey(
  db: Db,
  actor: Actor,
  input: RotateKeyInput,
  nowMs: number,
): Promise<CreatedKey> {
  await checkActorCanManage(db, actor, parseKeyName(input.name));
  validateRequestId(input.requestId);
  if (!Number.isInteger(input.overlapSeconds) || input.overlapSeconds < 0) {
    throw invalidArgument("overlapSeconds", "must be a whole number of seconds, 0 or more");
  }
  if (input.overlapSeconds > MAX_OVERLAP_SECONDS) {
    throw invalidArgument("overlapSeconds", `must be at most ${MAX_OVERLAP_SECONDS} (24 hours)`);
  }
  const days = expireDays(input.expireDays);
  const scope = `RotateKey:${actor.userId}`;
  const hash = bodyHash({ ...input, requestId: undefined });
  const replay = await findReplay<{ keyId: string }>(db, scope, input.requestId, hash);
  if (replay) return replayed(db, replay.keyId, nowMs);
  const old = await loadKey(db, actor, input.name);
  if (old.revoke_time !== null && old.revoke_time <= nowMs) {
    throw new SvcError("failed_precondition", "name: the key is revoked", {
      reason: "INVALID_FIELD",
      metadata: { field: "name" },
    });
  }
  const allowed = await checkActorCanManage(db, actor, {
    projectId: old.project_id,
    serviceAccountId: old.service_account_id,
  });
  const caps = validateCapabilities(JSON.parse(old.capabilities) as string[], allowed);
  return issue(db, actor, scope, input.requestId, hash, nowMs, {
    projectId: old.project_id,
    serviceAccountId: old.service_account_id,
    displayName: old.display_name,
    caps,
    days,
    rotationGroup: old.rotation_group,
    retireOthersAtMs: nowMs + input.overlapSeconds * 1000,
  });
}

/** Immediate: the next request with the key is refused. */
export async function revokeKey(db: Db, actor: Actor, name: string, nowMs: number): Promise<KeyView> {
  const r = await loadKey(db, actor, name);
  if (r.revoke_time === null || r.revoke_time > nowMs) {
    await db.updateTable("api_keys").set({ revoke_time: nowMs }).where("id", "=", r.id).execute();
    r.revoke_time = nowMs;
  }
  return keyView(r, nowMs);
}

export interface RecoverLostKeyInput {
  lostRequestId: string;
  requestId: string;
}

export interface RecoveredKey extends CreatedKey {
  /** The key whose secret was lost, now revoked. */
  revokedKey: KeyView;
}

/** Scopes whose request ids can name a lost key, newest kind last. */
const recoverableScopes = ["CreateKey", "RotateKey", "RecoverLostKey"] as const;

/**
 * Lost-secret recovery (docs/api.md) in one server step: the key issued by the caller's earlier create, rotate or recovery with
 * `lostRequestId` is revoked and a replacement with the same parent, display name, capabilities,
 * lifetime and rotation lineage is issued, in one transaction (revocation first). Other keys of the
 * lineage keep their own end times. The recovery is itself idempotent on `requestId`.
 */
export async function recoverLostKey(
  db: Db,
  actor: Actor,
  input: RecoverLostKeyInput,
  nowMs: number,
): Promise<RecoveredKey> {
  validateRequestId(input.requestId);
  validateRequestId(input.lostRequestId, "lostRequestId");
  if (input.lostRequestId === input.requestId)
    throw invalidArgument("requestId", "must differ from lostRequestId (a new id for the recovery)");
  const scope = `RecoverLostKey:${actor.userId}`;
  const hash = bodyHash({ ...input, requestId: undefined });
  const replay = await findReplay<{ keyId: string; lostKeyId: string }>(db, scope, input.requestId, hash);
  if (replay) return recoveredReplay(db, replay, nowMs);
  const found: string[] = [];
  for (const kind of recoverableScopes) {
    const r = await db
      .selectFrom("idempotency_records")
      .select(["result"])
      .where("scope", "=", `${kind}:${actor.userId}`)
      .where("request_id", "=", input.lostRequestId)
      .executeTakeFirst();
    if (r) found.push((JSON.parse(r.result) as { keyId: string }).keyId);
  }
  if (found.length === 0) {
    throw new SvcError(
      "not_found",
      "lostRequestId: no key create, rotation or recovery of yours used this request id in the last 48 hours; if the original request never reached svc, retry it with the same requestId",
      { reason: "NOT_FOUND" },
    );
  }
  if (found.length > 1) {
    throw invalidArgument(
      "lostRequestId",
      "names more than one of your requests; revoke the lost key by name and create a new one",
    );
  }
  const lostRow = await db.selectFrom("api_keys").selectAll().where("id", "=", found[0]).executeTakeFirst();
  if (!lostRow) throw notFound(`the key of request ${input.lostRequestId}`);
  const lost = await loadKey(db, actor, keyName(lostRow));
  // A key is recovered once: recovering it again under a new id would leave the first replacement,
  // whose secret may be lost as well, active. That replacement is the one to recover now.
  await refuseRecovered(db, lost.id);
  const allowed = await checkActorCanManage(db, actor, {
    projectId: lost.project_id,
    serviceAccountId: lost.service_account_id,
  });
  const caps = validateCapabilities(JSON.parse(lost.capabilities) as string[], allowed);
  const days = Math.max(1, Math.round((lost.expire_time - lost.create_time) / DAY_MS));
  const created = await issue(db, actor, scope, input.requestId, hash, nowMs, {
    projectId: lost.project_id,
    serviceAccountId: lost.service_account_id,
    displayName: lost.display_name,
    caps,
    days: Math.min(days, MAX_EXPIRE_DAYS),
    rotationGroup: lost.rotation_group,
    revokeKeyId: lost.id,
  }).catch(async (err: unknown) => {
    await refuseRecovered(db, lost.id); // lost the race to a concurrent recovery of the same key
    throw err;
  });
  if (created.replayed) {
    const again = await findReplay<{ keyId: string; lostKeyId: string }>(db, scope, input.requestId, hash);
    if (again) return recoveredReplay(db, again, nowMs);
  }
  const revoked = await db
    .selectFrom("api_keys")
    .selectAll()
    .where("id", "=", lost.id)
    .executeTakeFirstOrThrow();
  return { ...created, revokedKey: keyView(revoked, nowMs) };
}

const recoveredScope = (keyId: string) => `RecoveredKey:${keyId}`;

async function refuseRecovered(db: Db, keyId: string): Promise<void> {
  const claim = await db
    .selectFrom("idempotency_records")
    .select(["result"])
    .where("scope", "=", recoveredScope(keyId))
    .where("request_id", "=", keyId)
    .executeTakeFirst();
  if (!claim) return;
  const by = (JSON.parse(claim.result) as { recoveredBy: string }).recoveredBy;
  throw invalidArgument(
    "lostRequestId",
    `this key was already recovered by request ${by}; retry that recovery with the same requestId, or recover its replacement with lostRequestId ${by}`,
  );
}

async function recoveredReplay(
  db: Db,
  r: { keyId: string; lostKeyId: string },
  nowMs: number,
): Promise<RecoveredKey> {
  const created = await replayed(db, r.keyId, nowMs);
  const lost = await db
    .selectFrom("api_keys")
    .selectAll()
    .where("id", "=", r.lostKeyId)
    .executeTakeFirstOrThrow();
  return { ...created, revokedKey: keyView(lost, nowMs) };
}
