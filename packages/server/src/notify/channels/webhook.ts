import { type NotificationMessage, webhookPayload } from "../message.ts";
import { signatureHeaders } from "../signing.ts";
import { type Channel, fromHttp } from "./channel.ts";

/** Receivers bound the raw body to 1 MiB (docs/webhooks.md#a-complete-receiver), so a body must never be larger. */
export const MAX_WEBHOOK_BODY_BYTES = 1024 * 1024;

/**
 * The signed webhook's body: exactly `JSON.stringify(webhookPayload(m))` (docs/webhooks.md). The
 * signature covers these bytes, so nothing may re-serialise them on the way out.
 */
export function renderWebhook(m: NotificationMessage): { body: string } {
  const body = JSON.stringify(webhookPayload(m));
  // Cannot happen with our messages: every string in them is bounded by the API's field limits (display
  // names ≤ 200, names and mountpoints far shorter), which keeps a payload at a few KB. A guard so
  // that a future field can never make receivers drop a delivery they are told to accept.
  const bytes = Buffer.byteLength(body);
  if (bytes > MAX_WEBHOOK_BODY_BYTES)
    throw new Error(`webhook body of ${bytes} bytes exceeds the ${MAX_WEBHOOK_BODY_BYTES}-byte limit`);
  return { body };
}

/** A webhook: the body above, signed with the destination's secrets (signing.ts). */
export const webhookChannel: Channel = {
  async send(ctx) {
    const url = ctx.url();
    const { body } = renderWebhook(ctx.message);
    const headers = signatureHeaders(ctx.secrets(), ctx.delivery.id, ctx.attemptId, ctx.atMs, body);
    return fromHttp(await ctx.post(url, body, { "content-type": "application/json", ...headers }));
  },
};
