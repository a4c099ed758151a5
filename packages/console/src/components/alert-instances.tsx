import type { AlertInstance } from "@gen/svc/monitoring/v1/alerts_pb.ts";
import { useState } from "react";
import { Link } from "wouter";
import { fmtAgo, fmtTime, lastSegment, MISSING } from "../format.ts";
import { fmtMetricValue, InstanceStateBadge } from "./alert-catalog.tsx";
import { Badge, Button, Empty } from "./ui.tsx";

const PAGE = 50;
const ORDER: Record<string, number> = { FIRING: 0, PENDING: 1, INACTIVE: 2 };

/**
 * Every instance the rule watches, paged: the stored ones (GetAlertRule includeInstances: state, flags,
 * last value, incident) and, for each watched VM without one, a row that says it is inactive. The
 * evaluator stores no row for an instance that stayed inactive with data, so its last value is not known
 * here: a dash, never a 0. Firing first, then pending, then the rest by name.
 */
export function AlertInstances(props: {
  instances: AlertInstance[];
  /** The VMs the applied version watches (every VM of the project, or the selected ones). */
  watched: string[];
  unit: string;
  perMountpoint: boolean;
  vmLabel: (name: string) => string;
  /** A VM's inventory state: a stopped VM's "no data" is expected, not a warning (issue 43, item 6). */
  vmState?: (name: string) => string | undefined;
}) {
  const [page, setPage] = useState(0);
  const stored = new Set(props.instances.map((i) => i.vmName));
  const rows: (AlertInstance | { vmName: string; unstored: true })[] = [
    ...props.instances,
    ...props.watched.filter((v) => !stored.has(v)).map((vmName) => ({ vmName, unstored: true as const })),
  ].sort((a, b) => {
    const sa = "unstored" in a ? 2 : (ORDER[a.state] ?? 3);
    const sb = "unstored" in b ? 2 : (ORDER[b.state] ?? 3);
    return sa - sb || props.vmLabel(a.vmName).localeCompare(props.vmLabel(b.vmName));
  });
  if (rows.length === 0)
    return <Empty>No instances: this rule watches no VM (or the version is not applied yet).</Empty>;
  const pages = Math.ceil(rows.length / PAGE);
  const shown = rows.slice(page * PAGE, page * PAGE + PAGE);
  return (
    <>
      <table className="table table-cards" data-testid="alert-instances">
        <thead>
          <tr>
            <th>VM</th>
            {props.perMountpoint ? <th>Mountpoint</th> : null}
            <th>State</th>
            <th>Since</th>
            <th>Data</th>
            <th className="num">Last value</th>
            <th>Incident</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((i) => {
            const parts = i.vmName.split("/");
            if ("unstored" in i)
              return (
                <tr key={i.vmName} data-vm={i.vmName}>
                  <td>
                    <Link href={`/vms/${parts[3]}/${parts[5]}`}>{props.vmLabel(i.vmName)}</Link>
                  </td>
                  {props.perMountpoint ? (
                    <td className="muted" data-label="Mountpoint">
                      every mountpoint
                    </td>
                  ) : null}
                  <td data-label="State">
                    <InstanceStateBadge state="INACTIVE" />
                  </td>
                  <td className="muted" data-label="Since">
                    {MISSING}
                  </td>
                  <td className="muted small" data-label="Data">
                    last value not kept while inactive
                  </td>
                  <td className="num muted" data-label="Last value">
                    {MISSING}
                  </td>
                  <td data-label="Incident">
                    <span className="muted">{MISSING}</span>
                  </td>
                </tr>
              );
            return (
              <tr key={`${i.vmName}|${i.mountpoint}`} data-vm={i.vmName}>
                <td>
                  <Link href={`/vms/${parts[3]}/${parts[5]}`}>{props.vmLabel(i.vmName)}</Link>
                </td>
                {props.perMountpoint ? (
                  <td className="mono" data-label="Mountpoint">
                    {i.mountpoint || MISSING}
                  </td>
                ) : null}
                <td data-label="State">
                  <div>
                    <InstanceStateBadge state={i.state} />
                    {i.retireReason ? <div className="muted small">{i.retireReason}</div> : null}
                  </div>
                </td>
                <td title={fmtTime(i.stateSinceUnix)} data-label="Since">
                  {fmtAgo(i.stateSinceUnix)}
                </td>
                <td data-label="Data">
                  <div>
                    {i.flag === "NO_DATA" && props.vmState?.(i.vmName) === "STOPPED" ? (
                      <Badge tone="muted" title="a stopped VM sends nothing: no data is expected">
                        no data: VM stopped
                      </Badge>
                    ) : i.flag === "NO_DATA" ? (
                      <Badge tone="warn" title={i.flagMessage}>
                        no data
                      </Badge>
                    ) : i.flag === "ERROR" ? (
                      <Badge tone="bad" title={i.flagMessage}>
                        error
                      </Badge>
                    ) : (
                      <Badge tone="ok">ok</Badge>
                    )}
                    {i.flagMessage ? <div className="muted small">{i.flagMessage}</div> : null}
                  </div>
                </td>
                <td className="num" data-label="Last value">
                  {fmtMetricValue(props.unit, i.lastValue)}
                </td>
                <td data-label="Incident">
                  {i.incident ? (
                    <Link href={`/incidents/${lastSegment(i.incident)}`}>
                      {lastSegment(i.incident).slice(0, 8)}…
                    </Link>
                  ) : (
                    <span className="muted">{MISSING}</span>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {pages > 1 ? (
        <div className="pager" data-testid="alert-instances-pager">
          <Button onClick={() => setPage(page - 1)} disabled={page === 0}>
            ← Previous
          </Button>
          <span className="muted">
            {page * PAGE + 1}–{Math.min(rows.length, page * PAGE + PAGE)} of {rows.length}
          </span>
          <Button onClick={() => setPage(page + 1)} disabled={page >= pages - 1}>
            Next →
          </Button>
        </div>
      ) : null}
    </>
  );
}
