import type { Delivery, DeliveryAttempt } from "@gen/svc/monitoring/v1/destinations_pb.ts";
import { useQuery } from "@tanstack/react-query";
import { Fragment, useState } from "react";
import { Link } from "wouter";
import { api } from "../api.ts";
import { lastSegment, MISSING } from "../format.ts";
import { Time } from "./incident-format.tsx";
import { Badge, Button, Dialog, ErrorBanner, Loading } from "./ui.tsx";

/** Deliveries and their attempts, as the incident timeline and a destination's history show them. */

export const deliveryStateTone: Record<string, "ok" | "warn" | "bad" | "info" | "muted"> = {
  PENDING: "info",
  SENT: "ok",
  FAILED: "bad",
  SKIPPED: "warn",
};

/** Why the dispatcher skipped a delivery (docs/notifications.md, "The recheck before every attempt"). */
export const SKIP_REASONS: Record<string, string> = {
  DESTINATION_DELETED: "the destination was deleted",
  DESTINATION_PAUSED: "the destination is paused",
  EXPIRED: "more than 24 hours passed since the event",
  INCIDENT_GONE: "the incident no longer exists",
  DESTINATION_NOT_IN_RULE: "the incident's rule no longer names this destination",
  INCIDENT_RECOVERED: "the incident resolved before this firing message went out",
  INCIDENT_RETIRED: "the incident was retired before this firing message went out",
  INCIDENT_SNOOZED: "the incident was snoozed",
  NO_VERIFIED_RECIPIENT: "no recipient is both verified and still a project member",
};

export const EVENT_TYPES: Record<string, string> = {
  "incident.opened": "Incident opened",
  "incident.resolved": "Incident resolved",
  "incident.retired": "Incident retired",
  "incident.repeat": "Still firing (repeat)",
  test: "Test notification",
};

/** A long id (a UUID) cut to its first 8 characters for a table cell; the whole one is in the title. */
function shortId(id: string): string {
  return id.length > 12 ? `${id.slice(0, 8)}…` : id;
}

export function DeliveryStateBadge(props: { delivery: Pick<Delivery, "state" | "skipReason"> }) {
  const d = props.delivery;
  return (
    <Badge
      tone={deliveryStateTone[d.state] ?? "muted"}
      title={d.skipReason ? `${d.skipReason}: ${SKIP_REASONS[d.skipReason] ?? ""}` : undefined}
    >
      {d.state}
    </Badge>
  );
}

export function SkipReason(props: { reason: string }) {
  if (!props.reason) return null;
  return (
    <span className="skip-reason">
      <code>{props.reason}</code>
      {SKIP_REASONS[props.reason] ? <span className="muted"> — {SKIP_REASONS[props.reason]}</span> : null}
    </span>
  );
}

