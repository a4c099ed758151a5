import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { Link } from "wouter";
import { api } from "../api.ts";
import { Badge, Empty, ErrorBanner, Loading, Page, Pager, usePager } from "../components/ui.tsx";
import { fmtAgo, fmtBytes, fmtNumber, lastSegment, MISSING } from "../format.ts";
import { useProject } from "../session.tsx";

const stateTone: Record<string, "ok" | "warn" | "bad" | "muted"> = {
  RUNNING: "ok",
  STARTING: "warn",
  STOPPING: "warn",
  STOPPED: "muted",
  DELETED: "bad",
};

/** The project's VMs with their latest CPU and memory and the data quality, paged as the RPC pages. */
export function VmsPage() {
  const project = useProject();
  const pager = usePager();
  const [filter, setFilter] = useState("");
  const q = useQuery({
    queryKey: ["vms", project.name, pager.token],
    queryFn: () =>
      api.monitoring.listVMMonitoring({ projectName: project.name, pageSize: 50, pageToken: pager.token }),
    refetchInterval: 30_000,
  });
  const vms = (q.data?.vms ?? []).filter((v) => {
    const f = filter.trim().toLowerCase();
    return !f || v.displayName.toLowerCase().includes(f) || v.name.toLowerCase().includes(f);
  });
  return (
    <Page
      title="Virtual machines"
      subtitle="Latest values from the last few minutes; a VM without recent samples shows a dash, never zero."
      actions={
        <input
          className="filter"
          type="search"
          placeholder="Filter by name"
          aria-label="Filter by name"
          value={filter}
          onChange={(e) => setFilter(e.target.value)}
        />
      }
    >
      <ErrorBanner error={q.error} title="Could not list VMs" />
      {q.isPending ? (
        <Loading what="VMs" />
      ) : vms.length === 0 ? (
        <Empty>{filter ? `No VM on this page matches "${filter}".` : "This project has no VMs yet."}</Empty>
      ) : (
        <table className="table" data-testid="vm-table">
          <thead>
            <tr>
              <th>Name</th>
              <th>State</th>
              <th>Location</th>
              <th>Monitoring</th>
              <th className="num">CPU</th>
              <th className="num">Memory</th>
              <th>Data</th>
            </tr>
          </thead>
          <tbody>
            {vms.map((v) => {
              const parts = v.name.split("/");
              const href = `/vms/${parts[3]}/${parts[5]}`;
              const memPct =
                v.memoryUsedBytes !== undefined && v.memoryTotalBytes
                  ? (100 * v.memoryUsedBytes) / v.memoryTotalBytes
                  : undefined;
              return (
                <tr key={v.name}>
                  <td>
                    <Link href={href}>{v.displayName || lastSegment(v.name)}</Link>
                    <div className="muted small">{lastSegment(v.name)}</div>
                  </td>
                  <td>
                    <Badge tone={stateTone[v.state] ?? "muted"}>{v.state}</Badge>
                  </td>
                  <td>{v.location}</td>
                  <td>{v.monitoringLevel === "EXPANDED" ? "Expanded" : "Baseline"}</td>
                  <td className="num">{fmtNumber(v.cpuUtilizationPct, " %")}</td>
                  <td className="num">
                    {v.memoryUsedBytes === undefined ? (
                      MISSING
                    ) : (
                      <>
                        {fmtBytes(v.memoryUsedBytes)}
                        {memPct !== undefined ? (
                          <span className="muted"> ({memPct.toFixed(0)} %)</span>
                        ) : null}
                      </>
                    )}
                  </td>
                  <td>
                    <QualityCell quality={v.quality} />
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      <Pager pager={pager} nextToken={q.data?.nextPageToken} />
    </Page>
  );
}

/** Data quality is about the telemetry, not the VM: stale and error are shown apart from the state. */
export function QualityCell(props: {
  quality?: { lastObservedUnix: bigint; stale: boolean; error: boolean };
}) {
  const q = props.quality;
  if (!q) return <span className="muted">{MISSING}</span>;
  return (
    <span className="quality">
      {q.error ? (
        <Badge tone="bad" title="metrics could not be read for this VM">
          read error
        </Badge>
      ) : q.stale ? (
        <Badge tone="warn" title="no sample for more than three sampling intervals">
          stale
        </Badge>
      ) : q.lastObservedUnix ? (
        <Badge tone="ok">fresh</Badge>
      ) : (
        <Badge tone="muted">no data</Badge>
      )}{" "}
      <span className="muted small">last seen {fmtAgo(q.lastObservedUnix)}</span>
    </span>
  );
}
