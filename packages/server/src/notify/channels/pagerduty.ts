import type { NotificationMessage } from "../message.ts";
import { type Channel, fromIncidentApi } from "./channel.ts";
import { factsOf, fit, formatTime, titleOf } from "./format.ts";

/**
 * PagerDuty Events API v2 (developer.pagerduty.com, "Send an Alert Event"): one POST of
 * `{routing_key, event_action, dedup_key, payload, links, client, client_url}` to /v2/enqueue. One
 * dedup_key per svc incident, so the opening triggers, an acknowledgement in svc acknowledges and a
 * recovery (or retirement) resolves the same PagerDuty incident; a repeat triggers again, which PagerDuty
 * folds into the open one. `payload` (summary ≤ 1024, source, severity) goes with trigger only.
 */
export const pagerDutyLimits = { summary: 1024, dedupKey: 255 } as const;

const severities: Readonly<Record<string, string>> = {
  CRITICAL: "critical",
  WARNING: "warning",
  INFO: "info",
};

/** One key per incident, the same for every message about it (Opsgenie's alias too). */
export function incidentKey(m: NotificationMessage): string {
  if (!m.incident) return `svc-test-${m.deliveryId}`;
  const [, project, , id] = m.incident.name.split("/");
  return `svc-${project}-${id}`;
}

export function pagerDutyAction(m: NotificationMessage): "trigger" | "acknowledge" | "resolve" {
  switch (m.type) {
    case "incident.acknowledged":
      return "acknowledge";
    case "incident.resolved":
    case "incident.retired":
      return "resolve";
    default:
      return "trigger";
  }
}

export function renderPagerDuty(m: NotificationMessage, routingKey: string): { body: string } {
  const action = pagerDutyAction(m);
  const event: Record<string, unknown> = {
    routing_key: routingKey,
    event_action: action,
    dedup_key: fit(incidentKey(m), pagerDutyLimits.dedupKey),
  };
  if (action === "trigger") {
    const details: Record<string, string> = {};
    for (const f of factsOf(m)) details[f.label] = f.value;
    if (m.incident) details.Incident = m.incident.name;
    event.payload = {
      summary: fit(titleOf(m), pagerDutyLimits.summary),
      source: m.vm?.name ?? m.project,
      severity: severities[m.incident?.severity ?? ""] ?? "info",
      timestamp: formatTime(m.timeUnix),
      ...(m.vm?.mountpoint ? { component: m.vm.mountpoint } : {}),
      ...(m.rule ? { group: m.rule.displayName } : {}),
      ...(m.incident ? { class: m.incident.metricId } : {}),
      custom_details: details,
    };
  }
  if (m.link) {
    event.links = [{ href: m.link, text: m.incident ? "Open incident in svc" : "Open in svc" }];
    event.client = "svc";
    event.client_url = m.link;
  }
  return { body: JSON.stringify(event) };
}

/** One POST to the Events API with the destination's routing key in the body; its answer read as fromIncidentApi. */
export const pagerDutyChannel: Channel = {
  async send(ctx) {
    const url = ctx.url();
    return fromIncidentApi(await ctx.post(url, renderPagerDuty(ctx.message, ctx.key()).body, {}));
  },
};
