import type { NotificationMessage } from "../message.ts";
import { renderDiscord } from "./discord.ts";
import { renderSlack } from "./slack.ts";
import { renderTeams } from "./teams.ts";
import { renderWebhook } from "./webhook.ts";

export { renderDiscord } from "./discord.ts";
export type { MailSender } from "./email.ts";
export { createLogSender, createSmtpSender, renderIncidentEmail, renderVerificationEmail } from "./email.ts";
export { renderOpsgenie } from "./opsgenie.ts";
export { incidentKey, renderPagerDuty } from "./pagerduty.ts";
export { renderSlack } from "./slack.ts";
export { renderTeams } from "./teams.ts";
export { MAX_WEBHOOK_BODY_BYTES, renderWebhook } from "./webhook.ts";

/** The destination kinds delivered as one HTTPS POST of a JSON body. */
export type HttpChannelKind = "WEBHOOK" | "SLACK" | "TEAMS" | "DISCORD";

const renderers: Readonly<Record<HttpChannelKind, (m: NotificationMessage) => { body: string }>> = {
  WEBHOOK: renderWebhook,
  SLACK: renderSlack,
  TEAMS: renderTeams,
  DISCORD: renderDiscord,
};

/** The JSON body to POST for a destination of `kind` (email goes through renderIncidentEmail). */
export function render(kind: HttpChannelKind, m: NotificationMessage): { body: string } {
  const r = renderers[kind];
  if (!r) throw new Error(`no HTTP channel for destination kind ${String(kind)}`);
  return r(m);
}
