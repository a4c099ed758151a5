import { type Db, lazyCommit } from "../db/database.ts";
import type { Principal } from "../iam/principal.ts";

/** A key's last use is written at most this often: a busy key costs no write per request. */
export const LAST_USE_INTERVAL_MS = 60_000;
const MAX_REMEMBERED = 100_000;

/**
 * Remembers when each key's last use was written, per replica. Another replica may write the same
 * minute once more; the update's own condition keeps the row from going backwards.
 */
export class LastUseTracker {
  private readonly written = new Map<string, number>();
  /** Writes issued, for the bound's test and the benchmark. */
  writes = 0;

  constructor(private readonly db: Db) {}

  /** Records a key's (and its service account's) use when its last write is a minute old or more. */
  async note(p: Principal, nowMs: number, address: string): Promise<void> {
    if (p.kind !== "PERSONAL_KEY" && p.kind !== "SERVICE_ACCOUNT_KEY") return;
    const last = this.written.get(p.keyId);
    if (last !== undefined && nowMs - last < LAST_USE_INTERVAL_MS) return;
    if (this.written.size >= MAX_REMEMBERED) this.forget(nowMs);
    this.written.set(p.keyId, nowMs);
    this.writes++;
    const before = nowMs - LAST_USE_INTERVAL_MS;
    // One commit for the key and its account, which the request does not wait to flush on PostgreSQL:
    // a crash of the database server can lose at most a minute's last use, which harms nothing.
    await lazyCommit(this.db, async (trx) => {
      await trx
        .updateTable("api_keys")
        .set({ last_used_time: nowMs, last_used_address: address })
        .where("id", "=", p.keyId)
        .where((w) => w.or([w("last_used_time", "is", null), w("last_used_time", "<=", before)]))
        .execute();
      if (p.kind === "SERVICE_ACCOUNT_KEY") {
        await trx
          .updateTable("service_accounts")
          .set({ last_used_time: nowMs, last_used_address: address })
          .where("id", "=", p.identityId)
          .where((w) => w.or([w("last_used_time", "is", null), w("last_used_time", "<=", before)]))
          .execute();
      }
    });
  }

  private forget(nowMs: number): void {
    for (const [k, t] of this.written) if (nowMs - t >= LAST_USE_INTERVAL_MS) this.written.delete(k);
    if (this.written.size >= MAX_REMEMBERED) this.written.clear();
  }
}
