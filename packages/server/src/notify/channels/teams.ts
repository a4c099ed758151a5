import type { NotificationMessage } from "../message.ts";
import { jsonPostChannel } from "./channel.ts";
import { factsOf, fit, linkLabelOf, type Tone, titleOf, toneOf } from "./format.ts";

/**
 * Microsoft Teams through a Workflows webhook ("Post to a channel when a webhook request is
 * received"; Microsoft Learn, "Create incoming webhooks with Workflows"): a `message` whose one
 * attachment is an Adaptive Card 1.4. Workflows accept Adaptive Cards only (no MessageCard) and a
 * message of about 28 KB; the card is a coloured title container, a FactSet and an OpenUrl action.
 */
export const teamsLimits = {
  /**
   * Teams' message size limit is about 28 KB. With the limits below, at most 3 UTF-8 bytes per UTF-16
   * unit (control characters are removed by oneLine) and ≤ 10 facts, a card stays under 23 KB.
   */
  bodyBytes: 24 * 1024,
  title: 400,
  factTitle: 100,
  factValue: 500,
  actionTitle: 100,
  actionUrl: 2048,
} as const;

/** Container styles and TextBlock colours of Adaptive Cards 1.2+. */
const toneStyle: Readonly<Record<Tone, { style: string; color: string }>> = {
  critical: { style: "attention", color: "Attention" },
  warning: { style: "warning", color: "Warning" },
  info: { style: "accent", color: "Accent" },
  resolved: { style: "good", color: "Good" },
  retired: { style: "emphasis", color: "Default" },
  test: { style: "emphasis", color: "Accent" },
};

export function renderTeams(m: NotificationMessage): { body: string } {
  const tone = toneStyle[toneOf(m)];
  const card = {
    $schema: "http://adaptivecards.io/schemas/adaptive-card.json",
    type: "AdaptiveCard",
    version: "1.4",
    msteams: { width: "Full" },
    body: [
      {
        type: "Container",
        style: tone.style,
        bleed: true,
        items: [
          {
            type: "TextBlock",
            text: fit(titleOf(m), teamsLimits.title),
            size: "Medium",
            weight: "Bolder",
            color: tone.color,
            wrap: true,
          },
        ],
      },
      {
        type: "FactSet",
        facts: factsOf(m)
          .slice(0, 10)
          .map((f) => ({
            title: fit(f.label, teamsLimits.factTitle),
            value: fit(f.value, teamsLimits.factValue),
          })),
      },
    ],
    ...(m.link && m.link.length <= teamsLimits.actionUrl
      ? {
          actions: [
            { type: "Action.OpenUrl", title: fit(linkLabelOf(m), teamsLimits.actionTitle), url: m.link },
          ],
        }
      : {}),
  };
  const body = JSON.stringify({
    type: "message",
    attachments: [
      { contentType: "application/vnd.microsoft.card.adaptive", contentUrl: null, content: card },
    ],
  });
  // Cannot happen with the limits above (see bodyBytes); a guard against a future field, not a truncation.
  if (Buffer.byteLength(body) > teamsLimits.bodyBytes) throw new Error("Teams card exceeds its size limit");
  return { body };
}

export const teamsChannel = jsonPostChannel(renderTeams);
