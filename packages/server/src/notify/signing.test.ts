import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { webhookPayload } from "./message.ts";
import { generateWebhookSecret, type SignDeliveryInput, signDelivery, webhookSecretKey } from "./signing.ts";

/** The test vector printed in docs/webhooks.md ("Test vector"); the doc test below keeps the two equal. */
const VECTOR = {
  secret: "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", // bytes 0x00..0x1f
  previousSecret: "whsec_ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=", // bytes 0x20..0x3f
  deliveryId: "dlv_01JGZ3W4N5M6P7Q8R9S0T1V2W3",
  attemptId: "att_01JGZ3W4N5XK2M4P6R8T0V2X4Z",
  timestampS: 1735689600,
  body:
    '{"type":"test","deliveryId":"dlv_01JGZ3W4N5M6P7Q8R9S0T1V2W3","timestamp":1735689600,' +
    '"project":"projects/demo","summary":"Test notification from svc",' +
    '"link":"https://svc.example.com/projects/demo/destinations/ops-webhook"}',
  /** With secrets [secret, previousSecret] and legacySecret previousSecret. */
  want: {
    "webhook-id": "dlv_01JGZ3W4N5M6P7Q8R9S0T1V2W3",
    "webhook-timestamp": "1735689600",
    "webhook-signature":
      "v1,AFe88Ymb48fUV1MXUBy9BFzSTVg7hI7YrqQSTQ4ukBA= v1,su8dd0qpZppUzB6rAbDRS6xFbwldTX43jgghPba6yu4=",
    "svc-attempt-id": "att_01JGZ3W4N5XK2M4P6R8T0V2X4Z",
    "svc-signature-v2":
      "v2,+xM7I73pdgeJJ91ovRXm7oVf3+AV4JCUEE5lDnEmzN8= v2,7cZYFfvrORq+YVYzl8ovKx4GiJ53d3aV+po5UWIWyZA=",
    "svc-signature-256": "sha256=f2029158730177cc37c906d929816895f770cafb76ec64eb465983795a9c6556",
  },
} as const;

/** HMAC-SHA256 written out from the scheme, independent of signing.ts. */
function hmac(secret: string, data: string, enc: "base64" | "hex"): string {
  const key = Buffer.from(secret.slice("whsec_".length), "base64");
  return createHmac("sha256", key).update(data, "utf8").digest(enc);
}

describe("signDelivery()", () => {
  const v = VECTOR;

  it("the vector's body is webhookPayload() of a test message", () => {
    const body = JSON.stringify(
      webhookPayload({
        type: "test",
        deliveryId: v.deliveryId,
        timeUnix: v.timestampS,
        project: "projects/demo",
        summary: "Test notification from svc",
        link: "https://svc.example.com/projects/demo/destinations/ops-webhook",
      }),
    );
    assert.equal(body, v.body);
  });

  it("the vector's expected values follow from the scheme", () => {
    const [s, p] = [v.secret, v.previousSecret];
    const std = `${v.deliveryId}.${v.timestampS}.${v.body}`;
    const v2 = `v2\n${v.deliveryId}\n${v.attemptId}\n${v.timestampS}\n${v.body}`;
    assert.equal(v.want["webhook-signature"], `v1,${hmac(s, std, "base64")} v1,${hmac(p, std, "base64")}`);
    assert.equal(v.want["svc-signature-v2"], `v2,${hmac(s, v2, "base64")} v2,${hmac(p, v2, "base64")}`);
    assert.equal(v.want["svc-signature-256"], `sha256=${hmac(p, v.body, "hex")}`);
  });

  it("returns exactly the vector's headers (string and Buffer body alike)", () => {
    const input = {
      deliveryId: v.deliveryId,
      attemptId: v.attemptId,
      timestampS: v.timestampS,
      secrets: [v.secret, v.previousSecret],
      legacySecret: v.previousSecret,
    };
    assert.deepEqual(signDelivery({ ...input, body: v.body }), v.want);
    assert.deepEqual(signDelivery({ ...input, body: Buffer.from(v.body) }), v.want);
  });

  it("signs with one secret and no legacy header outside an overlap", () => {
    const h = signDelivery({
      deliveryId: v.deliveryId,
      attemptId: v.attemptId,
      timestampS: v.timestampS,
      body: v.body,
      secrets: [v.secret],
    });
    assert.deepEqual(Object.keys(h).sort(), [
      "svc-attempt-id",
      "svc-signature-v2",
      "webhook-id",
      "webhook-signature",
      "webhook-timestamp",
    ]);
    assert.equal(h["webhook-signature"], v.want["webhook-signature"].split(" ")[0]);
    assert.equal(h["svc-signature-v2"], v.want["svc-signature-v2"].split(" ")[0]);
  });

  it("a new attempt changes the V2 signature but not the Standard Webhooks one", () => {
    const base = { deliveryId: v.deliveryId, timestampS: v.timestampS, body: v.body, secrets: [v.secret] };
    const a = signDelivery({ ...base, attemptId: "att_a" });
    const b = signDelivery({ ...base, attemptId: "att_b" });
    assert.equal(a["webhook-id"], b["webhook-id"]);
    assert.equal(a["webhook-signature"], b["webhook-signature"]);
    assert.notEqual(a["svc-signature-v2"], b["svc-signature-v2"]);
  });

  const valid: SignDeliveryInput = {
    deliveryId: v.deliveryId,
    attemptId: v.attemptId,
    timestampS: v.timestampS,
    body: v.body,
    secrets: [v.secret],
  };
  for (const [name, patch] of [
    ["no active secret", { secrets: [] }],
    ["a secret without whsec_", { secrets: ["AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="] }],
    ["a secret that is not base64", { secrets: ["whsec_not base64!"] }],
    ["a short secret", { secrets: ["whsec_AAECAw=="] }],
    ["a bad legacy secret", { legacySecret: "hunter2" }],
    ["a delivery ID with a newline", { deliveryId: "a\nb" }],
    ["an empty attempt ID", { attemptId: "" }],
    ["a fractional timestamp", { timestampS: 1.5 }],
  ] as const) {
    it(`refuses ${name}, without echoing secrets`, () => {
      assert.throws(
        () => signDelivery({ ...valid, ...patch }),
        (e: Error) => e instanceof TypeError && !e.message.includes("hunter2") && !e.message.includes("AAEC"),
      );
    });
  }
});

describe("generateWebhookSecret()", () => {
  it("is whsec_ + base64 of 32 random bytes", () => {
    const a = generateWebhookSecret();
    const b = generateWebhookSecret();
    assert.match(a, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.notEqual(a, b);
    assert.equal(webhookSecretKey(a).length, 32);
  });
});

describe("docs/webhooks.md", () => {
  it("prints the test vector's inputs and outputs", () => {
    const doc = readFileSync(join(import.meta.dirname, "../../../../docs/webhooks.md"), "utf8");
    const v = VECTOR;
    for (const value of [
      v.secret,
      v.previousSecret,
      v.deliveryId,
      v.attemptId,
      String(v.timestampS),
      v.body,
      ...Object.values(v.want).flatMap((h) => h.split(" ")),
    ])
      assert.ok(doc.includes(value), `docs/webhooks.md lacks ${value}`);
  });
});
