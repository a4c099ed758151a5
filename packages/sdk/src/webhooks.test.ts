import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Webhook } from "standardwebhooks";
import { generateWebhookSecret, signDelivery } from "../../server/src/notify/signing.ts";
import {
  MAX_WEBHOOK_BODY_BYTES,
  readRawBody,
  VerifyWebhook,
  verifyWebhook,
  WebhookVerificationError,
  type WebhookVerificationReason,
} from "./index.ts";

const NEW = generateWebhookSecret();
const OLD = generateWebhookSecret();
const T = 1_735_689_600; // the attempt's timestamp, Unix seconds
const atT = (offsetS = 0) => ({ now: () => (T + offsetS) * 1000 + 999 });
const payload = {
  type: "incident.opened",
  deliveryId: "dlv_1",
  timestamp: T - 5,
  project: "projects/demo",
  summary: "FIRING: High CPU utilization on web-2 (96.1 > 90)",
  link: "https://svc.example.com/projects/demo/incidents/inc_1",
  incident: { name: "projects/demo/incidents/inc_1", state: "OPEN", severity: "WARNING", threshold: 90 },
};
const BODY = JSON.stringify(payload);

function deliver(
  over: { body?: string | Buffer; secrets?: string[]; attemptId?: string; timestampS?: number } = {},
) {
  return signDelivery({
    deliveryId: "dlv_1",
    attemptId: over.attemptId ?? "att_1",
    timestampS: over.timestampS ?? T,
    body: over.body ?? BODY,
    secrets: over.secrets ?? [NEW],
  });
}

/** Asserts a WebhookVerificationError with `reason` whose message names no secret. */
function refused(reason: WebhookVerificationReason, fn: () => unknown): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof WebhookVerificationError, String(e));
    assert.equal(e.reason, reason, e.message);
    for (const s of [NEW, OLD]) assert.ok(!e.message.includes(s.slice(6, 20)), "message contains a secret");
    return true;
  });
}

describe("verifyWebhook()", () => {
  it("accepts a delivery signed by the server and returns its IDs, timestamp and payload", () => {
    const h = deliver();
    const want = { deliveryId: "dlv_1", attemptId: "att_1", timestamp: T, payload };
    assert.deepEqual(verifyWebhook(BODY, h, NEW, atT()), want);
    assert.deepEqual(verifyWebhook(Buffer.from(BODY), new Headers(h), [NEW], atT()), want);
    assert.deepEqual(verifyWebhook(new TextEncoder().encode(BODY), h, NEW, atT()), want);
    assert.equal(VerifyWebhook, verifyWebhook);
  });

  it("matches header names case-insensitively and takes a one-element array (Node's header shapes)", () => {
    const h = deliver();
    const mixed = Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toUpperCase(), [v]]));
    assert.equal(verifyWebhook(BODY, mixed, NEW, atT()).deliveryId, "dlv_1");
  });

  it("refuses a tampered body", () => {
    refused("bad_signature", () => verifyWebhook(BODY.replace("96.1", "16.1"), deliver(), NEW, atT()));
    refused("bad_signature", () => verifyWebhook(`${BODY} `, deliver(), NEW, atT()));
  });

  it("refuses a tampered attempt ID", () => {
    refused("bad_signature", () =>
      verifyWebhook(BODY, { ...deliver(), "svc-attempt-id": "att_2" }, NEW, atT()),
    );
  });

  it("refuses a tampered delivery ID", () => {
    refused("bad_signature", () => verifyWebhook(BODY, { ...deliver(), "webhook-id": "dlv_2" }, NEW, atT()));
  });

  it("refuses a tampered timestamp, even one inside the window", () => {
    refused("bad_signature", () =>
      verifyWebhook(BODY, { ...deliver(), "webhook-timestamp": String(T + 1) }, NEW, atT()),
    );
  });

  it("refuses the wrong secret", () => {
    refused("bad_signature", () => verifyWebhook(BODY, deliver(), OLD, atT()));
  });

  it("accepts a delivery up to five minutes old or ahead and refuses a replay outside the window", () => {
    const h = deliver();
    for (const off of [0, 299, 300, -299, -300])
      assert.equal(verifyWebhook(BODY, h, NEW, atT(off)).timestamp, T, `offset ${off} s`);
    refused("timestamp_out_of_window", () => verifyWebhook(BODY, h, NEW, atT(301)));
    refused("timestamp_out_of_window", () => verifyWebhook(BODY, h, NEW, atT(3600)));
    refused("timestamp_out_of_window", () => verifyWebhook(BODY, h, NEW, atT(-301)));
  });

  it("honours toleranceSeconds", () => {
    const h = deliver();
    assert.equal(verifyWebhook(BODY, h, NEW, { ...atT(30), toleranceSeconds: 30 }).attemptId, "att_1");
    refused("timestamp_out_of_window", () =>
      verifyWebhook(BODY, h, NEW, { ...atT(31), toleranceSeconds: 30 }),
    );
  });

  it("during a rotation overlap either secret verifies; after the old one is dropped only the new one does", () => {
    const overlap = deliver({ secrets: [NEW, OLD] });
    assert.equal(verifyWebhook(BODY, overlap, [NEW, OLD], atT()).deliveryId, "dlv_1");
    assert.equal(verifyWebhook(BODY, overlap, NEW, atT()).deliveryId, "dlv_1");
    assert.equal(verifyWebhook(BODY, overlap, OLD, atT()).deliveryId, "dlv_1");
    const after = deliver({ secrets: [NEW] });
    assert.equal(verifyWebhook(BODY, after, [NEW, OLD], atT()).deliveryId, "dlv_1");
    assert.equal(verifyWebhook(BODY, after, NEW, atT()).deliveryId, "dlv_1");
    refused("bad_signature", () => verifyWebhook(BODY, after, OLD, atT()));
  });

  for (const name of ["webhook-id", "svc-attempt-id", "webhook-timestamp", "svc-signature-v2"]) {
    it(`refuses a delivery without ${name}`, () => {
      const h: Record<string, string | undefined> = { ...deliver() };
      delete h[name];
      refused("missing_header", () => verifyWebhook(BODY, h, NEW, atT()));
      assert.throws(() => verifyWebhook(BODY, h, NEW, atT()), new RegExp(name));
    });
  }

  it("refuses malformed headers and bodies", () => {
    const h = deliver();
    refused("malformed", () => verifyWebhook(BODY, { ...h, "webhook-timestamp": "17356896e2" }, NEW, atT()));
    refused("malformed", () =>
      verifyWebhook(BODY, { ...h, "svc-signature-v2": h["webhook-signature"] }, NEW, atT()),
    );
    refused("malformed", () => verifyWebhook(BODY, { ...h, "webhook-id": ["dlv_1", "dlv_2"] }, NEW, atT()));
    refused("malformed", () => verifyWebhook("not json", deliver({ body: "not json" }), NEW, atT()));
    const latin1 = Buffer.from([0x22, 0xe9, 0x22]);
    refused("malformed", () => verifyWebhook(latin1, deliver({ body: latin1 }), NEW, atT()));
  });

  it("refuses a body over 1 MiB", () => {
    const big = JSON.stringify("x".repeat(MAX_WEBHOOK_BODY_BYTES));
    refused("body_too_large", () => verifyWebhook(big, deliver({ body: big }), NEW, atT()));
  });

  it("refuses a parsed body with a TypeError that says to pass the raw body", () => {
    assert.throws(
      () => verifyWebhook(payload as unknown as string, deliver(), NEW, atT()),
      (e: Error) => e instanceof TypeError && /raw request body/.test(e.message),
    );
  });

  it("refuses secrets that are not whsec_ secrets without echoing them", () => {
    for (const bad of [[], "", "hunter2hunter2hunter2", "whsec_hunter2!", NEW.slice(6)])
      assert.throws(
        () => verifyWebhook(BODY, deliver(), bad, atT()),
        (e: Error) =>
          e instanceof TypeError && !e.message.includes("hunter2") && !e.message.includes(NEW.slice(6)),
      );
  });

  it("the standardwebhooks package verifies the same delivery's webhook-* headers unchanged", () => {
    // That library checks the timestamp against the real clock.
    const h = deliver({ secrets: [NEW, OLD], timestampS: Math.floor(Date.now() / 1000) });
    const std = {
      "webhook-id": h["webhook-id"],
      "webhook-timestamp": h["webhook-timestamp"],
      "webhook-signature": h["webhook-signature"],
    };
    assert.deepEqual(new Webhook(NEW).verify(BODY, std), payload);
    assert.deepEqual(new Webhook(OLD).verify(Buffer.from(BODY), std), payload);
    assert.throws(() => new Webhook(generateWebhookSecret()).verify(BODY, std));
    assert.throws(() => new Webhook(NEW).verify(`${BODY} `, std));
  });
});

