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
    if (!this.due(p.keyId, nowMs)) return;
    this.writes++;
    // An account with many keys is written once a minute too, not once per key.
    const account = p.kind === "SERVICE_ACCOUNT_KEY" && this.due(`sa:${p.identityId}`, nowMs);
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
      if (account) {
        await trx
          .updateTable("service_accounts")
          .set({ last_used_time: nowMs, last_used_address: address })
          .where("id", "=", p.identityId)
          .where((w) => w.or([w("last_used_time", "is", null), w("last_used_time", "<=", before)]))
          .execute();
      }
    });
  }

  /** Whether `id`'s last write is a minute old or more; if so, notes one now. */
  private due(id: string, nowMs: number): boolean {
    const last = this.written.get(id);
    if (last !== undefined && nowMs - last < LAST_USE_INTERVAL_MS) return false;
    if (this.written.size >= MAX_REMEMBERED) this.forget(nowMs);
    this.written.set(id, nowMs);
    return true;
  }

  private forget(nowMs: number): void {
    for (const [k, t] of this.written) if (nowMs - t >= LAST_USE_INTERVAL_MS) this.written.delete(k);
    if (this.written.size >= MAX_REMEMBERED) this.written.clear();
  }
}
