import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { Db } from "../db/database.ts";
import type { DeliveryTable, DestinationTable } from "../db/schema.ts";
import { type MailSender, renderIncidentEmail } from "./channels/email.ts";
import { type HttpChannelKind, render, renderOpsgenie, renderPagerDuty } from "./channels/index.ts";
import type { HttpOutcome } from "./http.ts";
import { type NotifyMetrics, SKIP_REASONS } from "./instrumentation.ts";
import type { NotificationMessage } from "./message.ts";
import type { NotifyOptions } from "./options.ts";
import { destinationIdsOf, fanout } from "./outbox.ts";
import type { Sealer } from "./seal.ts";
import { signDelivery } from "./signing.ts";
import { silenceName, silencesInForce, silencesMutingIncident } from "./silences.ts";

/**
 * Sends the outbox: claims a batch of due deliveries in one statement (a lease in each row, so a crashed
 * attempt is retried with the same DeliveryID after the lease, and two dispatchers never send one
 * delivery at once), rechecks what may have changed since the transition against state at most
 * RECHECK_MAX_AGE_MS old, sends, and records the attempts together. One destination's deliveries go one
 * at a time, destinations in parallel: a slow one holds up only itself.
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

type Outcome =
  | { status: "SENT"; code: number; detail: string }
  | { status: "FAILED"; code: number; detail: string; retryAfterMs?: number }
  | { status: "SKIPPED"; reason: string; detail: string };

/** Messages that are pointless once the incident closed (an acknowledgement included). */
const FIRING_TYPES = new Set(["incident.opened", "incident.repeat", "incident.acknowledged"]);

/**
 * How old the state an attempt is rechecked against (the destination's row, the incident's state and
 * snooze, the destination's signing secrets) may be when the attempt starts, ms of the process's
 * monotonic clock. A batch's state is read once after its claim; a destination's queue reads its own
 * again when it is older than this, and at once after an attempt that failed (docs/notifications.md).
 */
export const RECHECK_MAX_AGE_MS = 250;

interface IncidentState {
  readonly state: string;
  readonly snooze_until: number | null;
  readonly rule_id: string;
  readonly vm_name: string;
  /** The destination ids its rule's applied revision names now; null when the rule row is gone. */
  readonly destinations: ReadonlySet<string> | null;
}

type SilenceRow = Awaited<ReturnType<typeof silencesInForce>>[number];

/** What one destination's queue is rechecked against, and when it was read. */
interface QueueState {
  /** performance.now() when the read began. */
  readAt: number;
  /** Set after a failed attempt: read again before the next one, whatever its age. */
  stale: boolean;
  dest: DestinationTable | undefined;
  /** The destination's URL, unsealed on first use. */
  url: string | undefined;
  /** PagerDuty's routing key or Opsgenie's API key, unsealed on first use. */
  key: string | undefined;
  /** The destination's project's silences in force at the pass's time. */
  silences: SilenceRow[];
  /** Webhook signing secrets (sealed, newest first) and, on first use, unsealed. */
  sealedSecrets: string[];
  secrets: string[] | undefined;
  /** The queue's incidents as read: null when the row no longer exists; an id not here is unread. */
  incidents: Map<string, IncidentState | null>;
}

/** One destination's claimed deliveries, attempted one at a time in this order. */
interface Queue {
  readonly destinationId: string;
  /** Each with performance.now() at its claim; later claims append. */
  readonly items: { readonly d: DeliveryTable; readonly claimedAt: number }[];
  /** The next item to attempt. */
  next: number;
  readonly state: QueueState;
}

/** An attempt's outcome, waiting to be written with others in one transaction. */
interface AttemptRecord {
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
const UPDATE_CHUNK = 500;
/** Attempt records are written at most this long after the first of them waits, ms … */
const RECORD_DELAY_MS = 30;
/** … or at once when this many wait. */
const RECORD_FLUSH_AT = 256;

type Totals = { attempted: number; sent: number; skipped: number; failed: number };

class DispatcherImpl implements Dispatcher {
  readonly #deps: DispatcherDeps;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<unknown> = Promise.resolve();
  #pending = false;
  #lastPurge = 0;
  /** Attempt records not yet written, the write in flight or scheduled, and its first error. */
  #records: AttemptRecord[] = [];
  #flushTimer: NodeJS.Timeout | undefined;
  #writing: Promise<void> | undefined;
  #writeError: unknown;

