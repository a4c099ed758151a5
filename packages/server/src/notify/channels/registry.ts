import type { DestinationTable } from "../../db/schema.ts";
import type { Channel } from "./channel.ts";
import { discordChannel } from "./discord.ts";
import { emailChannel } from "./email.ts";
import { opsgenieChannel } from "./opsgenie.ts";
import { pagerDutyChannel } from "./pagerduty.ts";
import { slackChannel } from "./slack.ts";
import { teamsChannel } from "./teams.ts";
import { webhookChannel } from "./webhook.ts";

/**
 * How each destination kind is delivered: a new channel is its file (render + Channel) and a row here
 * (docs/contributing.md#a-notification-channel). Typed by the destinations table's kinds, so a kind
 * without a row does not compile.
 */
export const channels: Readonly<Record<DestinationTable["kind"], Channel>> = {
  EMAIL: emailChannel,
  WEBHOOK: webhookChannel,
  SLACK: slackChannel,
  TEAMS: teamsChannel,
  DISCORD: discordChannel,
  PAGERDUTY: pagerDutyChannel,
  OPSGENIE: opsgenieChannel,
};

/** The channel of `kind`; throws for a kind svc does not know (a row written by a newer version). */
export function channelOf(kind: string): Channel {
  const c = Object.hasOwn(channels, kind) ? channels[kind as DestinationTable["kind"]] : undefined;
  if (!c) throw new Error(`no channel for destination kind ${kind}`);
  return c;
}
