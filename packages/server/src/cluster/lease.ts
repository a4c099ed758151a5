import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { Db } from "../db/database.ts";

/** This process, as a lease holder: unique even for two replicas on one host. */
export const processHolderId = `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;

/**
 * Takes the named lease when it is free or expired, or renews it when `holder` has it; true when
 * `holder` holds it until nowMs + ttlMs. One conditional UPDATE decides between competing replicas:
 * under PostgreSQL's row lock the loser re-reads the row, sees a live lease of another holder and
 * updates nothing; SQLite has one writer. The INSERT creates the row the first time.
 */
export async function holdLease(
  db: Db,
  name: string,
  holder: string,
  nowMs: number,
  ttlMs: number,
): Promise<boolean> {
  const renewed = await db
    .updateTable("leases")
    .set({ holder, expire_time: nowMs + ttlMs })
    .where("name", "=", name)
    .where((eb) => eb.or([eb("holder", "=", holder), eb("expire_time", "<=", nowMs)]))
    .executeTakeFirst();
  if (Number(renewed.numUpdatedRows) > 0) return true;
  const created = await db
    .insertInto("leases")
    .values({ name, holder, expire_time: nowMs + ttlMs })
    .onConflict((oc) => oc.column("name").doNothing())
    .returning("name")
    .executeTakeFirst();
  return created !== undefined;
}

/** Gives the lease up (a clean shutdown), so another replica need not wait for it to expire. */
export async function releaseLease(db: Db, name: string, holder: string): Promise<void> {
  await db.deleteFrom("leases").where("name", "=", name).where("holder", "=", holder).execute();
}
