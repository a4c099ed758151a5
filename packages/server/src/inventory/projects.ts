import { noteCreated } from "../call-notes.ts";
import type { Db } from "../db/database.ts";
import { invalidArgument, notFound, SvcError } from "../errors.ts";
import { checkFreeText, MAX_DISPLAY_NAME } from "../free-text.ts";
import { PROJECT_ID, parseProjectName, projectName } from "./names.ts";

export interface ProjectView {
  name: string;
  displayName: string;
  createTimeUnix: bigint;
}

const toProject = (r: { id: string; display_name: string; create_time: number }): ProjectView => ({
  name: projectName(r.id),
  displayName: r.display_name,
  createTimeUnix: BigInt(Math.floor(r.create_time / 1000)),
});

export async function createProject(
  db: Db,
  input: { projectId: string; displayName: string },
  nowMs: number,
): Promise<ProjectView> {
  if (!PROJECT_ID.test(input.projectId)) {
    throw invalidArgument(
      "projectId",
      "must be 3..40 lowercase letters, digits or hyphens, starting with a letter",
    );
  }
  const displayName = checkFreeText("displayName", input.displayName, { max: MAX_DISPLAY_NAME });
  const exists = await db
    .selectFrom("projects")
    .select("id")
    .where("id", "=", input.projectId)
    .executeTakeFirst();
  if (exists)
    throw new SvcError("already_exists", `projects/${input.projectId} already exists`, {
      reason: "ALREADY_EXISTS",
    });
  const row = { id: input.projectId, display_name: displayName || input.projectId, create_time: nowMs };
  noteCreated(projectName(row.id));
  await db.insertInto("projects").values(row).execute();
  return toProject(row);
}

export async function getProject(db: Db, name: string): Promise<ProjectView> {
  const id = parseProjectName(name, "name");
  const r = await db.selectFrom("projects").selectAll().where("id", "=", id).executeTakeFirst();
  if (!r) throw notFound(name);
  return toProject(r);
}

export async function listProjects(db: Db): Promise<ProjectView[]> {
  return (await db.selectFrom("projects").selectAll().orderBy("id").execute()).map(toProject);
}
