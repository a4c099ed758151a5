/**
 * People and their roles in projects: the users the operator creates (a password hashed with
 * passwords.ts) and the memberships that give them a role (capabilities.ts) in a project.
 */
import { noteCreated } from "../call-notes.ts";
import type { Db } from "../db/database.ts";
import { invalidArgument, notFound, SvcError } from "../errors.ts";
import { checkFreeText, MAX_DISPLAY_NAME, MAX_EMAIL, MAX_PASSWORD } from "../free-text.ts";
import { newId } from "../ids.ts";
import { parseProjectName } from "../inventory/names.ts";
import { type Role, roles } from "./capabilities.ts";
import { hashPassword } from "./passwords.ts";

export interface UserView {
  name: string;
  email: string;
  displayName: string;
  createTimeUnix: bigint;
}

const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,255}$/;

export async function createUser(
  db: Db,
  input: { email: string; displayName: string; password: string },
  nowMs: number,
): Promise<UserView> {
  const email = input.email.trim().toLowerCase();
  if (email.length > MAX_EMAIL || !EMAIL.test(email))
    throw invalidArgument("email", `must be an email address (at most ${MAX_EMAIL} characters)`);
  const displayName = checkFreeText("displayName", input.displayName, { max: MAX_DISPLAY_NAME });
  checkFreeText("password", input.password, { max: MAX_PASSWORD, trim: false });
  if (input.password.length < 12) throw invalidArgument("password", "must be at least 12 characters");
  const exists = await db.selectFrom("users").select("id").where("email", "=", email).executeTakeFirst();
  if (exists)
    throw new SvcError("already_exists", "a user with this email already exists", {
      reason: "ALREADY_EXISTS",
    });
  const row = {
    id: newId(),
    email,
    display_name: displayName || email,
    password_hash: await hashPassword(input.password),
    create_time: nowMs,
  };
  noteCreated(`users/${row.id}`);
  await db.insertInto("users").values(row).execute();
  return toUser(row);
}

const toUser = (r: { id: string; email: string; display_name: string; create_time: number }): UserView => ({
  name: `users/${r.id}`,
  email: r.email,
  displayName: r.display_name,
  createTimeUnix: BigInt(Math.floor(r.create_time / 1000)),
});

export async function listUsers(db: Db): Promise<UserView[]> {
  const rows = await db
    .selectFrom("users")
    .select(["id", "email", "display_name", "create_time"])
    .orderBy("email")
    .execute();
  return rows.map(toUser);
}

export function parseUserName(name: string, field = "user"): string {
  const m = /^users\/([a-z0-9]{1,40})$/.exec(name);
  if (!m) throw invalidArgument(field, "must be users/<id>");
  return m[1];
}

export interface MemberView {
  project: string;
  user: string;
  role: Role;
}

export async function setMember(
  db: Db,
  input: { project: string; user: string; role: string },
  nowMs: number,
): Promise<MemberView> {
  const projectId = parseProjectName(input.project, "project");
  const userId = parseUserName(input.user);
  if (!(roles as readonly string[]).includes(input.role)) {
    throw invalidArgument("role", `must be one of ${roles.join(", ")}`);
  }
  const role = input.role as Role;
  const [p, u] = await Promise.all([
    db.selectFrom("projects").select("id").where("id", "=", projectId).executeTakeFirst(),
    db.selectFrom("users").select("id").where("id", "=", userId).executeTakeFirst(),
  ]);
  if (!p) throw notFound(input.project);
  if (!u) throw notFound(input.user);
  await db
    .insertInto("memberships")
    .values({ project_id: projectId, user_id: userId, role, create_time: nowMs })
    .onConflict((oc) => oc.columns(["project_id", "user_id"]).doUpdateSet({ role }))
    .execute();
  return { project: input.project, user: input.user, role };
}

export async function removeMember(db: Db, input: { project: string; user: string }): Promise<void> {
  const projectId = parseProjectName(input.project, "project");
  const userId = parseUserName(input.user);
  const r = await db
    .deleteFrom("memberships")
    .where("project_id", "=", projectId)
    .where("user_id", "=", userId)
    .executeTakeFirst();
  if (Number(r.numDeletedRows) === 0) throw notFound(`membership of ${input.user} in ${input.project}`);
}

export async function listMembers(db: Db, project: string): Promise<MemberView[]> {
  const projectId = parseProjectName(project, "project");
  const rows = await db
    .selectFrom("memberships")
    .select(["user_id", "role"])
    .where("project_id", "=", projectId)
    .orderBy("user_id")
    .execute();
  return rows.map((r) => ({ project, user: `users/${r.user_id}`, role: r.role }));
}
