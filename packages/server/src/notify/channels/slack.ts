import type { NotificationMessage } from "../message.ts";
import { jsonPostChannel } from "./channel.ts";
import { type Fact, factsOf, fit, linkLabelOf, oneLine, type Tone, titleOf, toneOf } from "./format.ts";

/**
 * Slack incoming webhook (docs.slack.dev, "Sending messages using incoming webhooks" and the Block
 * Kit reference): `text` is the notification and screen-reader fallback, `blocks` the message. A
 * header (plain_text ≤ 150), a section of fields (≤ 10, each ≤ 2000) and a link button (label ≤ 75,
 * url ≤ 3000). Block Kit has no colour of its own, so the tone is an emoji in the header.
 */
export const slackLimits = {
  text: 3000,
  header: 150,
  fields: 10,
  field: 2000,
  buttonLabel: 75,
  buttonUrl: 3000,
} as const;

const toneEmoji: Readonly<Record<Tone, string>> = {
  critical: ":red_circle:",
  warning: ":large_orange_circle:",
  info: ":large_blue_circle:",
  resolved: ":large_green_circle:",
  retired: ":white_circle:",
  test: ":bell:",
};

/** mrkdwn needs only these three escaped; user text then cannot form links or mentions. */
const escapeMrkdwn = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

function field(f: Fact): { type: "mrkdwn"; text: string } {
  const label = `*${escapeMrkdwn(f.label)}*\n`;
  // Slack shows a date in the reader's time zone, falling back to the UTC text.
  const value =
    f.timeUnix === undefined
      ? fit(f.value, slackLimits.field - label.length, escapeMrkdwn)
      : `<!date^${Math.floor(f.timeUnix)}^{date_short_pretty} {time_secs}|${escapeMrkdwn(f.value)}>`;
  return { type: "mrkdwn", text: `${label}${value}` };
}

export function renderSlack(m: NotificationMessage): { body: string } {
  const title = titleOf(m);
  const emoji = toneEmoji[toneOf(m)];
  const blocks: unknown[] = [
    {
      type: "header",
      text: { type: "plain_text", text: fit(`${emoji} ${title}`, slackLimits.header), emoji: true },
    },
  ];
  const facts = factsOf(m).slice(0, slackLimits.fields);
  if (facts.length > 0) blocks.push({ type: "section", fields: facts.map(field) });
  if (m.link && m.link.length <= slackLimits.buttonUrl)
    blocks.push({
      type: "actions",
      elements: [
        {
          type: "button",
          text: { type: "plain_text", text: fit(linkLabelOf(m), slackLimits.buttonLabel) },
          url: m.link,
        },
      ],
    });
  const text = fit(oneLine(m.summary) || title, slackLimits.text, escapeMrkdwn);
  return { body: JSON.stringify({ text, blocks }) };
}

export const slackChannel = jsonPostChannel(renderSlack);
