import type { VMMonitoring } from "@gen/svc/monitoring/v1/monitoring_pb.ts";
import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { Link, useSearchParams } from "wouter";
import { api } from "../api.ts";
import { Badge, Empty, ErrorBanner, Loading, Page, Pager, usePager } from "../components/ui.tsx";
import { fmtAgo, fmtBytes, fmtDuration, fmtNumber, fmtTime, lastSegment, MISSING } from "../format.ts";
import { agentSilent } from "../guest-agent.ts";
import { incidentsOfVm, type OpenIncidents, useOpenIncidents } from "../open-incidents.ts";
import { exactRegex, queryRange } from "../prom-api.ts";
import { useProject } from "../session.tsx";

const stateTone: Record<string, "ok" | "warn" | "bad" | "muted"> = {
  RUNNING: "ok",
  STARTING: "warn",
  STOPPING: "warn",
  STOPPED: "muted",
  DELETED: "bad",
};

type Vm = VMMonitoring;

/** The sortable columns: each reads a value; undefined (no reading) sorts last in either direction. */
const COLUMNS: {
  key: string;
  label: string;
  num?: boolean;
  value: (v: Vm, open?: OpenIncidents) => string | number | undefined;
}[] = [
  { key: "name", label: "Name", value: (v) => (v.displayName || lastSegment(v.name)).toLowerCase() },
  { key: "state", label: "State", value: (v) => v.state },
  {
    key: "incidents",
    label: "Incidents",
    num: true,
    // Unattended first: a firing incident outweighs any number of acknowledged ones.
    value: (v, open) => {
      const n = incidentsOfVm(open, v.name);
      return n ? n.firing * 10_000 + n.acknowledged : undefined;
    },
  },
  { key: "location", label: "Location", value: (v) => v.location },
  { key: "monitoring", label: "Monitoring", value: (v) => v.monitoringLevel },
  { key: "cpu", label: "CPU", num: true, value: (v) => v.cpuUtilizationPct },
  { key: "memory", label: "Memory", num: true, value: (v) => v.memoryUsedBytes },
  {
    key: "data",
    label: "Data",
    value: (v) => (v.quality?.lastObservedUnix ? Number(v.quality.lastObservedUnix) : undefined),
  },
];

function sortVms(vms: Vm[], key: string, desc: boolean, open?: OpenIncidents): Vm[] {
  const col = COLUMNS.find((c) => c.key === key) ?? COLUMNS[0];
  return vms
    .map((v, i) => ({ v, i, x: col.value(v, open) }))
    .sort((a, b) => {
      if (a.x === undefined || b.x === undefined) return a.x === b.x ? a.i - b.i : a.x === undefined ? 1 : -1;
      const c = a.x < b.x ? -1 : a.x > b.x ? 1 : 0;
      return (desc ? -c : c) || a.i - b.i;
    })
    .map((e) => e.v);
}