export function AttemptsTable(props: { attempts: DeliveryAttempt[] }) {
  if (props.attempts.length === 0)
    return (
      <p className="muted small attempts-none">No attempt yet: the dispatcher picks it up within seconds.</p>
    );
  return (
    <table className="table table-compact attempts" data-testid="attempts">
      <thead>
        <tr>
          <th>#</th>
          <th>Time</th>
          <th>Status</th>
          <th className="num">Response</th>
          <th className="num">Took</th>
          <th>Detail</th>
        </tr>
      </thead>
      <tbody>
        {props.attempts.map((a, i) => (
          <tr key={a.attemptId}>
            <td className="muted">{i + 1}</td>
            <td>
              <Time unix={a.timeUnix} />
            </td>
            <td>
              <Badge tone={deliveryStateTone[a.status] ?? "muted"}>{a.status}</Badge>
            </td>
            <td className="num">{a.responseCode ? `HTTP ${a.responseCode}` : MISSING}</td>
            <td className="num">{a.durationMs ? `${a.durationMs} ms` : MISSING}</td>
            <td className="attempt-detail">
              {a.detail || <span className="muted">{MISSING}</span>}
              <div className="muted small mono" title="svc-attempt-id header">
                {a.attemptId}
              </div>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** The facts of one delivery: ids, times, the skip reason and every attempt. */
export function DeliveryFacts(props: { delivery: Delivery; destinationLabel?: string }) {
  const d = props.delivery;
  return (
    <div className="delivery-facts">
      <dl className="kv">
        <dt>Delivery ID</dt>
        <dd>
          <code title="the webhook-id header; stable across retries">{d.deliveryId}</code>
        </dd>
        <dt>Event</dt>
        <dd>{EVENT_TYPES[d.eventType] ?? d.eventType}</dd>
        <dt>Destination</dt>
        <dd>
          <Link href={`/destinations/${lastSegment(d.destination)}`}>
            {props.destinationLabel ?? lastSegment(d.destination)}
          </Link>
        </dd>
        <dt>Incident</dt>
        <dd>
          {d.incident ? (
            <Link href={`/incidents/${lastSegment(d.incident)}`}>{lastSegment(d.incident)}</Link>
          ) : (
            <span className="muted">none (test send)</span>
          )}
        </dd>
        <dt>State</dt>
        <dd>
          <DeliveryStateBadge delivery={d} /> <SkipReason reason={d.skipReason} />
        </dd>
        <dt>Created</dt>
        <dd>
          <Time unix={d.createTimeUnix} />
        </dd>
        {d.state === "PENDING" ? (
          <>
            <dt>Next attempt</dt>
            <dd>
              <Time unix={d.nextAttemptTimeUnix} />
            </dd>
          </>
        ) : null}
        <dt>Expires</dt>
        <dd>
          <Time unix={d.expireTimeUnix} /> <span className="muted small">(not sent after this)</span>
        </dd>
      </dl>
      <h3 className="attempts-title">Attempts ({d.attempts.length})</h3>
      <AttemptsTable attempts={d.attempts} />
    </div>
  );
}

/** GetDelivery in a dialog: the delivery as stored now, refreshed while it is pending. */
export function DeliveryDialog(props: { name?: string; onClose: () => void; destinationLabel?: string }) {
  const q = useQuery({
    queryKey: ["delivery", props.name],
    queryFn: () => api.destinations.getDelivery({ name: props.name ?? "" }),
    enabled: !!props.name,
    refetchInterval: (query) => (query.state.data?.state === "PENDING" ? 2000 : false),
  });
  return (
    <Dialog title="Delivery" open={!!props.name} onClose={props.onClose}>
      <div data-testid="delivery-dialog">
        <ErrorBanner error={q.error} title="Could not read the delivery" />
        {q.data ? (
          <DeliveryFacts delivery={q.data} destinationLabel={props.destinationLabel} />
        ) : q.isPending ? (
          <Loading what="the delivery" />
        ) : null}
      </div>
    </Dialog>
  );
}

/**
 * A table of deliveries, newest first; each row expands to its attempts, and "Details" reads it again
 * with GetDelivery. `destinations` maps destination names to display names.
 */
export function DeliveriesTable(props: {
  deliveries: Delivery[];
  destinations?: Map<string, string>;
  showDestination?: boolean;
  showIncident?: boolean;
}) {
  const [open, setOpen] = useState<Set<string>>(new Set());
  const [detail, setDetail] = useState<string>();
  const label = (d: string) => props.destinations?.get(d) ?? lastSegment(d);
  const cols = 5 + (props.showDestination ? 1 : 0) + (props.showIncident ? 1 : 0);
  return (
    <>
      <table className="table deliveries" data-testid="deliveries">
        <thead>
          <tr>
            <th aria-label="Expand" />
            <th>Created</th>
            {props.showDestination ? <th>Destination</th> : null}
            <th>Event</th>
            {props.showIncident ? <th>Incident</th> : null}
            <th>State</th>
            <th className="num">Attempts</th>
          </tr>
        </thead>
        <tbody>
          {props.deliveries.map((d) => {
            const expanded = open.has(d.name);
            const last = d.attempts[d.attempts.length - 1];
            return (
              <Fragment key={d.name}>
                <tr className={expanded ? "expanded" : ""} data-delivery={d.deliveryId}>
                  <td className="expand-cell">
                    <button
                      type="button"
                      className="expander"
                      aria-expanded={expanded}
                      aria-label={`${expanded ? "Hide" : "Show"} attempts of ${d.deliveryId}`}
                      onClick={() => {
                        const next = new Set(open);
                        if (expanded) next.delete(d.name);
                        else next.add(d.name);
                        setOpen(next);
                      }}
                    >
                      {expanded ? "▾" : "▸"}
                    </button>
                  </td>
                  <td>
                    <Time unix={d.createTimeUnix} />
                  </td>
                  {props.showDestination ? (
                    <td>
                      <Link href={`/destinations/${lastSegment(d.destination)}`}>{label(d.destination)}</Link>
                    </td>
                  ) : null}
                  <td>{EVENT_TYPES[d.eventType] ?? d.eventType}</td>
                  {props.showIncident ? (
                    <td>
                      {d.incident ? (
                        <Link
                          href={`/incidents/${lastSegment(d.incident)}`}
                          title={d.incident}
                          className="mono"
                        >
                          {shortId(lastSegment(d.incident))}
                        </Link>
                      ) : (
                        <span className="muted">test</span>
                      )}
                    </td>
                  ) : null}
                  <td>
                    <DeliveryStateBadge delivery={d} />
                    {d.skipReason ? <div className="small muted">{d.skipReason}</div> : null}
                    {d.state === "PENDING" && d.nextAttemptTimeUnix ? (
                      <div className="small muted">
                        next <Time unix={d.nextAttemptTimeUnix} />
                      </div>
                    ) : null}
                  </td>
                  <td className="num">
                    {d.attempts.length}
                    {last?.responseCode ? <div className="small muted">HTTP {last.responseCode}</div> : null}
                  </td>
                </tr>
                {expanded ? (
                  <tr className="delivery-expansion">
                    <td colSpan={cols}>
                      <div className="row delivery-expansion-head">
                        <code className="small" title="the webhook-id header; stable across retries">
                          {d.deliveryId}
                        </code>
                        <SkipReason reason={d.skipReason} />
                        <span className="spacer" />
                        <Button onClick={() => setDetail(d.name)}>Details</Button>
                      </div>
                      <AttemptsTable attempts={d.attempts} />
                    </td>
                  </tr>
                ) : null}
              </Fragment>
            );
          })}
        </tbody>
      </table>
      <DeliveryDialog
        name={detail}
        onClose={() => setDetail(undefined)}
        destinationLabel={detail ? label(detail.replace(/\/deliveries\/[^/]+$/, "")) : undefined}
      />
    </>
  );
}
