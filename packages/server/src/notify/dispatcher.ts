import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { Db } from "../db/database.ts";
import type { DeliveryTable } from "../db/schema.ts";
import { BackgroundWorker, Periodic } from "../lifecycle/background.ts";
import { AttemptRecorder, UPDATE_CHUNK } from "./attempt-records.ts";
import type { Outcome, SendContext } from "./channels/channel.ts";
import type { MailSender } from "./channels/email.ts";
import { channelOf } from "./channels/registry.ts";
import { purgeDeliveryHistory } from "./deliveries.ts";
import type { HttpOutcome } from "./http.ts";
import { type NotifyMetrics, SKIP_REASONS } from "./instrumentation.ts";
import type { NotificationMessage } from "./message.ts";
import type { NotifyOptions } from "./options.ts";
import { fanout } from "./outbox.ts";
import { emptyState, type QueueState, readQueueStates } from "./queue-state.ts";
import { DestinationQueues, type Queue } from "./queues.ts";
import { recheck } from "./recheck.ts";
import { nextAttempt } from "./retry.ts";
import type { Sealer } from "./seal.ts";

/**
 * Sends the outbox: claims a batch of due deliveries in one statement (a lease in each row, so a crashed
 * attempt is retried with the same DeliveryID after the lease, and two dispatchers never send one
 * delivery at once), rechecks what may have changed since the transition (recheck.ts) against state at
 * most RECHECK_MAX_AGE_MS old, sends through the destination's channel (channels/registry.ts), schedules
 * a retry (retry.ts), and records the attempts together (attempt-records.ts). One destination's
 * deliveries go one at a time, destinations in parallel (queues.ts): a slow one holds up only itself.
 */
export interface Dispatcher {
  /** Fans out new incident events, then attempts every due delivery once; resolves when done. */
  runOnce(atMs?: number): Promise<{ attempted: number; sent: number; skipped: number; failed: number }>;
  start(): void;
  nudge(): void;
  stop(): Promise<void>;
}

/** POSTs a body to a URL: notify/http.ts postJson bound to its options (tests hand in their own CA). */
export type Post = (url: string, body: string, headers: Record<string, string>) => Promise<HttpOutcome>;

export interface DispatcherDeps {
  readonly db: Db;
  readonly options: NotifyOptions;
  readonly sealer: Sealer;
  readonly mailer: MailSender;
  readonly post: Post;
  readonly baseUrl: string;
  readonly now: () => number;
  readonly log: Logger;
  /** Jitter source in [0, 1); tests fix it. */
  readonly random?: () => number;
  readonly instruments?: NotifyMetrics;
}

export function createDispatcher(deps: DispatcherDeps): Dispatcher {
  return new DispatcherImpl(deps);
}

/**
 * How old the state an attempt is rechecked against (the destination's row, the incident's state and
 * snooze, the destination's signing secrets) may be when the attempt starts, ms of the process's
 * monotonic clock. A batch's state is read once after its claim; a destination's queue reads its own
 * again when it is older than this, and at once after an attempt that failed (docs/notifications.md).
 */
export const RECHECK_MAX_AGE_MS = 250;

/** A claimed delivery, with performance.now() at its claim. */
interface Claimed {
  readonly d: DeliveryTable;
  readonly claimedAt: number;
}

type Totals = { attempted: number; sent: number; skipped: number; failed: number };

class DispatcherImpl implements Dispatcher {
  readonly #deps: DispatcherDeps;
  readonly #worker: BackgroundWorker;
  readonly #purge: Periodic;
  readonly #records: AttemptRecorder;

