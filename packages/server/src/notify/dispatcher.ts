import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { Db } from "../db/database.ts";
import type { DeliveryTable, DestinationTable } from "../db/schema.ts";
import { type MailSender, renderIncidentEmail } from "./channels/email.ts";
import { render } from "./channels/index.ts";
import type { HttpOutcome } from "./http.ts";
import type { NotificationMessage } from "./message.ts";
import type { NotifyOptions } from "./options.ts";
import { fanout } from "./outbox.ts";
import type { Sealer } from "./seal.ts";
import { signDelivery } from "./signing.ts";

/**
 * Sends the outbox: claims due deliveries (a lease in the row, so a crashed attempt is retried with the
 * same DeliveryID after the lease, and two dispatchers never send one delivery at once), rechecks
 * everything that may have changed since the transition, sends, and records each attempt. One
 * destination's deliveries go one at a time, destinations in parallel: a slow one holds up only itself.
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
}

export function createDispatcher(deps: DispatcherDeps): Dispatcher {
  return new DispatcherImpl(deps);
}

type Outcome =
  | { status: "SENT"; code: number; detail: string }
  | { status: "FAILED"; code: number; detail: string; retryAfterMs?: number }
  | { status: "SKIPPED"; reason: string; detail: string };

const FIRING_TYPES = new Set(["incident.opened", "incident.repeat"]);

class DispatcherImpl implements Dispatcher {
  readonly #deps: DispatcherDeps;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<unknown> = Promise.resolve();
  #pending = false;
  #lastPurge = 0;
  /** Unsealed signing secrets by destination, for one batch of attempts only. */
  readonly #secrets = new Map<string, string[]>();

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

  runOnce(atMs?: number): Promise<{ attempted: number; sent: number; skipped: number; failed: number }> {
    const run = this.#running.catch(() => {}).then(() => this.#run(atMs ?? this.#deps.now()));
    this.#running = run;
    return run;
  }

  async #run(atMs: number) {
    const { db, options } = this.#deps;
    const batch = options.concurrency * 8;
    const totals = { attempted: 0, sent: 0, skipped: 0, failed: 0 };
    // Fan-out and sending alternate in batches, so the first deliveries of a burst of transitions do
    // not wait for the whole burst to be fanned out; a full batch is followed at once by the next.
    for (;;) {
      const fanned = await fanout(
        { db, baseUrl: this.#deps.baseUrl, messageTtlMs: options.messageTtlMs },
        atMs,
        batch,
      );
      const due = await db
        .selectFrom("deliveries")
        .select(["id", "destination_id"])
        .where("state", "=", "PENDING")
        .where("next_attempt_time", "<=", atMs)
        .where((eb) => eb.or([eb("lease_until", "is", null), eb("lease_until", "<", atMs)]))
        .orderBy("next_attempt_time")
        .limit(batch)
        .execute();
      const byDestination = new Map<string, string[]>();
      for (const d of due) {
        const list = byDestination.get(d.destination_id) ?? [];
        list.push(d.id);
        byDestination.set(d.destination_id, list);
      }
      const queues = [...byDestination.values()];
      this.#secrets.clear();
      let claimed = 0;
      const worker = async () => {
        for (let q = queues.shift(); q; q = queues.shift()) {
          for (const id of q) {
            const r = await this.#attempt(id, atMs);
            if (!r) continue;
            claimed++;
            totals.attempted++;
            if (r === "SENT") totals.sent++;
            else if (r === "SKIPPED") totals.skipped++;
            else totals.failed++;
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(options.concurrency, queues.length) }, worker));
      this.#secrets.clear();
      // Done when nothing is left to fan out and the due ones were all held by someone else or sent.
      if (fanned < batch && (due.length < batch || claimed === 0)) break;
    }
    if (atMs - this.#lastPurge >= 3_600_000) {
      this.#lastPurge = atMs;
      await this.#purge(atMs).catch((err: unknown) =>
        this.#deps.log.warn({ err }, "delivery history purge failed"),
      );
    }
    return totals;
  }

  /** Claims, rechecks, sends and records one delivery; undefined when another pass holds it. */
  async #attempt(id: string, atMs: number): Promise<"SENT" | "FAILED" | "SKIPPED" | undefined> {
    const { db, options } = this.#deps;
    const claimed = await db
      .updateTable("deliveries")
      .set({ lease_until: atMs + options.leaseMs })
      .where("id", "=", id)
      .where("state", "=", "PENDING")
      .where((eb) => eb.or([eb("lease_until", "is", null), eb("lease_until", "<", atMs)]))
      .returningAll()
      .executeTakeFirst();
    if (!claimed) return undefined;
    const d = claimed;
    const attemptId = `att_${randomUUID()}`;
    const started = performance.now();
    let outcome: Outcome;
    try {
      outcome = await this.#recheckAndSend(d, attemptId, atMs);
    } catch (err) {
      outcome = { status: "FAILED", code: 0, detail: err instanceof Error ? err.message : String(err) };
    }
    const durationMs = Math.round(performance.now() - started);
    const attempts = d.attempt_count + 1;
    let state: DeliveryTable["state"];
    let next = d.next_attempt_time;
    let skipReason = "";
    if (outcome.status === "SENT") state = "SENT";
    else if (outcome.status === "SKIPPED") {
      state = "SKIPPED";
      skipReason = outcome.reason;
    } else {
      const base = options.retryDelaysMs[Math.min(attempts - 1, options.retryDelaysMs.length - 1)];
      const jitter = 1 + ((this.#deps.random ?? Math.random)() * 0.4 - 0.2);
      let delay = Math.round(base * jitter);
      if (outcome.code === 429)
        delay = Math.max(options.minRetryAfter429Ms, outcome.retryAfterMs ?? 0, delay);
      next = atMs + delay;
      // Gives up when the schedule is spent or the next try would come after the message expired.
      state = attempts > options.retryDelaysMs.length || next > d.expire_time ? "FAILED" : "PENDING";
    }
    await db.transaction().execute(async (tx) => {
      await tx
        .insertInto("delivery_attempts")
        .values({
          id: attemptId,
          delivery_id: id,
          time: atMs,
          status: outcome.status,
          response_code: outcome.status === "SKIPPED" ? 0 : outcome.code,
          detail: outcome.status === "SKIPPED" ? `${outcome.reason}: ${outcome.detail}` : outcome.detail,
          duration_ms: durationMs,
        })
        .execute();
      await tx
        .updateTable("deliveries")
        .set({
          state,
          skip_reason: skipReason,
          attempt_count: attempts,
          next_attempt_time: next,
          lease_until: null,
          update_time: atMs,
        })
        .where("id", "=", id)
        .execute();
    });
    return outcome.status;
  }

  /** Everything that may have changed since the transition is read again before sending (SPEC §3). */
  async #recheckAndSend(d: DeliveryTable, attemptId: string, atMs: number): Promise<Outcome> {
    const { db } = this.#deps;
    const dest = await db
      .selectFrom("destinations")
      .selectAll()
      .where("id", "=", d.destination_id)
      .executeTakeFirst();
    if (!dest || dest.delete_time !== null) return skip("DESTINATION_DELETED", "the destination was deleted");
    if (dest.paused === 1) return skip("DESTINATION_PAUSED", "the destination is paused");
    if (atMs > d.expire_time) return skip("EXPIRED", "the message is older than its retry period");
    if (d.incident_id) {
      const inc = await db
        .selectFrom("incidents")
        .select(["state", "snooze_until"])
        .where("id", "=", d.incident_id)
        .executeTakeFirst();
      if (!inc) return skip("INCIDENT_GONE", "the incident no longer exists");
      if (FIRING_TYPES.has(d.event_type) && inc.state === "RESOLVED")
        return skip("INCIDENT_RECOVERED", "the incident recovered before this firing message was sent");
      if (FIRING_TYPES.has(d.event_type) && inc.state === "RETIRED")
        return skip("INCIDENT_RETIRED", "the incident was retired before this firing message was sent");
      if (inc.snooze_until !== null && inc.snooze_until > atMs)
        return skip(
          "INCIDENT_SNOOZED",
          `notifications are snoozed until ${new Date(inc.snooze_until).toISOString()}`,
        );
    }
    const message = JSON.parse(d.message) as NotificationMessage;
    if (dest.kind === "EMAIL") return this.#sendEmail(dest, message);
    const url = this.#deps.sealer.open(dest.sealed_url);
    if (dest.kind === "WEBHOOK") {
      const { body } = render("WEBHOOK", message);
      const headers = await this.#signatureHeaders(dest.id, d.id, attemptId, atMs, body);
      return fromHttp(await this.#deps.post(url, body, { "content-type": "application/json", ...headers }));
    }
    const { body } = render(dest.kind, message);
    return fromHttp(await this.#deps.post(url, body, { "content-type": "application/json" }));
  }

  async #signatureHeaders(
    destinationId: string,
    deliveryId: string,
    attemptId: string,
    atMs: number,
    body: string,
  ) {
    // Read and unsealed once per batch of the destination's deliveries (a rotation lands in the next batch).
    let secrets = this.#secrets.get(destinationId);
    if (!secrets) {
      const rows = await this.#deps.db
        .selectFrom("destination_secrets")
        .select(["sealed_secret", "expire_time"])
        .where("destination_id", "=", destinationId)
        .where((eb) => eb.or([eb("expire_time", "is", null), eb("expire_time", ">", atMs)]))
        .orderBy("create_time", "desc")
        .execute();
      secrets = rows.map((r) => this.#deps.sealer.open(r.sealed_secret));
      this.#secrets.set(destinationId, secrets);
    }
    // The legacy raw-body signature uses the previous secret, and only while its overlap lasts.
    const legacySecret = secrets.length > 1 ? secrets[1] : undefined;
    return signDelivery({
      deliveryId,
      attemptId,
      timestampS: Math.floor(atMs / 1000),
      body,
      secrets,
      legacySecret,
    });
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
    });
  }
}

function skip(reason: string, detail: string): Outcome {
  return { status: "SKIPPED", reason, detail };
}

function fromHttp(r: HttpOutcome): Outcome {
  if (r.kind === "error") return { status: "FAILED", code: 0, detail: r.error };
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
