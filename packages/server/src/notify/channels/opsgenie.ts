import type { NotificationMessage } from "../message.ts";
import { type Channel, fromIncidentApi } from "./channel.ts";
import { factsOf, fit, titleOf } from "./format.ts";
import { incidentKey } from "./pagerduty.ts";

/**
 * Opsgenie Alert API (docs.opsgenie.com, "Alert API"): create is a POST of `{message, alias,
 * description, details, entity, source, priority, tags}` to /v2/alerts; acknowledge and close are POSTs
 * to /v2/alerts/{alias}/acknowledge|close?identifierType=alias with `{source, note}`. The alias is one
 * per svc incident, so a repeat is folded into the open alert and the recovery closes it. Limits:
 * message ≤ 130, alias ≤ 512, description ≤ 15000, entity ≤ 512, tags ≤ 20 of ≤ 50, details keys ≤ 50
 * and values ≤ 8000 characters.
 */
export const opsgenieLimits = {
  message: 130,
  alias: 512,
  description: 15_000,
  entity: 512,
  detailKey: 50,
  detailValue: 8_000,
  note: 25_000,
} as const;

const priorities: Readonly<Record<string, string>> = { CRITICAL: "P1", WARNING: "P3", INFO: "P5" };

/** The path below the API base (…/v2/alerts) and the body of the request for `m`. */
export function renderOpsgenie(m: NotificationMessage): { path: string; body: string } {
  const alias = fit(incidentKey(m), opsgenieLimits.alias);
  if (m.type === "incident.acknowledged" || m.type === "incident.resolved" || m.type === "incident.retired") {
    const op = m.type === "incident.acknowledged" ? "acknowledge" : "close";
    return {
      path: `/${encodeURIComponent(alias)}/${op}?identifierType=alias`,
      body: JSON.stringify({ source: "svc", note: fit(titleOf(m), opsgenieLimits.note) }),
    };
  }
  const facts = factsOf(m);
  const details: Record<string, string> = {};
  for (const f of facts)
    details[fit(f.label, opsgenieLimits.detailKey)] = fit(f.value, opsgenieLimits.detailValue);
  if (m.incident) details.Incident = m.incident.name;
  const description = [...facts.map((f) => `${f.label}: ${f.value}`), ...(m.link ? [m.link] : [])].join("\n");
  return {
    path: "",
    body: JSON.stringify({
      message: fit(titleOf(m), opsgenieLimits.message),
      alias,
      description: fit(description, opsgenieLimits.description),
      details,
      entity: fit(m.vm?.name ?? m.project, opsgenieLimits.entity),
      source: "svc",
      priority: priorities[m.incident?.severity ?? ""] ?? "P5",
      tags: ["svc", ...(m.incident ? [m.incident.severity.toLowerCase(), m.incident.metricId] : ["test"])],
    }),
  };
}

/** One POST below the destination's API base (create, acknowledge or close), the API key in the header. */
export const opsgenieChannel: Channel = {
  async send(ctx) {
    const base = ctx.url();
    const key = ctx.key();
    const { path, body } = renderOpsgenie(ctx.message);
    return fromIncidentApi(
      await ctx.post(`${base.replace(/\/+$/, "")}${path}`, body, { authorization: `GenieKey ${key}` }),
    );
  },
};
