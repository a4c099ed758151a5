import type { AuditEvent } from "@gen/svc/monitoring/v1/audit_pb.ts";
import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { Link } from "wouter";
import { api } from "../api.ts";
import { PagedTable } from "../components/paged-list.tsx";
import { Badge, Button, Page, Time, usePager } from "../components/ui.tsx";
import { lastSegment } from "../format.ts";
import { useProject } from "../session.tsx";

/** Where a resource's own page is in the console, when it has one. */
function resourceHref(name: string): string | undefined {
  const m =
    /^projects\/[^/]+\/(alertRules|incidents|destinations|keys|serviceAccounts|ciTrusts)\/([^/]+)/.exec(name);
  if (!m) return undefined;
  const pages: Record<string, string> = {
    alertRules: `/alerts/${m[2]}`,
    incidents: `/incidents/${m[2]}`,
    destinations: `/destinations/${m[2]}`,
    keys: "/keys",
    serviceAccounts: name.includes("/keys/") ? "/keys" : "/service-accounts",
    ciTrusts: "/ci-trusts",
  };
  return pages[m[1]];
}

/** The project's audit log (issue 29): who did what, from where and when, newest first. */
export function ActivityPage() {
  const project = useProject();
  const pager = usePager();
  const [actor, setActor] = useState("");
  const [method, setMethod] = useState("");
  const [resource, setResource] = useState("");
  const q = useQuery({
    queryKey: ["audit", project.name, actor, method, resource, pager.token],
    queryFn: () =>
      api.audit.listAuditEvents({
        projectName: project.name,
        actor: actor.trim(),
        method: method.trim(),
        resource: resource.trim(),
        pageSize: 50,
        pageToken: pager.token,
      }),
  });
  const events = q.data?.events ?? [];
  const filtered = !!(actor || method || resource);
  const set = (f: (v: string) => void) => (e: { target: { value: string } }) => {
    f(e.target.value);
    pager.reset();
  };
  return (
    <Page
      title="Activity"
      subtitle="Every change in this project, refused attempts included: who, what, from where and when. Kept 400 days."
    >
      <div className="filters filter-bar">
        <input aria-label="Actor" placeholder="actor (users/…)" value={actor} onChange={set(setActor)} />
        <input
          aria-label="Method"
          placeholder="method (RotateKey)"
          value={method}
          onChange={set(setMethod)}
        />
        <input
          aria-label="Resource"
          placeholder="resource (projects/…)"
          value={resource}
          onChange={set(setResource)}
        />
        {filtered ? (
          <Button
            onClick={() => {
              setActor("");
              setMethod("");
              setResource("");
              pager.reset();
            }}
          >
            Clear
          </Button>
        ) : null}
      </div>
      <PagedTable
        what="activity"
        query={q}
        items={events}
        pager={pager}
        empty={filtered ? "No event matches these filters." : "No activity recorded yet."}
        testId="activity-table"
        className="table-cards table-cards-stacked"
        columns={["When", "Who", "What", "Resource", "Outcome", "From"]}
        row={(e) => <ActivityRow key={e.name} event={e} />}
      />
    </Page>
  );
}

function ActivityRow(props: { event: AuditEvent }) {
  const e = props.event;
  const href = resourceHref(e.resource);
  const detail = Object.entries(e.actorDetail).filter(([k]) => k !== "session");
  return (
    <tr data-event={lastSegment(e.name)}>
      <td>
        <Time unix={Number(e.timeUnixMs) / 1000} />
      </td>
      <td data-label="Who">
        <div>{e.actor}</div>
        <div className="muted small">
          {e.actorKind}
          {detail.map(([k, v]) => (
            <div key={k} className="mono">
              {k}: {v}
            </div>
          ))}
        </div>
      </td>
      <td data-label="What">
        <div className="strong">{lastSegment(e.method)}</div>
        {e.changedFields.length ? (
          <div className="muted small">changed {e.changedFields.join(", ")}</div>
        ) : null}
        {e.replay ? <Badge tone="muted">retry</Badge> : null}
      </td>
      <td className="mono small" data-label="Resource">
        {href ? <Link href={href}>{e.resource}</Link> : e.resource || "—"}
      </td>
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
