import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * Receiving svc webhooks (docs/webhooks.md): read the raw body bounded to 1 MiB with `readRawBody`, then
 * `verifyWebhook` checks the V2 signature (`svc-signature-v2`, which covers the delivery ID, the attempt ID, the
 * timestamp and the body) and the five-minute window, and parses the JSON payload. Verification alone does not
 * stop a replay inside the window: deduplicate durably on the returned `deliveryId`.
 */

/** The largest body svc sends, and the default bound of `readRawBody` and `verifyWebhook`: 1 MiB. */
export const MAX_WEBHOOK_BODY_BYTES = 1024 * 1024;

export type WebhookVerificationReason =
  | "missing_header"
  | "timestamp_out_of_window"
  | "bad_signature"
  | "malformed"
  | "body_too_large";

/** A delivery that must not be processed. The message says what failed; it never contains a secret. */
export class WebhookVerificationError extends Error {
  readonly reason: WebhookVerificationReason;
  constructor(reason: WebhookVerificationReason, message: string) {
    super(message);
    this.name = "WebhookVerificationError";
    this.reason = reason;
  }
}

export interface VerifiedWebhook {
  /** DeliveryID (`webhook-id`): stable across retries, the key to deduplicate on. */
  readonly deliveryId: string;
  /** `svc-attempt-id`: new for every attempt. */
  readonly attemptId: string;
  /** `webhook-timestamp`: when this attempt was signed, Unix seconds. */
  readonly timestamp: number;
  /** The parsed JSON body. */
  readonly payload: unknown;
}

export interface VerifyWebhookOptions {
  /** Accepted clock difference in either direction, seconds. Default 300. */
  readonly toleranceSeconds?: number;
  /** The clock, Unix milliseconds. Default Date.now. */
  readonly now?: () => number;
}

/** Node's `req.headers`, a fetch `Headers`, or any record (names matched case-insensitively). */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

const SECRET_PREFIX = "whsec_";
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const ID = /^[\x21-\x7e]{1,256}$/;
const UNIX_SECONDS = /^[0-9]{1,12}$/;
const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Verifies one delivery and returns its IDs, timestamp and parsed payload; throws WebhookVerificationError
 * otherwise. `rawBody` is the body exactly as received (before any JSON parsing); `secrets` are the
 * destination's active `whsec_…` secrets (during a rotation overlap pass both: either one verifies).
 */
export function verifyWebhook(
  rawBody: string | Uint8Array,
  headers: WebhookHeaders,
  secrets: string | readonly string[],
  opts: VerifyWebhookOptions = {},
): VerifiedWebhook {
  const body = bodyBytes(rawBody);
  const keys = secretKeys(secrets);
  const tolerance = opts.toleranceSeconds ?? 300;
  if (!Number.isFinite(tolerance) || tolerance < 0)
    throw new TypeError("toleranceSeconds must be a non-negative number");
  if (headers === null || typeof headers !== "object") throw new TypeError("headers must be an object");
  if (body.length > MAX_WEBHOOK_BODY_BYTES)
    throw new WebhookVerificationError(
      "body_too_large",
      `the body has ${body.length} bytes; svc never sends more than ${MAX_WEBHOOK_BODY_BYTES}`,
    );

  const deliveryId = requireHeader(headers, "webhook-id");
  const attemptId = requireHeader(headers, "svc-attempt-id");
  const ts = requireHeader(headers, "webhook-timestamp");
  const signatures = requireHeader(headers, "svc-signature-v2");
  if (!ID.test(deliveryId)) throw malformed("webhook-id is not 1-256 visible ASCII characters");
  if (!ID.test(attemptId)) throw malformed("svc-attempt-id is not 1-256 visible ASCII characters");
  if (!UNIX_SECONDS.test(ts)) throw malformed("webhook-timestamp is not a whole number of Unix seconds");
  const offered = signatures
    .split(" ")
    .filter((s) => s.startsWith("v2,"))
    .map((s) => Buffer.from(s.slice(3), "utf8"));
  if (offered.length === 0) throw malformed("svc-signature-v2 carries no v2,<base64> signature");

  // Compare the base64 text, not decoded bytes, so only the one canonical encoding matches.
  const prefix = Buffer.from(`v2\n${deliveryId}\n${attemptId}\n${ts}\n`, "utf8");
  let ok = false;
  for (const key of keys) {
    const want = Buffer.from(createHmac("sha256", key).update(prefix).update(body).digest("base64"), "utf8");
    for (const got of offered) if (got.length === want.length && timingSafeEqual(got, want)) ok = true;
  }
  if (!ok)
    throw new WebhookVerificationError(
      "bad_signature",
      `no svc-signature-v2 signature matches the ${keys.length === 1 ? "secret" : `${keys.length} secrets`}: ` +
        "the body, webhook-id, svc-attempt-id or webhook-timestamp differs from what svc signed (a body " +
        "parsed and re-serialized before verification no longer matches), or the secret is not this " +
        "destination's current one",
    );

  const timestamp = Number(ts);
  const nowS = Math.floor((opts.now ?? Date.now)() / 1000);
  if (Math.abs(nowS - timestamp) > tolerance) {
    const off = nowS - timestamp;
    throw new WebhookVerificationError(
      "timestamp_out_of_window",
      `webhook-timestamp ${ts} is ${Math.abs(off)} s ${off > 0 ? "older" : "newer"} than this machine's clock; ` +
        `deliveries are accepted within ${tolerance} s either way (a replayed request, or a clock that is off)`,
    );
  }

  let payload: unknown;
  try {
    payload = JSON.parse(typeof rawBody === "string" ? rawBody : utf8.decode(body));
  } catch {
    throw malformed("the body is not UTF-8 JSON");
  }
  return { deliveryId, attemptId, timestamp, payload };
}

