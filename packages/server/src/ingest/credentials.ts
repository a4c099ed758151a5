import { timingSafeEqual } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Db } from "../db/database.ts";
import { SvcError, unauthenticated } from "../errors.ts";
import { bearerToken } from "../iam/principal.ts";
import { generateSecret, hashSecret, parseSecret } from "../iam/secrets.ts";
import { newId } from "../ids.ts";
import type { VmRef } from "../inventory/names.ts";

/**
 * Who writes metrics: the hypervisor collector (one token for the installation, any VM, hypervisor
 * series) or one guest agent (a per-VM token, that VM's guest series only).
 */
export type IngestPrincipal = { readonly kind: "collector" } | { readonly kind: "agent"; readonly vm: VmRef };

export async function authenticateIngest(
  db: Db,
  token: string | undefined,
  collectorToken: string,
  nowMs: number,
): Promise<IngestPrincipal> {
  if (!token) throw unauthenticated("missing Authorization: Bearer credential");
  const a = Buffer.from(token);
  const b = Buffer.from(collectorToken);
  if (a.length === b.length && timingSafeEqual(a, b)) return { kind: "collector" };
  if (parseSecret(token) !== "agent") throw unauthenticated("not a collector or guest-agent token");
  const row = await db
    .selectFrom("agent_tokens")
    .select(["id", "project_id", "vm_id", "create_time", "revoke_time", "first_use_time"])
    .where("token_hash", "=", hashSecret(token))
    .executeTakeFirst();
  if (!row || (row.revoke_time !== null && row.revoke_time <= nowMs)) {
    throw unauthenticated("the guest-agent token is unknown or revoked");
  }
  const vm = await db
    .selectFrom("vms")
    .select(["location", "state"])
    .where("project_id", "=", row.project_id)
    .where("vm_id", "=", row.vm_id)
    .executeTakeFirst();
  if (!vm || vm.state === "DELETED") throw unauthenticated("the guest-agent token's VM no longer exists");
  if (row.first_use_time === null) await firstUse(db, row, nowMs);
  return { kind: "agent", vm: { projectId: row.project_id, location: vm.location, vmId: row.vm_id } };
}

/**
 * An ingest route's caller from its bearer token, or undefined after answering 401 in plain text (the
 * message never echoes the token).
 */
export async function ingestPrincipalOr401(
  req: FastifyRequest,
  reply: FastifyReply,
  deps: { readonly db: Db; readonly collectorToken: string; readonly now: () => number },
): Promise<IngestPrincipal | undefined> {
  try {
    return await authenticateIngest(
      deps.db,
      bearerToken(req.headers.authorization),
      deps.collectorToken,
      deps.now(),
    );
  } catch (err) {
    if (!(err instanceof SvcError)) throw err;
    await reply.code(401).type("text/plain").send(`${err.message}\n`);
    return undefined;
  }
}

/**
 * How long a VM's previous agent tokens keep working after a new one is issued, unless the new one is
 * used first: long enough to paste the new token into the guest (or to upgrade a fleet), as a key
 * rotation's overlap is at most 24 hours (iam/keys.ts).
 */
export const AGENT_TOKEN_GRACE_MS = 24 * 3600 * 1000;

/**
 * A token's first authentication: recorded, and the VM's tokens issued before it stop now (their
 * grace period was for the time until the new token is in place). Idempotent, so two replicas seeing
 * the same first use at once do the same thing twice.
 */
async function firstUse(
  db: Db,
  row: { id: string; project_id: string; vm_id: string; create_time: number },
  nowMs: number,
): Promise<void> {
  await db.transaction().execute(async (tx) => {
    await tx
      .updateTable("agent_tokens")
      .set({ first_use_time: nowMs })
      .where("id", "=", row.id)
      .where("first_use_time", "is", null)
      .execute();
    await tx
      .updateTable("agent_tokens")
      .set({ revoke_time: nowMs })
      .where("project_id", "=", row.project_id)
      .where("vm_id", "=", row.vm_id)
      .where("create_time", "<", row.create_time)
      .where((eb) => eb.or([eb("revoke_time", "is", null), eb("revoke_time", ">", nowMs)]))
      .execute();
  });
}

/**
 * Issues a guest-agent token for a VM (one agent per VM). The VM's previous tokens keep working until
 * the new one is first used or AGENT_TOKEN_GRACE_MS passes, so re-issuing for a running agent loses
 * none of its samples. The secret is returned once and stored hashed.
 */
export async function issueAgentToken(db: Db, vm: VmRef, nowMs: number): Promise<string> {
  const token = generateSecret("agent");
  const until = nowMs + AGENT_TOKEN_GRACE_MS;
  await db.transaction().execute(async (tx) => {
    // Issue order is create order, even within one millisecond: a first use stops only older tokens.
    const newest = await tx
      .selectFrom("agent_tokens")
      .select((eb) => eb.fn.max("create_time").as("t"))
      .where("project_id", "=", vm.projectId)
      .where("vm_id", "=", vm.vmId)
      .executeTakeFirst();
    const createTime = Math.max(nowMs, Number(newest?.t ?? Number.NEGATIVE_INFINITY) + 1);
    await tx
      .updateTable("agent_tokens")
      .set({ revoke_time: until })
      .where("project_id", "=", vm.projectId)
      .where("vm_id", "=", vm.vmId)
      .where((eb) => eb.or([eb("revoke_time", "is", null), eb("revoke_time", ">", until)]))
      .execute();
    await tx
      .insertInto("agent_tokens")
      .values({
        id: newId(),
        project_id: vm.projectId,
        vm_id: vm.vmId,
        token_hash: hashSecret(token),
        create_time: createTime,
        revoke_time: null,
        first_use_time: null,
      })
      .execute();
  });
  return token;
}