describe("readRawBody()", () => {
  const KiB64 = 64 * 1024;
  /** Yields `total` bytes in 64 KiB chunks and records how far it was read and whether it was closed. */
  function source(total: number) {
    const state = { pulled: 0, closed: false };
    async function* gen() {
      try {
        for (let sent = 0; sent < total; sent += KiB64) {
          const n = Math.min(KiB64, total - sent);
          state.pulled += n;
          yield new Uint8Array(n).fill(0x61);
        }
      } finally {
        state.closed = true;
      }
    }
    return { body: gen(), state };
  }

  it("accepts exactly 1 MiB", async () => {
    const { body, state } = source(MAX_WEBHOOK_BODY_BYTES);
    const buf = await readRawBody(body);
    assert.equal(buf.length, MAX_WEBHOOK_BODY_BYTES);
    assert.ok(state.closed);
  });

  it("refuses 1 MiB + 1 and stops reading", async () => {
    const { body, state } = source(MAX_WEBHOOK_BODY_BYTES + 1 + 10 * KiB64);
    await assert.rejects(readRawBody(body), (e: unknown) => {
      assert.ok(e instanceof WebhookVerificationError);
      assert.equal(e.reason, "body_too_large");
      return true;
    });
    assert.equal(state.pulled, MAX_WEBHOOK_BODY_BYTES + KiB64, "read past the first chunk over the bound");
    assert.ok(state.closed, "the source was not closed");
    const exact = source(MAX_WEBHOOK_BODY_BYTES + 1);
    await assert.rejects(readRawBody(exact.body), WebhookVerificationError);
  });

  it("honours maxBytes", async () => {
    assert.equal((await readRawBody(source(10).body, { maxBytes: 10 })).length, 10);
    await assert.rejects(readRawBody(source(11).body, { maxBytes: 10 }), /larger than 10 bytes/);
  });

  it("refuses string chunks (a request with setEncoding)", async () => {
    async function* text() {
      yield "{}" as unknown as Uint8Array;
    }
    await assert.rejects(readRawBody(text()), TypeError);
  });
});
