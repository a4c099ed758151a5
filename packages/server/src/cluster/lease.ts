import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { Db } from "../db/database.ts";

/** This process, as a lease holder: unique even for two replicas on one host. */
export const processHolderId = `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;

/**
 * Takes the named lease when it is free or expired, or renews it when `holder` has it; true when
 * `holder` holds it until nowMs + ttlMs. One statement decides, so two calls of the same holder never
 * lose to each other (an UPDATE then an INSERT did: both updates missed the missing row, one insert
 * won, and the holder's other call answered false for a lease it held). PostgreSQL's ON CONFLICT
 * locks the row and re-checks the condition, so among competing replicas exactly one wins; SQLite
 * has one writer.
 */
export async function holdLease(
  db: Db,
  name: string,
  holder: string,
  nowMs: number,
  ttlMs: number,
): Promise<boolean> {
  const row = await db
    .insertInto("leases")
    .values({ name, holder, expire_time: nowMs + ttlMs })
    .onConflict((oc) =>
      oc
        .column("name")
        .doUpdateSet({ holder, expire_time: nowMs + ttlMs })
        .where((eb) => eb.or([eb("leases.holder", "=", holder), eb("leases.expire_time", "<=", nowMs)])),
    )
    .returning("name")
    .executeTakeFirst();
  return row !== undefined;
}

/** Gives the lease up (a clean shutdown), so another replica need not wait for it to expire. */
export async function releaseLease(db: Db, name: string, holder: string): Promise<void> {
  await db.deleteFrom("leases").where("name", "=", name).where("holder", "=", holder).execute();
}
