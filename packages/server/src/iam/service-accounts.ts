import { noteCreated } from "../call-notes.ts";
import type { Db } from "../db/database.ts";
import type { ServiceAccountTable } from "../db/schema.ts";
import { invalidArgument, notFound } from "../errors.ts";
import { checkFreeText, MAX_CREDENTIAL_NAME } from "../free-text.ts";
import { newId } from "../ids.ts";
import { parseProjectName } from "../inventory/names.ts";
import { serviceAccountTemplates } from "./capabilities.ts";
import { type Actor, requireMember, requireOwner } from "./membership.ts";

export interface ServiceAccountView {
  name: string;
  displayName: string;
  template: string;
  permissions: string[];
  state: "ACTIVE" | "DISABLED";
  createTimeUnix: bigint;
  lastUsedTimeUnix: bigint;
  lastClientAddress: string;
}

export function serviceAccountName(projectId: string, id: string): string {
  return `projects/${projectId}/serviceAccounts/${id}`;
}

/** projects/<p>/serviceAccounts/<id> → parts, or an invalid_argument naming `field`. */
export function parseServiceAccountName(name: string, field = "name"): { projectId: string; id: string } {
  const m = /^projects\/([a-z][a-z0-9-]{2,39})\/serviceAccounts\/([a-z0-9]{1,40})$/.exec(name);
  if (!m) throw invalidArgument(field, "must be projects/<project_id>/serviceAccounts/<id>");
  return { projectId: m[1], id: m[2] };
}

export function toView(r: Pick<ServiceAccountTable, keyof ServiceAccountTable>): ServiceAccountView {
  return {
    name: serviceAccountName(r.project_id, r.id),
    displayName: r.display_name,
    template: r.template,
    permissions: JSON.parse(r.permissions) as string[],
    state: r.state,
    createTimeUnix: BigInt(Math.floor(r.create_time / 1000)),
    lastUsedTimeUnix: BigInt(Math.floor(Number(r.last_used_time ?? 0) / 1000)),
    lastClientAddress: r.last_used_address,
  };
}

const OWNERS_ONLY = "manage service accounts";

export async function createServiceAccount(
  db: Db,
  actor: Actor,
  input: { parent: string; displayName: string; template: string },
  nowMs: number,
): Promise<ServiceAccountView> {
  const projectId = parseProjectName(input.parent, "parent");
  await requireOwner(db, projectId, actor.userId, OWNERS_ONLY);
  const displayName = checkFreeText("displayName", input.displayName, {
    max: MAX_CREDENTIAL_NAME,
    required: true,
  });
  const perms = serviceAccountTemplates[input.template];
  if (!perms) {
    throw invalidArgument(
      "template",
      `must be one of ${Object.keys(serviceAccountTemplates)
        .map((t) => `"${t}"`)
        .join(", ")}`,
    );
  }
  const project = await db.selectFrom("projects").select("id").where("id", "=", projectId).executeTakeFirst();
  if (!project) throw notFound(input.parent);
  const row: ServiceAccountTable = {
    id: newId(),
    project_id: projectId,
    display_name: displayName,
    template: input.template,
    permissions: JSON.stringify(perms),
    state: "ACTIVE",
    create_time: nowMs,
    last_used_time: null,
    last_used_address: "",
  };
  noteCreated(serviceAccountName(projectId, row.id));
  await db.insertInto("service_accounts").values(row).execute();
  return toView(row);
}

export async function getServiceAccount(db: Db, actor: Actor, name: string): Promise<ServiceAccountView> {
  const { projectId, id } = parseServiceAccountName(name);
  await requireMember(db, projectId, actor.userId);
  const r = await db
    .selectFrom("service_accounts")
    .selectAll()
    .where("project_id", "=", projectId)
    .where("id", "=", id)
    .executeTakeFirst();
  if (!r) throw notFound(name);
  return toView(r);
}

export async function listServiceAccounts(
  db: Db,
  actor: Actor,
  parent: string,
): Promise<ServiceAccountView[]> {
  const projectId = parseProjectName(parent, "parent");
  await requireMember(db, projectId, actor.userId);
  const rows = await db
    .selectFrom("service_accounts")
    .selectAll()
    .where("project_id", "=", projectId)
    .orderBy("create_time")
    .orderBy("id")
    .execute();
  return rows.map(toView);
}

/** Takes effect on the next request of every key of the account. */
export async function setServiceAccountState(
  db: Db,
  actor: Actor,
  name: string,
  state: "ACTIVE" | "DISABLED",
): Promise<ServiceAccountView> {
  const { projectId, id } = parseServiceAccountName(name);
  await requireOwner(db, projectId, actor.userId, OWNERS_ONLY);
  const res = await db
    .updateTable("service_accounts")
    .set({ state })
    .where("project_id", "=", projectId)
    .where("id", "=", id)
    .executeTakeFirst();
  if (Number(res.numUpdatedRows) === 0) throw notFound(name);
  return getServiceAccount(db, actor, name);
}
