import { createHmac, randomBytes } from "node:crypto";

/**
 * Webhook secrets and the signature headers of one delivery attempt (docs/webhooks.md).
 *
 * - `webhook-id`, `webhook-timestamp`, `webhook-signature`: Standard Webhooks, so off-the-shelf verifiers work.
 * - `svc-attempt-id`, `svc-signature-v2`: svc's V2 signature, which also covers the attempt ID.
 * - `svc-signature-256`: the legacy raw-body signature, only while a rotation overlap keeps the previous secret.
 *
 * The HMAC key of every header is the base64-decoded part of the `whsec_…` secret.
 */

const SECRET_PREFIX = "whsec_";
const SECRET_BYTES = 32;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
/** Header-safe IDs: visible ASCII, so neither "." nor "\n" in the signed strings can be forged by an ID. */
const ID = /^[\x21-\x7e]{1,256}$/;

/** A new secret: `whsec_` + base64 of 32 random bytes (Standard Webhooks format). */
export function generateWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(SECRET_BYTES).toString("base64");
}

/** The HMAC key of a `whsec_…` secret. Throws (without echoing the secret) when it is not one. */
export function webhookSecretKey(secret: string): Buffer {
  const b64 = typeof secret === "string" && secret.startsWith(SECRET_PREFIX) ? secret.slice(6) : "";
  const key = BASE64.test(b64) && b64.length % 4 === 0 ? Buffer.from(b64, "base64") : Buffer.alloc(0);
  if (key.length < 16) throw new TypeError("not a webhook secret: expected whsec_ followed by base64");
  return key;
}

/**
 * Decoded keys by secret, so that a destination's secrets are decoded once, not at every attempt;
 * bounded (cleared when full). The secrets themselves are already in the dispatcher's memory.
 */
const decodedKeys = new Map<string, Buffer>();
const MAX_DECODED_KEYS = 1_024;

/** webhookSecretKey, remembered per secret (only secrets that decode); the Buffer must not be changed. */
function cachedSecretKey(secret: string): Buffer {
  let key = decodedKeys.get(secret);
  if (key === undefined) {
    key = webhookSecretKey(secret);
    if (decodedKeys.size >= MAX_DECODED_KEYS) decodedKeys.clear();
    decodedKeys.set(secret, key);
  }
  return key;
}

export interface SignDeliveryInput {
  /** DeliveryID, stable across retries. */
  readonly deliveryId: string;
  /** New for every attempt. */
  readonly attemptId: string;
  /** This attempt's time, Unix seconds. */
  readonly timestampS: number;
  /** The exact bytes sent (`JSON.stringify(webhookPayload(message))`); a string is sent as UTF-8. */
  readonly body: Buffer | string;
  /** Active secrets, newest first: one V1 and one V2 signature each. */
  readonly secrets: readonly string[];
  /** The previous secret during a legacy overlap: adds `svc-signature-256`. */
  readonly legacySecret?: string;
}

/** The signature headers of one attempt, lowercase names, to send beside `content-type: application/json`. */
export function signDelivery(input: SignDeliveryInput): Record<string, string> {
  const { deliveryId, attemptId, timestampS, secrets, legacySecret } = input;
  if (!ID.test(deliveryId)) throw new TypeError("deliveryId must be 1-256 visible ASCII characters");
  if (!ID.test(attemptId)) throw new TypeError("attemptId must be 1-256 visible ASCII characters");
  if (!Number.isSafeInteger(timestampS) || timestampS < 0)
    throw new TypeError("timestampS must be a whole number of Unix seconds");
  if (secrets.length === 0) throw new TypeError("at least one active secret is required");
  const body = typeof input.body === "string" ? Buffer.from(input.body, "utf8") : input.body;
  const ts = String(timestampS);
  const keys = secrets.map(cachedSecretKey);
  const v1 = Buffer.from(`${deliveryId}.${ts}.`, "utf8");
  const v2 = Buffer.from(`v2\n${deliveryId}\n${attemptId}\n${ts}\n`, "utf8");
  const mac = (key: Buffer, prefix: Buffer) =>
    createHmac("sha256", key).update(prefix).update(body).digest("base64");
  const headers: Record<string, string> = {
    "webhook-id": deliveryId,
    "webhook-timestamp": ts,
    "webhook-signature": keys.map((k) => `v1,${mac(k, v1)}`).join(" "),
    "svc-attempt-id": attemptId,
    "svc-signature-v2": keys.map((k) => `v2,${mac(k, v2)}`).join(" "),
  };
  if (legacySecret !== undefined) {
    const hex = createHmac("sha256", cachedSecretKey(legacySecret)).update(body).digest("hex");
    headers["svc-signature-256"] = `sha256=${hex}`;
  }
  return headers;
}

/**
 * The signature headers of one webhook attempt at `atMs` with the destination's active secrets (newest
 * first). The legacy rule: `svc-signature-256` is added, with the previous secret, only while a rotation's
 * overlap keeps two secrets active (docs/webhooks.md).
 */
export function signatureHeaders(
  secrets: readonly string[],
  deliveryId: string,
  attemptId: string,
  atMs: number,
  body: string,
): Record<string, string> {
  return signDelivery({
    deliveryId,
    attemptId,
    timestampS: Math.floor(atMs / 1000),
    body,
    secrets,
    legacySecret: secrets.length > 1 ? secrets[1] : undefined,
  });
}
