import type { Db } from "../db/database.ts";
import type { DeliveryTable } from "../db/schema.ts";
import type { Outcome } from "./channels/channel.ts";

/** An attempt's outcome, waiting to be written with others in one transaction. */
export interface AttemptRecord {
  readonly deliveryId: string;
  readonly attemptId: string;
  readonly atMs: number;
  readonly outcome: Outcome;
  readonly durationMs: number;
  readonly state: DeliveryTable["state"];
  readonly skipReason: string;
  readonly attempts: number;
  /** The next attempt time when it changes (a failure), else undefined. */
  readonly next: number | undefined;
}

/** Rows per multi-row INSERT (7 parameters each). */
const INSERT_CHUNK = 100;
/** Ids per UPDATE … WHERE id IN (…). */
export const UPDATE_CHUNK = 500;
/** Attempt records are written at most this long after the first of them waits, ms … */
const RECORD_DELAY_MS = 30;
/** … or at once when this many wait. */
const RECORD_FLUSH_AT = 256;

/**
 * Attempt records, written together (group commit): the first one waiting starts a timer of
 * RECORD_DELAY_MS, RECORD_FLUSH_AT waiting start the write at once, and a pass writes what is left
 * before it ends (written()), so it never returns with an attempt unrecorded. Until its record is
 * written a sent delivery stays PENDING under its lease: should the process die meanwhile, it is sent
 * again after the lease with the same DeliveryID (at least once).
 */
export class AttemptRecorder {
  readonly #db: Db;
  #records: AttemptRecord[] = [];
  #flushTimer: NodeJS.Timeout | undefined;
  #writing: Promise<void> | undefined;
  #writeError: unknown;

  constructor(db: Db) {
    this.#db = db;
  }

  record(r: AttemptRecord): void {
    this.#records.push(r);
    if (this.#records.length >= RECORD_FLUSH_AT) void this.#flush();
    else if (!this.#flushTimer && !this.#writing)
      this.#flushTimer = setTimeout(() => void this.#flush(), RECORD_DELAY_MS);
  }

  /** Resolves once every record queued so far is written (or its write failed: takeError). */
  async written(): Promise<void> {
    while (this.#writing || this.#records.length > 0) await this.#flush();
  }

  /** The first write error since the last call, and forgets it. */
  takeError(): unknown {
    const err = this.#writeError;
    this.#writeError = undefined;
    return err;
  }

  #flush(): Promise<void> {
    clearTimeout(this.#flushTimer);
    this.#flushTimer = undefined;
    this.#writing ??= this.#writeRecords().finally(() => {
      this.#writing = undefined;
    });
    return this.#writing;
  }

  async #writeRecords(): Promise<void> {
    while (this.#records.length > 0) {
      const recs = this.#records.splice(0, this.#records.length);
      try {
        await this.#write(recs);
      } catch (err) {
        // Unrecorded attempts stay PENDING under their lease and are sent again after it (at least once).
        this.#writeError ??= err;
      }
    }
  }

  /** Writes attempt records in one transaction: a multi-row INSERT, one UPDATE per kind of outcome. */
  async #write(recs: AttemptRecord[]): Promise<void> {
    const groups = new Map<string, { set: Partial<DeliveryTable>; ids: string[] }>();
    for (const r of recs) {
      const key = `${r.state}|${r.skipReason}|${r.attempts}|${r.next ?? ""}|${r.atMs}`;
      const g = groups.get(key);
      if (g) g.ids.push(r.deliveryId);
      else
        groups.set(key, {
          set: {
            state: r.state,
            skip_reason: r.skipReason,
            attempt_count: r.attempts,
            ...(r.next !== undefined ? { next_attempt_time: r.next } : {}),
            lease_until: null,
            update_time: r.atMs,
          },
          ids: [r.deliveryId],
        });
    }
    await this.#db.transaction().execute(async (tx) => {
      for (let i = 0; i < recs.length; i += INSERT_CHUNK)
        await tx
          .insertInto("delivery_attempts")
          .values(
            recs.slice(i, i + INSERT_CHUNK).map((r) => ({
              id: r.attemptId,
              delivery_id: r.deliveryId,
              time: r.atMs,
              status: r.outcome.status,
              response_code: r.outcome.status === "SKIPPED" ? 0 : r.outcome.code,
              detail:
                r.outcome.status === "SKIPPED"
                  ? `${r.outcome.reason}: ${r.outcome.detail}`
                  : r.outcome.detail,
              duration_ms: r.durationMs,
            })),
          )
          .execute();
      for (const g of groups.values())
        for (let i = 0; i < g.ids.length; i += UPDATE_CHUNK)
          await tx
            .updateTable("deliveries")
            .set(g.set)
            .where("id", "in", g.ids.slice(i, i + UPDATE_CHUNK))
            .execute();
    });
  }
}