  constructor(deps: DispatcherDeps) {
    this.#deps = deps;
    this.#worker = new BackgroundWorker({
      intervalMs: deps.options.pollIntervalMs,
      onNudge: () => this.runOnce(),
      onError: (err) => deps.log.error({ err }, "notification dispatch failed"),
    });
    this.#purge = new Periodic(3_600_000, (err) => deps.log.warn({ err }, "delivery history purge failed"));
    this.#records = new AttemptRecorder(deps.db);
  }

  start(): void {
    this.#worker.start();
  }

  nudge(): void {
    this.#worker.nudge();
  }

  stop(): Promise<void> {
    return this.#worker.stop();
  }

  runOnce(atMs?: number): Promise<Totals> {
    return this.#worker.serial(() => this.#run(atMs ?? this.#deps.now()));
  }

  /** One pass: fans out, claims and attempts batches through per-destination queues while there is more. */
  async #run(atMs: number): Promise<Totals> {
    const { db, options } = this.#deps;
    const batch = options.concurrency * 8;
    const totals = { attempted: 0, sent: 0, skipped: 0, failed: 0 };
    // A pass may claim again long after it began (a slow destination keeps it open): each claim leases
    // from its own time, so the lease it writes is as long as the one the attempts count from
    // (claimedAt), and a lease that ran out meanwhile (a crashed replica's) is seen as free (issue 48).
    const passStarted = performance.now();
    const pool = new DestinationQueues<Claimed, QueueState>(
      {
        claim: async (leaveOut) => {
          const fanned = await fanout(
            { db, baseUrl: this.#deps.baseUrl, messageTtlMs: options.messageTtlMs },
            atMs,
            batch,
          );
          const skip = leaveOut();
          const rows = await this.#claim(atMs + Math.round(performance.now() - passStarted), batch, skip);
          const claimedAt = performance.now();
          return {
            items: rows.map((d) => ({ d, claimedAt })),
            exhausted: fanned < batch && rows.length < batch,
          };
        },
        keyOf: (c) => c.d.destination_id,
        readState: (ids, items) =>
          readQueueStates(
            db,
            ids,
            items.map((c) => c.d),
            atMs,
          ),
        // A failed attempt still asks for a read before the next one.
        refresh: (st, fresh) => Object.assign(st, { ...fresh, stale: st.stale }),
        attempt: async (q, { d, claimedAt }) => {
          // No attempt starts in the second half of the lease, so every one ends (≤ requestTimeoutMs)
          // and is recorded while the lease still holds; the rest go back to the outbox at once.
          if (performance.now() - claimedAt > options.leaseMs / 2) return false;
          await this.#freshen(q, d, atMs);
          const r = await this.#attempt(d, q.state, atMs);
          totals.attempted++;
          if (r === "SENT") totals.sent++;
          else if (r === "SKIPPED") totals.skipped++;
          else totals.failed++;
          return true;
        },
      },
      {
        concurrency: options.concurrency,
        share: Math.max(1, Math.floor(batch / options.concurrency)),
        pollIntervalMs: options.pollIntervalMs,
      },
    );
    let result: Awaited<ReturnType<typeof pool.run>>;
    try {
      result = await pool.run();
    } finally {
      await this.#records.written();
    }
    // Claimed but not attempted (a failure, or the second half of the lease): due again at once, each
    // under the lease its claim wrote.
    const byLease = new Map<number, string[]>();
    for (const { d } of result.released) {
      const lease = d.lease_until ?? 0;
      const ids = byLease.get(lease);
      if (ids) ids.push(d.id);
      else byLease.set(lease, [d.id]);
    }
    for (const [lease, ids] of byLease)
      for (let i = 0; i < ids.length; i += UPDATE_CHUNK)
        await db
          .updateTable("deliveries")
          .set({ lease_until: null })
          .where("id", "in", ids.slice(i, i + UPDATE_CHUNK))
          .where("lease_until", "=", lease)
          .execute();
    const writeError = this.#records.takeError();
    if (result.failure) throw result.failure.err;
    if (writeError !== undefined) throw writeError;
    await this.#purge.run(atMs, () => purgeDeliveryHistory(db, atMs, options.historyRetentionMs));
    return totals;
  }

  /** Reads the queue's state again before attempting `d` when it is stale, too old, or lacks d's incident. */
  async #freshen(q: Queue<Claimed, QueueState>, d: DeliveryTable, atMs: number): Promise<void> {
    const st = q.state;
    if (
      st.stale ||
      performance.now() - st.readAt > RECHECK_MAX_AGE_MS ||
      (d.incident_id !== null && !st.incidents.has(d.incident_id))
    ) {
      const pending = q.items.slice(q.next).map((i) => i.d);
      const fresh = (await readQueueStates(this.#deps.db, [q.key], pending, atMs)).get(q.key);
      Object.assign(st, fresh ?? emptyState(performance.now()));
    }
  }

  /**
   * Leases up to `limit` due deliveries in one statement, oldest due first, leaving out the given
   * destinations. The outer conditions are checked again on each row as it is updated (SQLite writes
   * one statement at a time; PostgreSQL re-evaluates them on the row's newest version when another
   * claim got there first), so a delivery another pass holds is never claimed twice.
   */
  async #claim(atMs: number, limit: number, leaveOut: string[]): Promise<DeliveryTable[]> {
    const { db, options } = this.#deps;
    const rows = await db
      .updateTable("deliveries")
      .set({ lease_until: atMs + options.leaseMs })
      .where("id", "in", (eb) => {
        let due = eb
          .selectFrom("deliveries as due")
          .select("due.id")
          .where("due.state", "=", "PENDING")
          .where("due.next_attempt_time", "<=", atMs)
          .where((e) => e.or([e("due.lease_until", "is", null), e("due.lease_until", "<", atMs)]));
        if (leaveOut.length > 0) due = due.where("due.destination_id", "not in", leaveOut);
        return due.orderBy("due.next_attempt_time").limit(limit);
      })
      .where("state", "=", "PENDING")
      .where((eb) => eb.or([eb("lease_until", "is", null), eb("lease_until", "<", atMs)]))
      .returningAll()
      .execute();
    // RETURNING has no order: oldest due first again (a stable sort keeps the rest as returned).
    return rows.sort((a, b) => a.next_attempt_time - b.next_attempt_time || a.create_time - b.create_time);
  }

  /** Rechecks, sends and queues the record of one claimed delivery. */
  async #attempt(d: DeliveryTable, st: QueueState, atMs: number): Promise<Outcome["status"]> {
    const { options } = this.#deps;
    const attemptId = `att_${randomUUID()}`;
    const started = performance.now();
    let outcome: Outcome;
    try {
      // Everything that may have changed since the transition is checked again before sending.
      outcome = recheck(d, st, atMs) ?? (await this.#send(d, st, attemptId, atMs));
    } catch (err) {
      // svc's own failure: the operator's log has it, the tenant a class.
      this.#deps.log.error({ err, deliveryId: d.id }, "notification attempt failed inside svc");
      outcome = { status: "FAILED", code: 0, detail: "internal error" };
    }
    const durationMs = Math.round(performance.now() - started);
    const attempts = d.attempt_count + 1;
    let state: DeliveryTable["state"];
    let next: number | undefined;
    let skipReason = "";
    if (outcome.status === "SENT") state = "SENT";
    else if (outcome.status === "SKIPPED") {
      state = "SKIPPED";
      skipReason = outcome.reason;
    } else {
      // A failure may be why someone pauses or deletes the destination: its next attempt reads again.
      st.stale = true;
      const random = (this.#deps.random ?? Math.random)();
      const failed = {
        attempts,
        code: outcome.code,
        retryAfterMs: outcome.retryAfterMs,
        atMs,
        expireTime: d.expire_time,
      };
      const retry = nextAttempt(failed, options, random);
      next = retry.next;
      state = retry.giveUp ? "FAILED" : "PENDING";
    }
    const m = this.#deps.instruments;
    if (m) {
      const kind = st.dest?.kind.toLowerCase() ?? "unknown";
      m.attemptDuration.observe({ kind }, durationMs / 1000);
      m.deliveries.inc({
        kind,
        outcome: state === "PENDING" ? "retried" : (state.toLowerCase() as "sent" | "failed" | "skipped"),
      });
      if (state === "SKIPPED") {
        const reason = skipReason.toLowerCase();
        m.skipped.inc({ reason: (SKIP_REASONS as readonly string[]).includes(reason) ? reason : "other" });
      }
    }
    this.#records.record({
      deliveryId: d.id,
      attemptId,
      atMs,
      outcome,
      durationMs,
      state,
      skipReason,
      attempts,
      next,
    });
    return outcome.status;
  }

  /** Sends through the destination's channel; its sealed values are opened once per queue. */
  #send(d: DeliveryTable, st: QueueState, attemptId: string, atMs: number): Promise<Outcome> {
    const { db, sealer, mailer, options } = this.#deps;
    // The recheck let it through: the destination exists.
    const destination = st.dest as NonNullable<QueueState["dest"]>;
    const ctx: SendContext = {
      delivery: d,
      destination,
      message: JSON.parse(d.message) as NotificationMessage,
      attemptId,
      atMs,
      url: () => (st.url ??= sealer.open(destination.sealed_url)),
      key: () => (st.key ??= sealer.open(destination.sealed_key)),
      secrets: () => (st.secrets ??= st.sealedSecrets.map((s) => sealer.open(s))),
      post: (url, body, headers) => this.#post(d, url, body, headers),
      db,
      mailer,
      emailFrom: options.emailFrom,
    };
    return channelOf(destination.kind).send(ctx);
  }

  /**
   * Posts through deps.post. A failure without a response is written to the operator's log as the
   * library said it (e.g. a TLS library's text); the delivery's attempt, which the tenant reads, keeps
   * only its class (http.ts failureReason).
   */
  async #post(d: DeliveryTable, url: string, body: string, headers: Record<string, string>) {
    const r = await this.#deps.post(url, body, headers);
    if (r.kind === "error")
      this.#deps.log.warn(
        { deliveryId: d.id, destinationId: d.destination_id, projectId: d.project_id, error: r.error },
        `notification delivery failed: ${r.reason}`,
      );
    return r;
  }
}