  constructor(deps: DispatcherDeps) {
    this.#deps = deps;
  }

  start(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => this.nudge(), this.#deps.options.pollIntervalMs);
    this.#timer.unref();
  }

  nudge(): void {
    if (this.#pending) return;
    this.#pending = true;
    setImmediate(() => {
      this.#pending = false;
      void this.runOnce().catch((err: unknown) =>
        this.#deps.log.error({ err }, "notification dispatch failed"),
      );
    });
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#running.catch(() => {});
  }

  runOnce(atMs?: number): Promise<Totals> {
    const run = this.#running.catch(() => {}).then(() => this.#run(atMs ?? this.#deps.now()));
    this.#running = run;
    return run;
  }

  /**
   * One pass: fans out, claims a batch, attempts it, and does so again while there is more. Each
   * destination's claimed deliveries form one queue, worked by one of `concurrency` workers one
   * delivery at a time, in order. When a worker finds no queue to take, it fans out and claims the next
   * batch while the others go on: deliveries for a destination whose queue is still being worked are
   * appended to it (so its order and one-at-a-time hold), others start new queues. A claim leaves out
   * destinations whose queue already holds a full share (batch / concurrency) not yet attempted, so
   * one slow destination's backlog is not claimed ahead of the others'.
   */
  async #run(atMs: number): Promise<Totals> {
    const { db, options } = this.#deps;
    const batch = options.concurrency * 8;
    const share = Math.max(1, Math.floor(batch / options.concurrency));
    const totals = { attempted: 0, sent: 0, skipped: 0, failed: 0 };
    /** Queues not yet taken by a worker. */
    const waiting: Queue[] = [];
    /** Every unfinished queue (waiting or being worked), by destination. */
    const open = new Map<string, Queue>();
    /** Destinations the last claim left out. */
    let leftOut = new Set<string>();
    /** The last refill found nothing more to fan out and fewer than a batch to claim. */
    let exhausted = false;
    let refilling: Promise<void> | undefined;
    let busy = 0;
    let failure: { err: unknown } | undefined;
    let wake = () => {};
    let changed = new Promise<void>((r) => {
      wake = r;
    });
    const signal = () => {
      const w = wake;
      changed = new Promise<void>((r) => {
        wake = r;
      });
      w();
    };
    /** Claimed but not attempted: released at the end of the pass (each under the lease its claim wrote). */
    const released: DeliveryTable[] = [];
    // A pass may claim again long after it began (a slow destination keeps it open): each claim leases
    // from its own time, so the lease it writes is as long as the one the attempts count from
    // (claimedAt), and a lease that ran out meanwhile (a crashed replica's) is seen as free (issue 48).
    const passStarted = performance.now();
    const refill = async () => {
      const fanned = await fanout(
        { db, baseUrl: this.#deps.baseUrl, messageTtlMs: options.messageTtlMs },
        atMs,
        batch,
      );
      leftOut = new Set(
        [...open.values()].filter((q) => q.items.length - q.next >= share).map((q) => q.destinationId),
      );
      const claimed = await this.#claim(atMs + Math.round(performance.now() - passStarted), batch, [
        ...leftOut,
      ]);
      exhausted = fanned < batch && claimed.length < batch;
      if (claimed.length === 0) return;
      const claimedAt = performance.now();
      const byDestination = new Map<string, DeliveryTable[]>();
      for (const d of claimed) {
        const list = byDestination.get(d.destination_id);
        if (list) list.push(d);
        else byDestination.set(d.destination_id, [d]);
      }
      // The recheck state of every destination claimed for, covering the not yet attempted deliveries
      // of its open queue too: one read for all, fresher than what the open queues held.
      const unattempted = [...byDestination.keys()].flatMap((id) => {
        const q = open.get(id);
        return q ? q.items.slice(q.next).map((i) => i.d) : [];
      });
      const states = await this.#readStates([...byDestination.keys()], [...claimed, ...unattempted], atMs);
      for (const [destinationId, list] of byDestination) {
        const st = states.get(destinationId) ?? emptyState(claimedAt);
        const items = list.map((d) => ({ d, claimedAt }));
        const q = open.get(destinationId);
        if (q) {
          q.items.push(...items);
          // A failed attempt still asks for a read before the next one.
          Object.assign(q.state, { ...st, stale: q.state.stale });
        } else {
          const fresh = { destinationId, items, next: 0, state: st };
          open.set(destinationId, fresh);
          waiting.push(fresh);
        }
      }
    };
    const work = async (q: Queue) => {
      const st = q.state;
      for (; q.next < q.items.length; q.next++) {
        const { d, claimedAt } = q.items[q.next];
        // No attempt starts in the second half of the lease, so every one ends (≤ requestTimeoutMs)
        // and is recorded while the lease still holds; the rest go back to the outbox at once.
        if (performance.now() - claimedAt > options.leaseMs / 2) {
          released.push(d);
          continue;
        }
        if (
          st.stale ||
          performance.now() - st.readAt > RECHECK_MAX_AGE_MS ||
          (d.incident_id !== null && !st.incidents.has(d.incident_id))
        ) {
          const fresh = (
            await this.#readStates(
              [q.destinationId],
              q.items.slice(q.next).map((i) => i.d),
              atMs,
            )
          ).get(q.destinationId);
          Object.assign(st, fresh ?? emptyState(performance.now()));
        }
        const r = await this.#attempt(d, st, atMs);
        totals.attempted++;
        if (r === "SENT") totals.sent++;
        else if (r === "SKIPPED") totals.skipped++;
        else totals.failed++;
      }
    };
    const worker = async () => {
      while (!failure) {
        const q = waiting.shift();
        if (q) {
          busy++;
          try {
            await work(q);
          } catch (err) {
            failure ??= { err };
          } finally {
            busy--;
            if (q.next < q.items.length && !failure) {
              // A claim appended to this queue as its last attempt ended: go on with it.
              waiting.unshift(q);
            } else {
              // Not attempted after a failure: due again at once, after this pass.
              for (const i of q.items.slice(q.next)) released.push(i.d);
              open.delete(q.destinationId);
              // A destination the last claim left out may have more due: claim again.
              if (leftOut.has(q.destinationId)) exhausted = false;
            }
            signal();
          }
        } else if (refilling) await refilling;
        else if (!exhausted) {
          refilling = refill()
            .catch((err: unknown) => {
              failure ??= { err };
            })
            .finally(() => {
              refilling = undefined;
              signal();
            });
          await refilling;
        } else if (busy === 0) return;
        else {
          // Idle while others work (a slow destination's queue, say): look at the outbox again after
          // a poll interval, so what became due meanwhile does not wait for the slow queue to end.
          let timer: NodeJS.Timeout | undefined;
          const poll = new Promise<void>((r) => {
            timer = setTimeout(() => {
              exhausted = false;
              r();
            }, options.pollIntervalMs);
          });
          await Promise.race([changed, poll]);
          clearTimeout(timer);
        }
      }
    };
    try {
      await Promise.all(Array.from({ length: options.concurrency }, worker));
    } finally {
      await this.#recordsWritten();
    }
    // Claimed but not attempted (a failure, or the second half of the lease): due again at once.
    for (const q of open.values()) for (const i of q.items.slice(q.next)) released.push(i.d);
    const byLease = new Map<number, string[]>();
    for (const d of released) {
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
    const writeError = this.#writeError;
    this.#writeError = undefined;
    if (failure) throw failure.err;
    if (writeError !== undefined) throw writeError;
    if (atMs - this.#lastPurge >= 3_600_000) {
      this.#lastPurge = atMs;
      await this.#purge(atMs).catch((err: unknown) =>
        this.#deps.log.warn({ err }, "delivery history purge failed"),
      );
    }
    return totals;
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

