import type { Db } from "../db/database.ts";
import { permissionDenied } from "../errors.ts";
import type { Role } from "./capabilities.ts";

/** The human acting in a console session (keys, service accounts and CI trusts are managed by humans). */
export interface Actor {
  readonly userId: string;
}

/** The user's current role in the project, or undefined when not a member. Read on every request. */
export async function roleOf(db: Db, projectId: string, userId: string): Promise<Role | undefined> {
  const m = await db
    .selectFrom("memberships")
    .select("role")
    .where("project_id", "=", projectId)
    .where("user_id", "=", userId)
    .executeTakeFirst();
  return m?.role;
}

/** The user's role, or PROJECT_BOUNDARY when they are not a member. */
export async function requireMember(db: Db, projectId: string, userId: string): Promise<Role> {
  const role = await roleOf(db, projectId, userId);
  if (!role) throw permissionDenied("PROJECT_BOUNDARY", "you are not a member of this project");
  return role;
}

/** Owner-only operations (service accounts, their keys, CI trusts): `what` completes the message. */
export async function requireOwner(db: Db, projectId: string, userId: string, what: string): Promise<void> {
  if ((await requireMember(db, projectId, userId)) !== "owner") {
    throw permissionDenied("CAPABILITY", `only project owners ${what}`);
  }
}
