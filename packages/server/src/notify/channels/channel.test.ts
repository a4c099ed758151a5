import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { DeliveryTable, DestinationTable } from "../../db/schema.ts";
import { destinationKinds } from "../destinations.ts";
import type { HttpOutcome } from "../http.ts";
import type { NotificationMessage } from "../message.ts";
import { generateWebhookSecret, signDelivery } from "../signing.ts";
import { fromHttp, fromIncidentApi, type SendContext } from "./channel.ts";
import { renderOpsgenie } from "./opsgenie.ts";
import { renderPagerDuty } from "./pagerduty.ts";
import { channelOf, channels } from "./registry.ts";
import { renderSlack } from "./slack.ts";
import { renderWebhook } from "./webhook.ts";

/** A test send: what the requests carry, not what the message says (channels.test.ts has the bodies). */
const message: NotificationMessage = {
  type: "test",
  deliveryId: "dlv_1",
  timeUnix: 1,
  project: "projects/p",
  summary: "x",
  link: "",
};
const atMs = 1_767_225_601_234;
const ok: HttpOutcome = { kind: "response", status: 202, durationMs: 3 };

/** A SendContext whose POSTs are recorded and answered with `answer`; no database, no mailer. */
function context(
  kind: DestinationTable["kind"],
  over: { secrets?: string[]; answer?: HttpOutcome; message?: NotificationMessage } = {},
) {
  const posts: { url: string; body: string; headers: Record<string, string> }[] = [];
  const ctx: SendContext = {
    delivery: { id: "dlv_1", destination_id: "dst_1" } as DeliveryTable,
    destination: { id: "dst_1", kind } as DestinationTable,
    message: over.message ?? message,
    attemptId: "att_1",
    atMs,
    url: () => "https://receiver.example/base/",
    key: () => "integration-key",
    secrets: () => over.secrets ?? [],
    post: async (url, body, headers) => {
      posts.push({ url, body, headers });
      return over.answer ?? ok;
    },
    get db(): never {
      throw new Error("no database here");
    },
    get mailer(): never {
      throw new Error("no mailer here");
    },
    emailFrom: "svc <alerts@svc.invalid>",
  };
  return { ctx, posts };
}

describe("channels", () => {
  it("every destination kind has a channel, and an unknown kind is refused by name", () => {
    assert.deepEqual(Object.keys(channels).sort(), [...destinationKinds].sort());
    assert.throws(() => channelOf("CARRIER_PIGEON"), /no channel for destination kind CARRIER_PIGEON/);
    assert.throws(() => channelOf("toString"), /no channel/);
  });

  it("a webhook is the rendered body, signed with every active secret", async () => {
    const secret = generateWebhookSecret();
    const { ctx, posts } = context("WEBHOOK", { secrets: [secret] });
    assert.deepEqual(await channelOf("WEBHOOK").send(ctx), { status: "SENT", code: 202, detail: "accepted" });
    assert.equal(posts[0].headers["svc-signature-256"], undefined, "no legacy signature outside an overlap");
    const body = renderWebhook(message).body;
    const signed = signDelivery({
      deliveryId: "dlv_1",
      attemptId: "att_1",
      timestampS: 1_767_225_601,
      body,
      secrets: [secret],
    });
    assert.deepEqual(posts, [
      {
        url: "https://receiver.example/base/",
        body,
        headers: { "content-type": "application/json", ...signed },
      },
    ]);
  });

  it("during a rotation overlap the webhook also carries the legacy signature, with the previous secret", async () => {
    const [next, previous] = [generateWebhookSecret(), generateWebhookSecret()];
    const { ctx, posts } = context("WEBHOOK", { secrets: [next, previous] });
    await channelOf("WEBHOOK").send(ctx);
    const body = renderWebhook(message).body;
    const legacy: Record<string, string> = signDelivery({
      deliveryId: "dlv_1",
      attemptId: "att_1",
      timestampS: 1_767_225_601,
      body,
      secrets: [previous],
      legacySecret: previous,
    });
    assert.equal(posts[0].headers["svc-signature-256"], legacy["svc-signature-256"]);
    assert.equal(posts[0].headers["webhook-signature"].split(" ").length, 2);
  });

  it("a webhook without an active secret is not sent unsigned", async () => {
    const { ctx, posts } = context("WEBHOOK");
    await assert.rejects(channelOf("WEBHOOK").send(ctx), /at least one active secret/);
    assert.equal(posts.length, 0);
  });

  it("a chat channel POSTs its provider's JSON", async () => {
    const { ctx, posts } = context("SLACK");
    await channelOf("SLACK").send(ctx);
    assert.deepEqual(posts, [
      {
        url: "https://receiver.example/base/",
        body: renderSlack(message).body,
        headers: { "content-type": "application/json" },
      },
    ]);
  });

  it("PagerDuty gets the routing key in the body; Opsgenie the key in its header, below the API base", async () => {
    const pd = context("PAGERDUTY");
    await channelOf("PAGERDUTY").send(pd.ctx);
    assert.deepEqual(pd.posts, [
      {
        url: "https://receiver.example/base/",
        body: renderPagerDuty(message, "integration-key").body,
        headers: {},
      },
    ]);
    const og = context("OPSGENIE", { message: { ...message, type: "incident.acknowledged" } });
    await channelOf("OPSGENIE").send(og.ctx);
    const { path, body } = renderOpsgenie({ ...message, type: "incident.acknowledged" });
    assert.deepEqual(og.posts, [
      {
        url: `https://receiver.example/base${path}`,
        body,
        headers: { authorization: "GenieKey integration-key" },
      },
    ]);
  });

  it("reads an answer: 2xx sent, a redirect not followed, Retry-After kept, no answer by its class", () => {
    const table: [HttpOutcome, ReturnType<typeof fromHttp>][] = [
      [
        { kind: "response", status: 204, durationMs: 1 },
        { status: "SENT", code: 204, detail: "accepted" },
      ],
      [
        { kind: "response", status: 302, durationMs: 1 },
        { status: "FAILED", code: 302, detail: "redirect 302 not followed", retryAfterMs: undefined },
      ],
      [
        { kind: "response", status: 429, retryAfterSeconds: 90, durationMs: 1 },
        { status: "FAILED", code: 429, detail: "HTTP 429", retryAfterMs: 90_000 },
      ],
      [
        { kind: "error", reason: "connection refused", error: "ECONNREFUSED 10.0.0.1:443", durationMs: 1 },
        { status: "FAILED", code: 0, detail: "connection refused" },
      ],
    ];
    for (const [answer, want] of table) assert.deepEqual(fromHttp(answer), want);
  });

  it("an incident API's answer adds what its JSON says", () => {
    const head = JSON.stringify({ status: "success", message: "Event processed", dedup_key: "svc-demo-i-1" });
    assert.equal(
      fromIncidentApi({ kind: "response", status: 202, head, durationMs: 1 }).detail,
      "accepted: Event processed, dedup_key svc-demo-i-1",
    );
    const bad = JSON.stringify({ message: "Invalid event", errors: ["routing_key is invalid", "x"] });
    assert.equal(
      fromIncidentApi({ kind: "response", status: 400, head: bad, durationMs: 1 }).detail,
      "HTTP 400: Invalid event, routing_key is invalid; x",
    );
    assert.equal(
      fromIncidentApi({ kind: "response", status: 502, head: "<html>", durationMs: 1 }).detail,
      "HTTP 502",
    );
  });
});
