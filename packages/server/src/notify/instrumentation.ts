import type { Db } from "../db/database.ts";
import { counter, histogram, LATENCY_BUCKETS, observed, perScrape, type Registry } from "../instrument.ts";
import { channels } from "./channels/registry.ts";

/**
 * The `kind` label's values, as the dispatcher spells them: one per channel, read from the registry so a
 * new channel's counters start at 0 too (a query before its first delivery finds 0, not nothing).
 */
const KINDS = Object.keys(channels).map((kind) => kind.toLowerCase());
const OUTCOMES = ["sent", "failed", "retried", "skipped"] as const;
/**
 * The recheck's reasons (recheck.ts, and the email channel's NO_VERIFIED_RECIPIENT); a delivery skipped for
 * another reason is counted as "other".
 */
export const SKIP_REASONS = [
  "destination_deleted",
  "destination_paused",
  "destination_unconfirmed",
  "destination_not_in_rule",
  "expired",
  "incident_gone",
  "incident_recovered",
  "incident_retired",
  "incident_snoozed",
  "silenced",
  "no_verified_recipient",
] as const;

/**
 * The notification dispatcher's figures: attempts by destination kind and outcome, their latency,
 * and, read from the outbox at scrape time, the backlog and the age of the oldest due delivery.
 */
export function createNotifyMetrics(registry: Registry, outbox?: { db: Db; now: () => number }) {
  if (outbox) {
    // One indexed read (deliveries_due) per scrape serves both families; failures leave them absent.
    const read = perScrape(() => outboxFigures(outbox.db, outbox.now()));
    observed(
      registry,
      "gauge",
      "svc_notify_outbox_pending",
      "Deliveries waiting in the outbox (due now or scheduled for a retry).",
      async () => (await read())?.pending,
    );
    observed(
      registry,
      "gauge",
      "svc_notify_oldest_due_delivery_age_seconds",
      "How long the oldest delivery that is due has been waiting past its attempt time (0: none due).",
      async () => {
        const f = await read();
        if (!f) return undefined;
        return f.oldestDue === null ? 0 : Math.max(0, (outbox.now() - f.oldestDue) / 1000);
      },
    );
  }
  return {
    deliveries: counter(
      registry,
      "svc_notify_deliveries_total",
      "Delivery attempts by destination kind and outcome: sent, retried (failed, tried again later), failed (given up), skipped (by the recheck).",
      ["kind", "outcome"],
      KINDS.flatMap((kind) => OUTCOMES.map((outcome) => ({ kind, outcome }))),
    ),
    skipped: counter(
      registry,
      "svc_notify_deliveries_skipped_total",
      "Deliveries the recheck before sending skipped, by reason.",
      ["reason"],
      SKIP_REASONS.map((reason) => ({ reason })),
    ),
    attemptDuration: histogram(
      registry,
      "svc_notify_attempt_duration_seconds",
      "Duration of one delivery attempt (recheck and send) by destination kind.",
      LATENCY_BUCKETS,
      ["kind"],
    ),
  };
}

export type NotifyMetrics = ReturnType<typeof createNotifyMetrics>;

async function outboxFigures(
  db: Db,
  nowMs: number,
): Promise<{ pending: number; oldestDue: number | null } | undefined> {
  try {
    const row = await db
      .selectFrom("deliveries")
      .select((eb) => [
        eb.fn.countAll<number>().as("pending"),
        eb.fn.min<number>("next_attempt_time").as("oldest"),
      ])
      .where("state", "=", "PENDING")
      .executeTakeFirst();
    const oldest = row?.oldest === null || row?.oldest === undefined ? null : Number(row.oldest);
    return {
      pending: Number(row?.pending ?? 0),
      oldestDue: oldest !== null && oldest <= nowMs ? oldest : null,
    };
  } catch {
    return undefined;
  }
}