  /**
   * Reads what the recheck needs for the given destinations' queues, in three statements whatever
   * their number: the destination rows, the incidents of `deliveries`, the webhooks' live secrets.
   */
  async #readStates(
    destinationIds: string[],
    deliveries: DeliveryTable[],
    atMs: number,
  ): Promise<Map<string, QueueState>> {
    const { db } = this.#deps;
    const readAt = performance.now();
    const dests = await db.selectFrom("destinations").selectAll().where("id", "in", destinationIds).execute();
    const incidentIds = [...new Set(deliveries.flatMap((d) => (d.incident_id ? [d.incident_id] : [])))];
    // Each incident with the spec of its rule's applied revision (what fanout addressed it by), so a
    // destination taken out of the rule since is no longer sent to (docs/notifications.md).
    const rows =
      incidentIds.length > 0
        ? await db
            .selectFrom("incidents as i")
            .leftJoin("alert_rules as r", "r.id", "i.rule_id")
            .leftJoin("alert_rule_revisions as v", (j) =>
              j.onRef("v.rule_id", "=", "r.id").onRef("v.version", "=", "r.applied_version"),
            )
            .select(["i.id", "i.state", "i.snooze_until", "i.rule_id", "i.vm_name", "v.spec"])
            .where("i.id", "in", incidentIds)
            .execute()
        : [];
    const incidents = rows.map(({ spec, ...i }) => ({
      ...i,
      destinations: spec === null ? null : new Set(destinationIdsOf(spec)),
    }));
    const silences = await silencesInForce(db, [...new Set(dests.map((d) => d.project_id))], atMs);
    const webhooks = dests.filter((d) => d.kind === "WEBHOOK").map((d) => d.id);
    const secrets =
      webhooks.length > 0
        ? await db
            .selectFrom("destination_secrets")
            .select(["destination_id", "sealed_secret"])
            .where("destination_id", "in", webhooks)
            .where((eb) => eb.or([eb("expire_time", "is", null), eb("expire_time", ">", atMs)]))
            .orderBy("destination_id")
            .orderBy("create_time", "desc")
            .execute()
        : [];
    const incidentById = new Map(incidents.map((i) => [i.id, i]));
    const states = new Map<string, QueueState>();
    for (const id of destinationIds) states.set(id, emptyState(readAt));
    for (const d of dests) {
      const st = states.get(d.id);
      if (st) {
        st.dest = d;
        st.silences = silences.filter((s) => s.project_id === d.project_id);
      }
    }
    for (const s of secrets) states.get(s.destination_id)?.sealedSecrets.push(s.sealed_secret);
    for (const d of deliveries) {
      if (d.incident_id)
        states.get(d.destination_id)?.incidents.set(d.incident_id, incidentById.get(d.incident_id) ?? null);
    }
    return states;
  }

  /** Rechecks, sends and queues the record of one claimed delivery. */
  async #attempt(d: DeliveryTable, st: QueueState, atMs: number): Promise<"SENT" | "FAILED" | "SKIPPED"> {
    const { options } = this.#deps;
    const attemptId = `att_${randomUUID()}`;
    const started = performance.now();
    let outcome: Outcome;
    try {
      outcome = await this.#recheckAndSend(d, st, attemptId, atMs);
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
      const base = options.retryDelaysMs[Math.min(attempts - 1, options.retryDelaysMs.length - 1)];
      const jitter = 1 + ((this.#deps.random ?? Math.random)() * 0.4 - 0.2);
      let delay = Math.round(base * jitter);
      if (outcome.code === 429)
        delay = Math.max(options.minRetryAfter429Ms, outcome.retryAfterMs ?? 0, delay);
      next = atMs + delay;
      // Gives up when the schedule is spent or the next try would come after the message expired.
      state = attempts > options.retryDelaysMs.length || next > d.expire_time ? "FAILED" : "PENDING";
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
    this.#record({
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

  /**
   * Queues an attempt's record. Records are written together (group commit): the first one waiting
   * starts a timer of RECORD_DELAY_MS, RECORD_FLUSH_AT waiting start the write at once, and the batch
   * writes what is left before it ends (#recordsWritten), so a pass never returns with an attempt
   * unrecorded. Until its record is written a sent delivery stays PENDING under its lease: should the
   * process die meanwhile, it is sent again after the lease with the same DeliveryID (at least once).
   */
  #record(r: AttemptRecord): void {
    this.#records.push(r);
    if (this.#records.length >= RECORD_FLUSH_AT) void this.#flush();
    else if (!this.#flushTimer && !this.#writing)
      this.#flushTimer = setTimeout(() => void this.#flush(), RECORD_DELAY_MS);
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

  async #recordsWritten(): Promise<void> {
    while (this.#writing || this.#records.length > 0) await this.#flush();
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
    await this.#deps.db.transaction().execute(async (tx) => {
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

  /** Everything that may have changed since the transition is checked again before sending (docs/notifications.md#the-recheck-before-every-attempt). */
  async #recheckAndSend(d: DeliveryTable, st: QueueState, attemptId: string, atMs: number): Promise<Outcome> {
    const dest = st.dest;
    if (!dest || dest.delete_time !== null) return skip("DESTINATION_DELETED", "the destination was deleted");
    if (dest.paused === 1) return skip("DESTINATION_PAUSED", "the destination is paused");
    if (dest.unconfirmed_by !== "")
      return skip("DESTINATION_UNCONFIRMED", "a person has not yet confirmed the URL a key or CI token set");
    if (atMs > d.expire_time) return skip("EXPIRED", "the message is older than its retry period");
    if (d.incident_id) {
      const inc = st.incidents.get(d.incident_id);
      if (inc === null || inc === undefined) return skip("INCIDENT_GONE", "the incident no longer exists");
      if (FIRING_TYPES.has(d.event_type) && inc.state === "RESOLVED")
        return skip("INCIDENT_RECOVERED", "the incident recovered before this firing message was sent");
      if (FIRING_TYPES.has(d.event_type) && inc.state === "RETIRED")
        return skip("INCIDENT_RETIRED", "the incident was retired before this firing message was sent");
      if (inc.destinations !== null && !inc.destinations.has(d.destination_id))
        return skip(
          "DESTINATION_NOT_IN_RULE",
          "the incident's rule no longer names this destination (removed from the rule since)",
        );
      // One rule for every message and every ordering (silences.ts silencesMutingIncident).
      const [silence] = silencesMutingIncident(
        st.silences,
        { ruleId: inc.rule_id, vmName: inc.vm_name },
        atMs,
      );
      if (silence)
        return skip(
          "SILENCED",
          `muted by ${silenceName(silence.project_id, silence.id)} until ${new Date(silence.end_time).toISOString()}`,
        );
      if (inc.snooze_until !== null && inc.snooze_until > atMs)
        return skip(
          "INCIDENT_SNOOZED",
          `notifications are snoozed until ${new Date(inc.snooze_until).toISOString()}`,
        );
    }
    const message = JSON.parse(d.message) as NotificationMessage;
    if (dest.kind === "EMAIL") return this.#sendEmail(dest, message);
    st.url ??= this.#deps.sealer.open(dest.sealed_url);
    if (dest.kind === "WEBHOOK") {
      const { body } = render("WEBHOOK", message);
      st.secrets ??= st.sealedSecrets.map((s) => this.#deps.sealer.open(s));
      const headers = signatureHeaders(st.secrets, d.id, attemptId, atMs, body);
      return fromHttp(await this.#post(d, st.url, body, { "content-type": "application/json", ...headers }));
    }
    if (dest.kind === "PAGERDUTY" || dest.kind === "OPSGENIE") {
      st.key ??= this.#deps.sealer.open(dest.sealed_key);
      return dest.kind === "PAGERDUTY"
        ? fromIncidentApi(await this.#post(d, st.url, renderPagerDuty(message, st.key).body, {}))
        : this.#sendOpsgenie(d, st.url, st.key, message);
    }
    const { body } = render(dest.kind as HttpChannelKind, message);
    return fromHttp(await this.#post(d, st.url, body, { "content-type": "application/json" }));
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

  async #sendOpsgenie(
    d: DeliveryTable,
    base: string,
    key: string,
    message: NotificationMessage,
  ): Promise<Outcome> {
    const { path, body } = renderOpsgenie(message);
    return fromIncidentApi(
      await this.#post(d, `${base.replace(/\/+$/, "")}${path}`, body, { authorization: `GenieKey ${key}` }),
    );
  }

  async #sendEmail(dest: DestinationTable, message: NotificationMessage): Promise<Outcome> {
    const { db } = this.#deps;
    // Recipients still verified and still members of the project, read now.
    const to = await db
      .selectFrom("destination_recipients as r")
      .innerJoin("users as u", "u.id", "r.user_id")
      .innerJoin("memberships as m", (j) =>
        j.onRef("m.user_id", "=", "r.user_id").on("m.project_id", "=", dest.project_id),
      )
      .select(["u.email"])
      .where("r.destination_id", "=", dest.id)
      .where("r.verify_time", "is not", null)
      .execute();
    if (to.length === 0)
      return skip("NO_VERIFIED_RECIPIENT", "no recipient is both verified and a project member");
    const mail = renderIncidentEmail(message);
    try {
      for (const r of to)
        await this.#deps.mailer.sendMail({ from: this.#deps.options.emailFrom, to: r.email, ...mail });
    } catch (err) {
      return {
        status: "FAILED",
        code: 0,
        detail: `SMTP: ${err instanceof Error ? err.message : String(err)}`,
      };
    }
    const by = this.#deps.mailer.acceptedBy ?? "the SMTP server";
    return { status: "SENT", code: 0, detail: `accepted by ${by} for ${to.length} recipient(s)` };
  }

  async #purge(atMs: number): Promise<void> {
    const { db, options } = this.#deps;
    const old = db
      .selectFrom("deliveries")
      .select("id")
      .where("state", "!=", "PENDING")
      .where("update_time", "<", atMs - options.historyRetentionMs);
    await db.transaction().execute(async (tx) => {
      await tx.deleteFrom("delivery_attempts").where("delivery_id", "in", old).execute();
      await tx
        .deleteFrom("deliveries")
        .where("state", "!=", "PENDING")
        .where("update_time", "<", atMs - options.historyRetentionMs)
        .execute();
      // Silences are history too once they ended: kept as long as the deliveries they skipped.
      await tx
        .deleteFrom("silences")
        .where("end_time", "<", atMs - options.historyRetentionMs)
        .execute();
    });
  }
}

function emptyState(readAt: number): QueueState {
  return {
    readAt,
    stale: false,
    dest: undefined,
    url: undefined,
    key: undefined,
    silences: [],
    sealedSecrets: [],
    secrets: undefined,
    incidents: new Map(),
  };
}

/** The webhook signature headers; the legacy raw-body one uses the previous secret while its overlap lasts. */
function signatureHeaders(
  secrets: string[],
  deliveryId: string,
  attemptId: string,
  atMs: number,
  body: string,
) {
  return signDelivery({
    deliveryId,
    attemptId,
    timestampS: Math.floor(atMs / 1000),
    body,
    secrets,
    legacySecret: secrets.length > 1 ? secrets[1] : undefined,
  });
}

function skip(reason: string, detail: string): Outcome {
  return { status: "SKIPPED", reason, detail };
}

/**
 * PagerDuty's and Opsgenie's answers: as fromHttp, with what their JSON body says (PagerDuty's
 * `dedup_key` on a 202, `errors` on a 400; Opsgenie's `requestId` / `message`) in the detail.
 */
function fromIncidentApi(r: HttpOutcome): Outcome {
  const o = fromHttp(r);
  if (r.kind !== "response" || !r.head || o.status === "SKIPPED") return o;
  let said = "";
  try {
    const j = JSON.parse(r.head) as Record<string, unknown>;
    const parts = [j.message, j.result, Array.isArray(j.errors) ? j.errors.join("; ") : undefined];
    if (o.status === "SENT" && typeof j.dedup_key === "string") parts.push(`dedup_key ${j.dedup_key}`);
    if (typeof j.requestId === "string") parts.push(`requestId ${j.requestId}`);
    said = parts.filter((p): p is string => typeof p === "string" && p !== "").join(", ");
  } catch {
    // Not JSON (a proxy's page, say): the status says enough.
  }
  return said ? { ...o, detail: `${o.detail}: ${said.slice(0, 300)}` } : o;
}

function fromHttp(r: HttpOutcome): Outcome {
  // The class only: the library's text is in the operator's log (#post).
  if (r.kind === "error") return { status: "FAILED", code: 0, detail: r.reason };
  if (r.status >= 200 && r.status < 300) return { status: "SENT", code: r.status, detail: "accepted" };
  // A redirect is a failure: following it could lead anywhere, including inside the network.
  const detail = r.status >= 300 && r.status < 400 ? `redirect ${r.status} not followed` : `HTTP ${r.status}`;
  return {
    status: "FAILED",
    code: r.status,
    detail,
    retryAfterMs: r.retryAfterSeconds !== undefined ? r.retryAfterSeconds * 1000 : undefined,
  };
}
