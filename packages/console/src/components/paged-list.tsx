import type { VMMonitoring } from "@gen/svc/monitoring/v1/monitoring_pb.ts";
import { useQuery } from "@tanstack/react-query";
import type { ReactNode } from "react";
import { api } from "../api.ts";
import { lastSegment } from "../format.ts";
import { Button, Empty, ErrorBanner, Loading, Pager, type usePager } from "./ui.tsx";

/**
 * What the console's paged lists (incidents, silences, activity) share: the table with its error,
 * loading and empty states and the pager under it, the filter selects that go back to the first page,
 * and the project's rules and VMs offered in their filters and forms.
 */
type PagerState = ReturnType<typeof usePager>;

export function PagedTable<T>(props: {
  /** What is listed, plural ("incidents"): "Could not list incidents", "Loading incidents…". */
  what: string;
  query: { isPending: boolean; error: unknown; data?: { nextPageToken?: string } };
  items: readonly T[];
  /** Shown when the page is empty (and the call did not fail). */
  empty: ReactNode;
  pager: PagerState;
  columns: readonly string[];
  row: (item: T) => ReactNode;
  testId: string;
  /** More classes of the table, e.g. "table-cards table-cards-stacked" for cards on a phone. */
  className?: string;
}) {
  const { query, items } = props;
  return (
    <>
      <ErrorBanner error={query.error} title={`Could not list ${props.what}`} />
      {query.isPending ? (
        <Loading what={props.what} />
      ) : items.length === 0 ? (
        query.error ? null : (
          <Empty>{props.empty}</Empty>
        )
      ) : (
        <table className={`table ${props.className ?? ""}`.trim()} data-testid={props.testId}>
          <thead>
            <tr>
              {props.columns.map((c, i) => (
                // biome-ignore lint/suspicious/noArrayIndexKey: a fixed list of headers, an empty one included
                <th key={i}>{c}</th>
              ))}
            </tr>
          </thead>
          <tbody>{items.map(props.row)}</tbody>
        </table>
      )}
      <Pager pager={props.pager} nextToken={query.data?.nextPageToken} />
    </>
  );
}

/** A filter of a paged list: changing it starts again from the first page. */
export function FilterSelect(props: {
  label: string;
  value: string;
  onChange: (value: string) => void;
  pager: PagerState;
  children: ReactNode;
}) {
  return (
    <select
      aria-label={props.label}
      value={props.value}
      onChange={(e) => {
        props.onChange(e.target.value);
        props.pager.reset();
      }}
    >
      {props.children}
    </select>
  );
}

/** Clears a paged list's filters (`onClear`) and starts again from the first page; shown while filtered. */
export function ClearFilters(props: { filtered: boolean; onClear: () => void; pager: PagerState }) {
  if (!props.filtered) return null;
  return (
    <Button
      onClick={() => {
        props.onClear();
        props.pager.reset();
      }}
    >
      Clear
    </Button>
  );
}

/** The project's alert rules (first 100), for filters and pickers; one cached read for every page. */
export function useProjectRules(projectName: string) {
  return useQuery({
    queryKey: ["alert-rules", projectName, "all"],
    queryFn: () => api.alerts.listAlertRules({ projectName, pageSize: 100 }),
    staleTime: 60_000,
  });
}

/** Every VM of the project (inventory only: no metrics read), all pages, for filters and pickers. */
export function useProjectVms(projectName: string) {
  return useQuery({
    queryKey: ["vms", projectName, "inventory", "all"],
    staleTime: 60_000,
    queryFn: async () => {
      const vms: VMMonitoring[] = [];
      let pageToken = "";
      for (let i = 0; i < 50; i++) {
        const r = await api.monitoring.listVMMonitoring({
          projectName,
          pageSize: 50,
          pageToken,
          inventoryOnly: true,
        });
        vms.push(...r.vms);
        if (!r.nextPageToken) break;
        pageToken = r.nextPageToken;
      }
      return vms;
    },
  });
}

/** `<option>`s of the project's rules by display name, after one for "any" (value ""). */
export function RuleOptions(props: { projectName: string; any: string }) {
  const rules = useProjectRules(props.projectName);
  return (
    <>
      <option value="">{props.any}</option>
      {(rules.data?.rules ?? []).map((r) => (
        <option key={r.name} value={r.name}>
          {r.spec?.displayName || r.id}
        </option>
      ))}
    </>
  );
}

/** `<option>`s of the project's VMs by display name, after one for "any" (value ""). */
export function VmOptions(props: { projectName: string; any: string }) {
  const vms = useProjectVms(props.projectName);
  return (
    <>
      <option value="">{props.any}</option>
      {(vms.data ?? []).map((v) => (
        <option key={v.name} value={v.name}>
          {v.displayName || lastSegment(v.name)}
        </option>
      ))}
    </>
  );
}
