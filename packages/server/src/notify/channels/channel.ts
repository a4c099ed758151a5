import type { Db } from "../../db/database.ts";
import type { DeliveryTable, DestinationTable } from "../../db/schema.ts";
import type { HttpOutcome } from "../http.ts";
import type { NotificationMessage } from "../message.ts";
import type { MailSender } from "./email.ts";

/** What one attempt came to: sent, failed (retried on the schedule), or skipped (final). */
export type Outcome =
  | { status: "SENT"; code: number; detail: string }
  | { status: "FAILED"; code: number; detail: string; retryAfterMs?: number }
  | { status: "SKIPPED"; reason: string; detail: string };

/**
 * Everything a channel may use for one attempt, after the recheck let it through. The destination's
 * sealed values are opened on first use and kept for its queue's later attempts.
 */
export interface SendContext {
  readonly delivery: DeliveryTable;
  readonly destination: DestinationTable;
  readonly message: NotificationMessage;
  /** New for every attempt (`svc-attempt-id`). */
  readonly attemptId: string;
  /** The pass's time, ms. */
  readonly atMs: number;
  url(): string;
  /** PagerDuty's routing key, Opsgenie's API key. */
  key(): string;
  /** The webhook's active signing secrets, newest first. */
  secrets(): string[];
  /** POSTs the body; a failure without a response is written to the operator's log (never the tenant's). */
  post(url: string, body: string, headers: Record<string, string>): Promise<HttpOutcome>;
  readonly db: Db;
  readonly mailer: MailSender;
  readonly emailFrom: string;
}

/**
 * One way of delivering a notification, one per destination kind (channels/registry.ts). `send` may
 * throw: the dispatcher records that as an `internal error` attempt and logs the cause.
 */
export interface Channel {
  send(ctx: SendContext): Promise<Outcome>;
}

/** A channel that POSTs `render(message)` as JSON and reads the answer by its status (chat webhooks). */
export function jsonPostChannel(render: (m: NotificationMessage) => { body: string }): Channel {
  return {
    send: async (ctx) =>
      fromHttp(await ctx.post(ctx.url(), render(ctx.message).body, { "content-type": "application/json" })),
  };
}

export type Skipped = Extract<Outcome, { status: "SKIPPED" }>;

export function skipped(reason: string, detail: string): Skipped {
  return { status: "SKIPPED", reason, detail };
}

/** An HTTP answer as an outcome: 2xx is sent; a redirect or another status fails; no answer fails by its class. */
export function fromHttp(r: HttpOutcome): Outcome {
  // The class only: the library's text is in the operator's log (SendContext.post).
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

/**
 * PagerDuty's and Opsgenie's answers: as fromHttp, with what their JSON body says (PagerDuty's
 * `dedup_key` on a 202, `errors` on a 400; Opsgenie's `requestId` / `message`) in the detail.
 */
export function fromIncidentApi(r: HttpOutcome): Outcome {
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
