/**
 * The notification every channel renders: one incident transition (or a test send) as plain data.
 * Built once when the delivery is created and stored with it, so every retry sends the same message.
 * The webhook body is exactly `JSON.stringify(webhookPayload(message))`.
 */
export type NotificationType =
  | "incident.opened"
  | "incident.resolved"
  | "incident.retired"
  | "incident.repeat"
  /** PagerDuty and Opsgenie destinations only: the incident was acknowledged in svc. */
  | "incident.acknowledged"
  | "test";

export interface NotificationMessage {
  readonly type: NotificationType;
  /** DeliveryID: stable across retries (the webhook-id header). */
  readonly deliveryId: string;
  /** When the transition happened, Unix seconds. */
  readonly timeUnix: number;
  readonly project: string;
  /** Absent for a test send. */
  readonly incident?: {
    /** projects/<p>/incidents/<id> */
    readonly name: string;
    /** OPEN, RESOLVED, RETIRED */
    readonly state: string;
    readonly severity: string;
    readonly metricId: string;
    readonly operator: string;
    readonly threshold: number;
    /** The value that fired it, and the newest value (absent when unknown, never 0 for missing). */
    readonly firingValue?: number;
    readonly lastValue?: number;
    readonly openTimeUnix: number;
    /** Resolution or retirement time. */
    readonly closeTimeUnix?: number;
    readonly retireReason?: string;
    /** users/<id> (incident.acknowledged). */
    readonly acknowledgedBy?: string;
  };
  readonly rule?: {
    /** projects/<p>/alertRules/<id> */
    readonly name: string;
    readonly displayName: string;
    readonly version: string;
  };
  readonly vm?: {
    readonly name: string;
    readonly mountpoint?: string;
  };
  /** Human-readable one-line summary, e.g. "FIRING: High CPU utilization on web-2 (96.1 > 90)". */
  readonly summary: string;
  /** Link to the incident (or the destination for a test) in the console. */
  readonly link: string;
}

/** The documented webhook JSON payload (docs/webhooks.md). */
export function webhookPayload(m: NotificationMessage): Record<string, unknown> {
  return {
    type: m.type,
    deliveryId: m.deliveryId,
    timestamp: m.timeUnix,
    project: m.project,
    summary: m.summary,
    link: m.link,
    ...(m.incident ? { incident: m.incident } : {}),
    ...(m.rule ? { rule: m.rule } : {}),
    ...(m.vm ? { vm: m.vm } : {}),
  };
}
