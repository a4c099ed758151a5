import type { NotificationMessage } from "../message.ts";
import { jsonPostChannel } from "./channel.ts";
import { factsOf, fit, formatTime, oneLine, titleOf, toneColors, toneOf } from "./format.ts";

/**
 * Discord webhook (discord.com/developers/docs, "Execute Webhook" and "Embed Limits"): one embed with
 * title (≤ 256), description (≤ 4096), ≤ 25 fields (name ≤ 256, value ≤ 1024), a footer (≤ 2048) and
 * all of these together ≤ 6000; colour, ISO timestamp and url. `allowed_mentions: {parse: []}` so no
 * text in a message can ping @everyone, a role or a user.
 */
export const discordLimits = {
  title: 256,
  description: 4096,
  fields: 25,
  fieldName: 256,
  fieldValue: 1024,
  footer: 2048,
  total: 6000,
} as const;

/**
 * Backslash-escapes Discord markdown in descriptions and field values, so user text cannot format,
 * mask a link, quote or write a mention (titles are shown as plain text, so they are left alone).
 */
const escapeMarkdown = (s: string) => s.replace(/[\\*_~`|>#[\]()<]/g, "\\$&");

interface Field {
  name: string;
  value: string;
  inline: boolean;
}

export function renderDiscord(m: NotificationMessage): { body: string } {
  const summary = titleOf(m);
  const title = fit(summary, discordLimits.title);
  // The whole summary in the description only when the title had to be cut.
  let description = title === summary ? "" : fit(summary, discordLimits.description, escapeMarkdown);
  const fields: Field[] = factsOf(m)
    .slice(0, discordLimits.fields)
    .map((f) => ({
      name: fit(f.label, discordLimits.fieldName),
      // <t:…:f> shows the time in the reader's zone.
      value:
        f.timeUnix === undefined
          ? fit(f.value, discordLimits.fieldValue, escapeMarkdown)
          : `<t:${Math.floor(f.timeUnix)}:f>`,
      inline: true,
    }));
  const footer = fit(oneLine(`svc · ${m.project}`), discordLimits.footer);
  // Keep the sum under the total: the description gives way first, then fields from the end.
  const size = () =>
    title.length +
    description.length +
    footer.length +
    fields.reduce((n, f) => n + f.name.length + f.value.length, 0);
  if (size() > discordLimits.total && description)
    description = fit(
      summary,
      Math.max(0, description.length - (size() - discordLimits.total)),
      escapeMarkdown,
    );
  while (size() > discordLimits.total && fields.length > 0) fields.pop();
  const embed = {
    title,
    ...(description ? { description } : {}),
    ...(m.link ? { url: m.link } : {}),
    color: toneColors[toneOf(m)],
    timestamp: formatTime(m.timeUnix),
    ...(fields.length > 0 ? { fields } : {}),
    footer: { text: footer },
  };
  return { body: JSON.stringify({ allowed_mentions: { parse: [] }, embeds: [embed] }) };
}

export const discordChannel = jsonPostChannel(renderDiscord);
