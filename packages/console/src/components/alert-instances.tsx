import type { AlertInstance } from "@gen/svc/monitoring/v1/alerts_pb.ts";
import { Link } from "wouter";
import { fmtAgo, fmtTime, lastSegment, MISSING } from "../format.ts";
import { fmtMetricValue, InstanceStateBadge } from "./alert-catalog.tsx";
import { Badge, Empty } from "./ui.tsx";

/** The rule's stored instances (GetAlertRule includeInstances): state, flags, last value, incident. */
export function AlertInstances(props: {
  instances: AlertInstance[];
  unit: string;
  perMountpoint: boolean;
  vmLabel: (name: string) => string;
}) {
  if (props.instances.length === 0)
    return (
      <Empty>
        No stored instances: every VM this rule watches has stayed inactive with data (or the version is not
        applied yet).
      </Empty>
    );
  return (
    <table className="table" data-testid="alert-instances">
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
        {props.instances.map((i) => {
          const parts = i.vmName.split("/");
          return (
            <tr key={`${i.vmName}|${i.mountpoint}`}>
              <td>
                <Link href={`/vms/${parts[3]}/${parts[5]}`}>{props.vmLabel(i.vmName)}</Link>
              </td>
              {props.perMountpoint ? <td className="mono">{i.mountpoint || MISSING}</td> : null}
              <td>
                <InstanceStateBadge state={i.state} />
                {i.retireReason ? <div className="muted small">{i.retireReason}</div> : null}
              </td>
              <td title={fmtTime(i.stateSinceUnix)}>{fmtAgo(i.stateSinceUnix)}</td>
              <td>
                {i.flag === "NO_DATA" ? (
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
              </td>
              <td className="num">{fmtMetricValue(props.unit, i.lastValue)}</td>
              <td>
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
  );
}
