import { timingSafeEqual } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Db } from "../db/database.ts";
import { SvcError, unauthenticated } from "../errors.ts";
import { bearerToken } from "../iam/principal.ts";
import { generateSecret, hashSecret, newId, parseSecret } from "../iam/secrets.ts";
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
    .select(["project_id", "vm_id", "revoke_time"])
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
 * Issues a guest-agent token for a VM, revoking the VM's previous ones (one agent per VM). The secret
 * is returned once and stored hashed.
 */
export async function issueAgentToken(db: Db, vm: VmRef, nowMs: number): Promise<string> {
  const token = generateSecret("agent");
  await db.transaction().execute(async (tx) => {
    await tx
      .updateTable("agent_tokens")
      .set({ revoke_time: nowMs })
      .where("project_id", "=", vm.projectId)
      .where("vm_id", "=", vm.vmId)
      .where("revoke_time", "is", null)
      .execute();
    await tx
      .insertInto("agent_tokens")
      .values({
        id: newId(),
        project_id: vm.projectId,
        vm_id: vm.vmId,
        token_hash: hashSecret(token),
        create_time: nowMs,
        revoke_time: null,
      })
      .execute();
  });
  return token;
}