/** The project's VMs with their latest CPU and memory and the data quality, paged as the RPC pages. */
export function VmsPage() {
  const project = useProject();
  const pager = usePager();
  const [filter, setFilter] = useState("");
  // The sort is in the URL (?sort=cpu&dir=desc): a reload or a shared link shows the same order.
  const [params, setParams] = useSearchParams();
  const sortKey = COLUMNS.some((c) => c.key === params.get("sort")) ? (params.get("sort") as string) : "name";
  const desc = params.get("dir") === "desc";
  const sortBy = (key: string) =>
    setParams(
      (p) => {
        const n = new URLSearchParams(p);
        const nextDesc = key === sortKey ? !desc : COLUMNS.find((c) => c.key === key)?.num === true;
        n.set("sort", key);
        n.set("dir", nextDesc ? "desc" : "asc");
        return n;
      },
      { replace: true },
    );
  const q = useQuery({
    queryKey: ["vms", project.name, pager.token],
    queryFn: () =>
      api.monitoring.listVMMonitoring({ projectName: project.name, pageSize: 50, pageToken: pager.token }),
    refetchInterval: 30_000,
  });
  const open = useOpenIncidents(project.name);
  const history = useCpuHistory(
    project.name,
    (q.data?.vms ?? []).map((v) => v.name),
  );
  const vms = sortVms(
    (q.data?.vms ?? []).filter((v) => {
      const f = filter.trim().toLowerCase();
      return !f || v.displayName.toLowerCase().includes(f) || v.name.toLowerCase().includes(f);
    }),
    sortKey,
    desc,
    open.data,
  );
  const paged = pager.page > 1 || !!q.data?.nextPageToken;
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
        <table className="table table-cards" data-testid="vm-table">
          {paged ? <caption className="muted small">Sorted within this page of the list.</caption> : null}
          <thead>
            <tr>
              {COLUMNS.map((c) => (
                <th
                  key={c.key}
                  className={c.num ? "num" : undefined}
                  aria-sort={c.key === sortKey ? (desc ? "descending" : "ascending") : undefined}
                >
                  <button type="button" className="sort-button" onClick={() => sortBy(c.key)}>
                    {c.label}
                    <span aria-hidden="true">{c.key === sortKey ? (desc ? " ▼" : " ▲") : ""}</span>
                  </button>
                </th>
              ))}
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
                    {/* The id only when the display name differs from it: never the same name twice. */}
                    {v.displayName && v.displayName !== lastSegment(v.name) ? (
                      <div className="muted small">{lastSegment(v.name)}</div>
                    ) : null}
                  </td>
                  <td data-label="State">
                    <Badge tone={stateTone[v.state] ?? "muted"}>{v.state}</Badge>
                  </td>
                  <td className="num" data-label="Incidents">
                    <VmIncidents counts={incidentsOfVm(open.data, v.name)} vmId={parts[5]} />
                  </td>
                  <td data-label="Location">{v.location}</td>
                  <td data-label="Monitoring">
                    {v.monitoringLevel === "EXPANDED" ? "Expanded" : "Baseline"}
                    {v.monitoringLevel === "EXPANDED" ? <AgentSilence sender={v.guestSender} /> : null}
                  </td>
                  <td className="num" data-label="CPU">
                    <span className="cpu-cell">
                      <CpuSparkline values={history.data?.get(v.name)} />
                      {fmtNumber(v.cpuUtilizationPct, " %")}
                    </span>
                  </td>
                  <td className="num" data-label="Memory">
                    {v.memoryUsedBytes === undefined ? (
                      MISSING
                    ) : (
                      <span>
                        {fmtBytes(v.memoryUsedBytes)}
                        {memPct !== undefined ? (
                          <span className="muted"> ({memPct.toFixed(0)} %)</span>
                        ) : null}
                      </span>
                    )}
                  </td>
                  <td data-label="Data">
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

const SPARK_W = 72;
const SPARK_H = 18;
const SPARK_STEP = 120;
const SPARK_POINTS = 3600 / SPARK_STEP + 1;

/** Each VM's last hour of CPU on a fixed step grid, null where a step has no sample (never 0). */
type CpuHistory = Map<string, (number | null)[]>;

/**
 * The sparklines of a whole page in one read: a single range query over the page's VMs through the
 * Prometheus API (the console's session may read it), instead of one QueryVMMonitoring per row. Each
 * step is the average of its own window, as QueryVMMonitoring computes it, so a step without samples
 * stays empty instead of carrying an older value forward.
 */
function useCpuHistory(projectName: string, vmNames: string[]) {
  return useQuery({
    queryKey: ["vm-cpu-spark", projectName, vmNames],
    enabled: vmNames.length > 0,
    queryFn: async (): Promise<CpuHistory> => {
      const endS = Math.floor(Date.now() / 1000 / SPARK_STEP) * SPARK_STEP;
      const startS = endS - 3600;
      const series = await queryRange(
        projectName,
        `avg by (vm) (avg_over_time(svc_vm_cpu_utilization_pct{vm=~${exactRegex(vmNames)}}[${SPARK_STEP}s]))`,
        { startS, endS, stepS: SPARK_STEP },
      );
      const out: CpuHistory = new Map();
      for (const s of series) {
        const values: (number | null)[] = new Array(SPARK_POINTS).fill(null);
        for (const [t, v] of s.values) {
          const i = Math.round((t - startS) / SPARK_STEP);
          const x = Number(v);
          if (i >= 0 && i < SPARK_POINTS && Number.isFinite(x)) values[i] = x;
        }
        out.set(s.metric.vm ?? "", values);
      }
      return out;
    },
    staleTime: 55_000,
    refetchInterval: 60_000,
  });
}

/**
 * The last hour's CPU of one VM as a compact line (issue 27, item 8), 0–100 %: a missing step breaks the
 * line (never drawn as 0); the label gives min, max and latest for screen readers.
 */
function CpuSparkline(props: { values?: (number | null)[] }) {
  const values = props.values;
  const present = (values ?? []).filter((v): v is number => v !== null);
  if (!values || present.length === 0) return <span className="sparkline-empty" aria-hidden="true" />;
  const x = (i: number) => (values.length === 1 ? SPARK_W : (i / (values.length - 1)) * SPARK_W);
  const y = (v: number) => SPARK_H - 1 - (Math.min(Math.max(v, 0), 100) / 100) * (SPARK_H - 2);
  // One subpath per run of present values; a lone value is a dot.
  let d = "";
  values.forEach((v, i) => {
    if (v === null) return;
    const joined = i > 0 && values[i - 1] !== null;
    d += `${joined ? "L" : "M"}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
    const alone = !joined && (i === values.length - 1 || values[i + 1] === null);
    if (alone) d += "h0.1";
  });
  const label = `CPU over the last hour: min ${fmtNumber(Math.min(...present), " %")}, max ${fmtNumber(
    Math.max(...present),
    " %",
  )}, latest ${fmtNumber(present[present.length - 1], " %")}`;
  return (
    <svg
      className="sparkline"
      width={SPARK_W}
      height={SPARK_H}
      viewBox={`0 0 ${SPARK_W} ${SPARK_H}`}
      role="img"
      aria-label={label}
      data-testid="cpu-sparkline"
    >
      <title>{label}</title>
      <path d={d} fill="none" stroke="#2f6fed" strokeWidth="1.5" strokeLinecap="round" />
    </svg>
  );
}

/**
 * A VM's open incidents: unacknowledged and acknowledged (open-incidents.ts), linking to the incident
 * list. "Unacknowledged" is what the navigation's badge counts, over every VM.
 */
function VmIncidents(props: {
  counts?: { firing: number; acknowledged: number; silenced: number };
  vmId: string;
}) {
  const c = props.counts;
  if (!c) return <span className="muted">{MISSING}</span>;
  if (c.firing === 0 && c.acknowledged === 0) return <span className="muted">none</span>;
  return (
    <Link href="/incidents" className="vm-incidents" data-testid="vm-incidents">
      {c.firing > 0 ? <Badge tone="bad">{c.firing} unacknowledged</Badge> : null}
      {c.firing > 0 && c.acknowledged > 0 ? " " : null}
      {c.acknowledged > 0 ? <Badge tone="warn">{c.acknowledged} acknowledged</Badge> : null}
      {c.silenced > 0 ? (
        <>
          {" "}
          <Badge tone="muted" title="a silence mutes their notifications now">
            {c.silenced} silenced
          </Badge>
        </>
      ) : null}
    </Link>
  );
}

/** An expanded VM whose guest agent is silent says so, and for how long (issue 43, item 6). */
function AgentSilence(props: { sender?: VMMonitoring["guestSender"] }) {
  const s = props.sender;
  if (!agentSilent(s)) return null;
  return (
    <div
      className="muted small"
      data-testid="agent-silent"
      title={s ? `last heard ${fmtTime(s.lastSeenUnix)}` : undefined}
    >
      {s
        ? `guest agent silent for ${fmtDuration(Math.max(0, Math.round(Date.now() / 1000 - Number(s.lastSeenUnix))))}`
        : "guest agent silent: no data yet"}
    </div>
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
      ) : !q.lastObservedUnix ? (
        <Badge tone="muted" title="no sample of this VM in the last hour">
          no data
        </Badge>
      ) : q.stale ? (
        <Badge tone="warn" title="no sample for more than three sampling intervals">
          stale
        </Badge>
      ) : (
        <Badge tone="ok">fresh</Badge>
      )}{" "}
      {q.lastObservedUnix ? (
        <span className="muted small">last seen {fmtAgo(q.lastObservedUnix)}</span>
      ) : null}
    </span>
  );
}