/** The spec's name for verifyWebhook. */
export const VerifyWebhook: typeof verifyWebhook = verifyWebhook;

/**
 * Reads a request body (a Node IncomingMessage or any async iterable of byte chunks) into one Buffer, refusing
 * with `body_too_large` as soon as it passes `maxBytes` (default 1 MiB). On refusal it stops reading: the
 * iterator is closed (an IncomingMessage is destroyed and the rest of its bytes are discarded). Then answer
 * 413 with `Connection: close`, so the connection ends (docs/examples/webhook-receiver.ts does).
 */
export async function readRawBody(
  req: AsyncIterable<Uint8Array>,
  opts: { readonly maxBytes?: number } = {},
): Promise<Buffer> {
  const maxBytes = opts.maxBytes ?? MAX_WEBHOOK_BODY_BYTES;
  if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) throw new TypeError("maxBytes must be a whole number");
  const chunks: Uint8Array[] = [];
  let total = 0;
  // Throwing inside for-await calls the iterator's return(), which stops the stream.
  for await (const chunk of req) {
    if (!(chunk instanceof Uint8Array))
      throw new TypeError("readRawBody needs byte chunks: do not call setEncoding() on the request");
    total += chunk.byteLength;
    if (total > maxBytes)
      throw new WebhookVerificationError("body_too_large", `the body is larger than ${maxBytes} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, total);
}

function malformed(message: string): WebhookVerificationError {
  return new WebhookVerificationError("malformed", message);
}

function bodyBytes(rawBody: unknown): Buffer {
  if (typeof rawBody === "string") return Buffer.from(rawBody, "utf8");
  if (rawBody instanceof Uint8Array)
    return Buffer.from(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength);
  throw new TypeError(
    `verifyWebhook needs the raw request body (a string or Uint8Array exactly as received), not ${
      rawBody === null ? "null" : typeof rawBody
    }: the signature covers the bytes, and a parsed JSON body cannot be turned back into them. ` +
      "Read the body with readRawBody() (or your framework's raw-body option) before any JSON parser.",
  );
}

function secretKeys(secrets: string | readonly string[]): Buffer[] {
  const list = typeof secrets === "string" ? [secrets] : Array.isArray(secrets) ? secrets : [];
  if (list.length === 0) throw new TypeError("verifyWebhook needs at least one whsec_… secret");
  return list.map((s, i) => {
    const b64 = typeof s === "string" && s.startsWith(SECRET_PREFIX) ? s.slice(SECRET_PREFIX.length) : "";
    const key = BASE64.test(b64) && b64.length % 4 === 0 ? Buffer.from(b64, "base64") : Buffer.alloc(0);
    if (key.length < 16)
      throw new TypeError(
        `secret ${i + 1} of ${list.length} is not a webhook secret (expected whsec_ followed by base64)`,
      );
    return key;
  });
}

function requireHeader(headers: WebhookHeaders, name: string): string {
  let value: string | string[] | null | undefined;
  if (typeof (headers as Headers).get === "function") value = (headers as Headers).get(name);
  else {
    const record = headers as Record<string, string | string[] | undefined>;
    value = record[name];
    if (value === undefined)
      for (const k of Object.keys(record))
        if (k.toLowerCase() === name) {
          value = record[k];
          break;
        }
  }
  if (Array.isArray(value)) {
    if (value.length > 1) throw malformed(`${name} was sent ${value.length} times`);
    value = value[0];
  }
  if (typeof value !== "string" || value === "")
    throw new WebhookVerificationError(
      "missing_header",
      `missing header ${name}: svc sends webhook-id, webhook-timestamp, svc-attempt-id and svc-signature-v2 ` +
        "with every delivery (check that no proxy drops them)",
    );
  return value;
}
