import { Code, ConnectError } from "@connectrpc/connect";
import type { AuditEvent } from "@gen/svc/monitoring/v1/audit_pb.ts";
import { useQuery } from "@tanstack/react-query";
import { Link } from "wouter";
import { api } from "../api.ts";
import { lastSegment } from "../format.ts";
import { useProject } from "../session.tsx";
import { ACTOR_KINDS, changedInWords, eventSentence, useResourceNames } from "./audit-words.tsx";
import { PersonLabel, usePeople, useServiceAccountNames } from "./people.tsx";
import { Badge, ErrorBanner, Loading, Time } from "./ui.tsx";

/**
 * Audit events as rows (issue 29): the Activity page's table, and each resource's own recent events
 * (RecentActivity) on the pages of a rule, a destination, an incident, a CI trust and a service account.
 */

/** Where a resource's own page is in the console, when it has one. */
export function resourceHref(name: string): string | undefined {
  const m =
    /^projects\/[^/]+\/(alertRules|incidents|destinations|keys|serviceAccounts|ciTrusts|silences)\/([^/]+)/.exec(
      name,
    );
  if (!m) return undefined;
  const pages: Record<string, string> = {
    alertRules: `/alerts/${m[2]}`,
    incidents: `/incidents/${m[2]}`,
    destinations: `/destinations/${m[2]}`,
    keys: "/keys",
    serviceAccounts: name.includes("/keys/") ? "/keys" : "/service-accounts",
    ciTrusts: "/ci-trusts",
    silences: "/silences",
  };
  return pages[m[1]];
}

/** The Activity page filtered on one resource (and what is under it: a service account's keys). */
export function activityHref(resource: string): string {
  return `/activity?${new URLSearchParams({ resource })}`;
}

export function AuditEventTable(props: { events: readonly AuditEvent[]; showResource?: boolean }) {
  const showResource = props.showResource !== false;
  return (
    <table className="table table-cards table-cards-stacked" data-testid="activity-table">
      <thead>
        <tr>
          <th>When</th>
          <th>Who</th>
          <th>What</th>
          {showResource ? <th>Resource</th> : null}
          <th>Outcome</th>
          <th>From</th>
        </tr>
      </thead>
      <tbody>
        {props.events.map((e) => (
          <AuditEventRow key={e.name} event={e} showResource={showResource} />
        ))}
      </tbody>
    </table>
  );
}

export function AuditEventRow(props: { event: AuditEvent; showResource?: boolean }) {
  const e = props.event;
  const href = resourceHref(e.resource);
  const nameOf = useResourceNames([e]);
  const people = usePeople();
  const accountName = useServiceAccountNames();
  const method = lastSegment(e.method);
  const resourceName = nameOf(e.resource);
  // A person by name (the email and id on hover); a service account by its display name.
  const who = e.actor.startsWith("users/")
    ? people(e.actor)
    : e.actor.includes("/serviceAccounts/")
      ? { label: accountName(e.actor), full: e.actor }
      : { label: e.actor, full: e.actor };
  const detail = Object.entries(e.actorDetail).filter(([k]) => k !== "session");
  return (
    <tr data-event={lastSegment(e.name)} data-method={method} data-actor={e.actor} data-resource={e.resource}>
      <td>
        <Time unix={Number(e.timeUnixMs) / 1000} />
      </td>
      <td data-label="Who">
        {e.actor.startsWith("users/") ? (
          <PersonLabel who={who} block />
        ) : (
          <div className="person" title={who.full}>
            {who.label}
          </div>
        )}
        <div className="muted small">
          {ACTOR_KINDS[e.actorKind] ?? e.actorKind}
          {detail.map(([k, v]) => (
            <div key={k} title={v}>
              {k}: {k === "key" ? (nameOf(v) ?? <span className="mono">{v}</span>) : v}
            </div>
          ))}
        </div>
      </td>
      <td data-label="What">
        <div className="strong">
          {eventSentence(e.method, e.outcome, resourceName, nameOf.incident(e.resource))}
        </div>
        <div className="muted small">
          <code>{method}</code>
          {e.changedFields.length ? <> · changed {changedInWords(e.changedFields)}</> : null}
        </div>
        {e.replay ? <Badge tone="muted">retry</Badge> : null}
      </td>
      {props.showResource !== false ? (
        <td className="small" data-label="Resource">
          {e.resource ? (
            href ? (
              <Link href={href} title={e.resource}>
                {resourceName ?? <span className="mono">{e.resource}</span>}
              </Link>
            ) : (
              <span title={e.resource}>{resourceName ?? <span className="mono">{e.resource}</span>}</span>
            )
          ) : (
            "—"
          )}
        </td>
      ) : null}
      <td data-label="Outcome">
        <Badge tone={e.outcome === "ok" ? "ok" : "bad"}>{e.outcome}</Badge>
      </td>
      <td className="small" data-label="From">
        <div className="mono">{e.clientAddress}</div>
        <div className="muted">{e.userAgent}</div>
      </td>
    </tr>
  );
}

const RECENT = 10;

/**
 * One resource's latest events, newest first, with a link to the Activity page filtered on it. Shown to
 * those who may read the audit log (project owners; audit.read is an owner's in the console): for
 * anyone else it draws nothing and asks nothing. `changed` is anything that moves when the resource
 * does (its version, its state): the list is asked again then, so a save shows its own event.
 */
export function RecentActivity(props: { resource: string; changed?: unknown; title?: string }) {
  const project = useProject();
  const allowed = project.role === "owner";
  const q = useQuery({
    queryKey: ["audit", project.name, "recent", props.resource, String(props.changed ?? "")],
    queryFn: () =>
      api.audit.listAuditEvents({ projectName: project.name, resource: props.resource, pageSize: RECENT }),
    enabled: allowed,
  });
  // A refusal (a role changed since sign-in) is no news to show on someone else's page.
  if (!allowed || (q.error instanceof ConnectError && q.error.code === Code.PermissionDenied)) return null;
  const events = q.data?.events ?? [];
  return (
    <section className="card recent-activity" data-testid="recent-activity" aria-label="Recent activity">
      <header className="alert-section-header">
        <div>
          <h2>{props.title ?? "Recent activity"}</h2>
          <p className="muted small">
            The latest {RECENT} changes and refused attempts, newest first.{" "}
            <Link href={activityHref(props.resource)}>All of its activity</Link>
          </p>
        </div>
      </header>
      <ErrorBanner error={q.error} title="Could not list activity" />
      {q.isPending ? (
        <Loading what="activity" />
      ) : events.length === 0 && !q.error ? (
        <p className="muted">No activity recorded for it yet.</p>
      ) : events.length > 0 ? (
        <div className="access-table-wrap">
          <AuditEventTable events={events} showResource={events.some((e) => e.resource !== props.resource)} />
        </div>
      ) : null}
    </section>
  );
}
