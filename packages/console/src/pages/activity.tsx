import { useQuery } from "@tanstack/react-query";
import { useSearchParams } from "wouter";
import { api } from "../api.ts";
import { AuditEventRow } from "../components/audit-events.tsx";
import { ClearFilters, PagedTable } from "../components/paged-list.tsx";
import { Page, usePager } from "../components/ui.tsx";
import { useProject } from "../session.tsx";

/** The project's audit log (issue 29): who did what, from where and when, newest first. */
export function ActivityPage() {
  const project = useProject();
  const pager = usePager();
  // The filters are in the URL (?resource=…): a resource's page links here filtered on it.
  const [params, setParams] = useSearchParams();
  const actor = params.get("actor") ?? "";
  const method = params.get("method") ?? "";
  const resource = params.get("resource") ?? "";
  const setFilter = (key: string) => (value: string) =>
    setParams(
      (p) => {
        const n = new URLSearchParams(p);
        if (value) n.set(key, value);
        else n.delete(key);
        return n;
      },
      { replace: true },
    );
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
        <input
          aria-label="Actor"
          placeholder="actor (users/…, CI_TOKEN)"
          value={actor}
          onChange={set(setFilter("actor"))}
        />
        <input
          aria-label="Method"
          placeholder="method (RotateKey)"
          value={method}
          onChange={set(setFilter("method"))}
        />
        <input
          aria-label="Resource"
          placeholder="resource (projects/…)"
          value={resource}
          onChange={set(setFilter("resource"))}
        />
        <ClearFilters filtered={filtered} onClear={() => setParams({}, { replace: true })} pager={pager} />
      </div>
      <PagedTable
        what="activity"
        query={q}
        items={events}
        pager={pager}
        empty={
          filtered
            ? "No event matches these filters."
            : "No activity recorded yet. The log starts with the project: every change made through the API, the CLI or this console (and the demo's own set-up) is listed here from then on."
        }
        testId="activity-table"
        className="table-cards table-cards-stacked"
        columns={["When", "Who", "What", "Resource", "Outcome", "From"]}
        row={(e) => <AuditEventRow key={e.name} event={e} />}
      />
    </Page>
  );
}
