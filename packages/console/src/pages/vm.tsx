import type {
  GuestSender,
  QueryVMMonitoringResponse,
  VMMonitoring,
} from "@gen/svc/monitoring/v1/monitoring_pb.ts";
import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { Link, useSearchParams } from "wouter";
import { api } from "../api.ts";
import { coverageOf, coverageText } from "../components/coverage.ts";
import { VmSilenceAction } from "../components/silence-form.tsx";
import { Badge, Button, ErrorBanner, Loading, Page } from "../components/ui.tsx";
import { type CardDef, cardMetricIds, latest, MetricCard, sourceName } from "../components/vm-card.tsx";
import { ExpandedButton, ExpandedDialog, expandedEligible } from "../components/vm-expanded.tsx";
import { customRange, RangePicker, rangeByKey, type VmRange } from "../components/vm-ranges.tsx";
import { fmtAgo, fmtBytes, fmtTime, MISSING, timeZoneName } from "../format.ts";
import { agentSilent } from "../guest-agent.ts";
import { useProject } from "../session.tsx";

/**
 * A VM's monitoring page. Opening it sends reads only: ListVMMonitoring (inventoryOnly, to find the VM's
 * name, state and level) and one QueryVMMonitoring for every chart. Data quality (last observation,
 * stale, per-metric errors) is shown apart from the VM's state: stale telemetry is not an unhealthy VM.
 * The time ranges and their steps are in components/vm-ranges.tsx.
 */

const CARDS: CardDef[] = [
  {
    key: "cpu",
    title: "CPU",
    about: "Average utilization of the observed vCPUs, normalized to capacity.",
    views: [
      {
        key: "pct",
        label: "%",
        unit: "%",
        metrics: [{ id: "cpu_utilization_pct", label: "utilization" }],
        yRange: [0, 100],
      },
    ],
    extra: ["vcpus"],
    summary: (r) => {
      const cpu = latest(r, "cpu_utilization_pct");
      const vcpus = latest(r, "vcpus");
      if (cpu === undefined && vcpus === undefined) return undefined;
      const parts = [cpu === undefined ? MISSING : `${cpu.toFixed(1)} %`];
      if (vcpus !== undefined) parts.push(`${vcpus} vCPU${vcpus === 1 ? "" : "s"}`);
      return parts.join(" · ");
    },
  },
  {
    key: "memory",
    title: "Memory",
    about: "Guest-visible capacity minus free memory, cache included (not the working set).",
    views: [
      {
        key: "bytes",
        label: "Bytes",
        unit: "bytes",
        metrics: [
          { id: "memory_used_bytes", label: "used" },
          { id: "memory_cached_bytes", label: "cache" },
          { id: "memory_total_bytes", label: "total" },
        ],
      },
      {
        key: "pct",
        label: "Used %",
        unit: "%",
        metrics: [{ id: "memory_used_pct", label: "used" }],
        yRange: [0, 100],
      },
    ],
    summary: (r) => {
      const used = latest(r, "memory_used_bytes");
      const total = latest(r, "memory_total_bytes");
      if (used === undefined) return undefined;
      if (!total) return fmtBytes(used);
      return `${fmtBytes(used)} of ${fmtBytes(total)} (${((100 * used) / total).toFixed(0)} %)`;
    },
  },
  {
    key: "disk",
    title: "Disk",
    about: "Observed virtual-device traffic per device; not an invoice-grade measurement.",
    views: [
      {
        key: "bytes",
        label: "Throughput",
        unit: "bytes/s",
        metrics: [
          { id: "disk_read_bytes_per_sec", label: "read" },
          { id: "disk_write_bytes_per_sec", label: "write" },
        ],
      },
      {
        key: "ops",
        label: "Operations",
        unit: "ops/s",
        metrics: [
          { id: "disk_read_ops_per_sec", label: "reads" },
          { id: "disk_write_ops_per_sec", label: "writes" },
        ],
      },
    ],
  },
  {
    key: "network",
    title: "Network",
    about: "Observed virtual-interface traffic per interface; not invoice-grade transfer.",
    views: [
      {
        key: "bytes",
        label: "Throughput",
        unit: "bytes/s",
        metrics: [
          { id: "network_receive_bytes_per_sec", label: "rx" },
          { id: "network_transmit_bytes_per_sec", label: "tx" },
        ],
      },
      {
        key: "packets",
        label: "Packets",
        unit: "packets/s",
        metrics: [
          { id: "network_receive_packets_per_sec", label: "rx" },
          { id: "network_transmit_packets_per_sec", label: "tx" },
        ],
      },
    ],
  },
  {
    key: "filesystem",
    title: "Filesystem",
    about:
      "Per mountpoint, as the guest reports it (svc-agent, or the QEMU guest agent through the hypervisor); a mount is not necessarily one disk.",
    expanded: true,
    summary: (r) => {
      const used = r.series
        .filter((s) => s.metricId === "filesystem_used_pct" && s.points.length > 0)
        .map((s) => `${s.labels.mountpoint ?? "?"} ${s.points[s.points.length - 1].value.toFixed(0)} %`);
      if (used.length === 0) return undefined;
      return used.length > 3 ? `${used.slice(0, 3).join(" · ")} …` : used.join(" · ");
    },
    views: [
      {
        key: "pct",
        label: "Used %",
        unit: "%",
        metrics: [{ id: "filesystem_used_pct", label: "used" }],
        yRange: [0, 100],
      },
      {
        key: "bytes",
        label: "Bytes",
        unit: "bytes",
        metrics: [
          { id: "filesystem_used_bytes", label: "used" },
          { id: "filesystem_size_bytes", label: "size" },
        ],
      },
    ],
  },
];

const METRIC_IDS = [...new Set(CARDS.flatMap(cardMetricIds))];
/**
 * Read every 30 s over the last hour at 30 s whatever the range: the data quality "now", and the cards'
 * headlines (the latest sample), so a headline reads the same at 1 h and at 7 d (issue 43, item 1).
 */
const NOW_METRIC_IDS = [
  "telemetry_last_observed",
  "cpu_utilization_pct",
  "vcpus",
  "memory_used_bytes",
  "memory_total_bytes",
  "filesystem_used_pct",
];

const stateTone: Record<string, "ok" | "warn" | "bad" | "muted"> = {
  RUNNING: "ok",
  STARTING: "warn",
  STOPPING: "warn",
  STOPPED: "muted",
  DELETED: "bad",
};

/** Pages through ListVMMonitoring (inventory only: no metric read) until the VM is found (≤ 10,000 VMs). */
async function findVm(projectName: string, name: string): Promise<VMMonitoring | null> {
  let pageToken = "";
  for (let i = 0; i < 200; i++) {
    const r = await api.monitoring.listVMMonitoring({
      projectName,
      pageSize: 50,
      pageToken,
      inventoryOnly: true,
    });
    const vm = r.vms.find((v) => v.name === name);
    if (vm) return vm;
    // No early stop on "past the name": the server's order (its database's collation) need not be
    // JavaScript's string order, and inventory-only pages are cheap.
    if (!r.nextPageToken) return null;
    pageToken = r.nextPageToken;
  }
  return null;
}

export function VmPage(props: { location: string; vmId: string }) {
  const project = useProject();
  const vmName = `${project.name}/locations/${props.location}/vms/${props.vmId}`;
  const [params, setParams] = useSearchParams();
  // A custom range or a drag-zoom (from, to) wins over the preset, so a shared link shows the same window.
  const range = customRange(params.get("from"), params.get("to")) ?? rangeByKey(params.get("range"));
  // Auto-refresh can be paused (kept in the URL, like the range): the charts then stay as they are.
  const paused = params.get("refresh") === "off";
  const setPaused = (off: boolean) =>
    setParams(
      (p) => {
        const n = new URLSearchParams(p);
        if (off) n.set("refresh", "off");
        else n.delete("refresh");
        return n;
      },
      { replace: true },
    );
  const setRange = (r: VmRange) =>
    setParams(
      (p) => {
        const n = new URLSearchParams(p);
        n.delete("from");
        n.delete("to");
        if (r.key === "1h") n.delete("range");
        else n.set("range", r.key);
        return n;
      },
      { replace: true },
    );
  // A new window is a new history entry: Back returns to the view before the zoom.
  const setWindow = (from: number, to: number) =>
    setParams((p) => {
      const n = new URLSearchParams(p);
      n.delete("range");
      n.set("from", String(Math.floor(from)));
      n.set("to", String(Math.ceil(to)));
      return n;
    });

  const inventory = useQuery({
    queryKey: ["vm-inventory", project.name, vmName],
    queryFn: () => findVm(project.name, vmName),
    refetchInterval: 60_000,
  });
  const monitoring = useQuery({
    queryKey: ["vm-monitoring", vmName, range.key, range.endUnix, range.seconds],
    queryFn: () => {
      const end = range.endUnix ?? Math.floor(Date.now() / 1000);
      return api.monitoring.queryVMMonitoring({
        name: vmName,
        metricIds: METRIC_IDS,
        startTimeUnix: BigInt(end - range.seconds),
        endTimeUnix: BigInt(end),
        stepSeconds: range.stepSeconds,
      });
    },
    refetchInterval: paused ? false : range.refresh,
    refetchOnWindowFocus: !paused,
    // Only for a VM the inventory has: a missing VM is said once, not answered 404 by every query.
    enabled: !!inventory.data,
  });
  // Data quality "now", whatever the chart range: a 7-day answer ends on a 30-minute step, up to
  // 30 minutes ago. The last hour at 30 s of telemetry_last_observed (per source), every 30 s.
  // The rules and incidents drawn on the charts (issue 27, item 7): a failure leaves the charts bare.
  const rules = useQuery({
    queryKey: ["vm-rules", project.name],
    queryFn: async () => (await api.alerts.listAlertRules({ projectName: project.name, pageSize: 50 })).rules,
    enabled: !!inventory.data,
    refetchInterval: 60_000,
  });
  const incidents = useQuery({
    queryKey: ["vm-incidents", vmName],
    queryFn: async () =>
      (await api.incidents.listIncidents({ projectName: project.name, vmName, pageSize: 50 })).incidents,
    // Only for a VM that exists: a missing VM's page makes no call beyond the ones that say so.
    enabled: !!inventory.data,
    refetchInterval: 30_000,
  });
  const freshness = useQuery({
    queryKey: ["vm-freshness", vmName],
    queryFn: () => {
      const end = Math.floor(Date.now() / 1000);
      return api.monitoring.queryVMMonitoring({
        name: vmName,
        metricIds: NOW_METRIC_IDS,
        startTimeUnix: BigInt(end - 3600),
        endTimeUnix: BigInt(end),
        stepSeconds: 30,
      });
    },
    refetchInterval: paused ? false : 30_000,
    refetchOnWindowFocus: !paused,
    enabled: !!inventory.data,
  });

  // Expanded but no guest data yet: since when (issue 43, item 6). The newest successful enabling or token
  // reissue in the audit log; a role without audit.read just goes without the time.
  const tokenIssued = useQuery({
    queryKey: ["vm-expanded-since", vmName],
    enabled: inventory.data?.monitoringLevel === "EXPANDED" && !inventory.data?.guestSender,
    retry: false,
    queryFn: async () => {
      const r = await api.audit.listAuditEvents({
        projectName: project.name,
        method: "svc.monitoring.v1.MonitoringService/EnableExpandedMonitoring",
        resource: vmName,
        pageSize: 20,
      });
      const ok = r.events.find((e) => e.outcome === "ok");
      return ok ? Math.floor(Number(ok.timeUnixMs) / 1000) : 0;
    },
  });

  // The install dialog, opened from the header or the filesystem card (null: closed).
  const [install, setInstall] = useState<{ reissue: boolean } | null>(null);

  const vm = inventory.data ?? undefined;
  const data = monitoring.data;
  const title = vm?.displayName || props.vmId;

  if (inventory.data === null) {
    return (
      <Page title={props.vmId}>
        <p className="empty" data-testid="vm-not-found">
          No VM <code>{vmName}</code> in this project. <Link href="/vms">Back to the VMs</Link>
        </p>
      </Page>
    );
  }

  const eligible = vm ? expandedEligible(vm) : false;
  const expanded = vm?.monitoringLevel === "EXPANDED";

  return (
    <Page
      title={title}
      subtitle={
        <>
          <Link href="/vms">Virtual machines</Link> / <code>{vmName}</code>
        </>
      }
      actions={
        vm && project.canWrite ? (
          <>
            <VmSilenceAction projectName={project.name} vmName={vmName} what={title} />
            {eligible ? (
              <ExpandedButton
                reissue={expanded}
                kind={expanded ? "plain" : "primary"}
                onOpen={() => setInstall({ reissue: expanded })}
              />
            ) : null}
          </>
        ) : null
      }
    >
      {vm && project.canWrite && eligible ? (
        <ExpandedDialog vmName={vmName} displayName={title} open={install} onClose={() => setInstall(null)} />
      ) : null}
      <ErrorBanner error={inventory.error} title="Could not read the VM" />
      <div className="vm-summary">
        <section className="card vm-facts" aria-label="Virtual machine" data-testid="vm-facts">
          <h3>Virtual machine</h3>
          {vm ? (
            <dl className="kv">
              <dt>State</dt>
              <dd>
                <Badge tone={stateTone[vm.state] ?? "muted"}>{vm.state}</Badge>
              </dd>
              <dt>Location</dt>
              <dd>{vm.location}</dd>
              <dt>Monitoring</dt>
              <dd data-testid="monitoring-level">
                {expanded ? "Expanded (hypervisor + guest agent)" : "Baseline (hypervisor)"}
              </dd>
            </dl>
          ) : inventory.isPending ? (
            <Loading what="the VM" />
          ) : null}
        </section>
        <DataQuality
          fresh={freshness.data}
          data={data}
          range={range}
          expanded={expanded}
          sender={vm?.guestSender}
          tokenIssued={tokenIssued.data}
        />
      </div>

      <div className="vm-toolbar">
        <RangePicker value={range} onChange={setRange} onCustom={setWindow} />
        <span className="muted small" data-testid="refresh-status">
          {range.stepSeconds} s steps · times in {timeZoneName()}
          {data ? ` · data up to ${new Date(Number(data.endTimeUnix) * 1000).toLocaleTimeString()}` : ""} ·{" "}
          {paused
            ? "auto-refresh paused"
            : range.refresh
              ? "refreshes every 30 s"
              : "not refreshed automatically"}
        </span>
        <Button className="btn-small" aria-pressed={paused} onClick={() => setPaused(!paused)}>
          {paused ? "Resume auto-refresh" : "Pause auto-refresh"}
        </Button>
        <Button
          className="btn-small"
          title="Read the charts and the data quality again now"
          onClick={() => {
            void monitoring.refetch();
            void freshness.refetch();
          }}
        >
          Refresh
        </Button>
      </div>

      <ErrorBanner error={monitoring.error} title="Could not read this VM's monitoring" />
      {data ? <QualityBanners data={data} fresh={freshness.data} vm={vm} /> : null}

      {data ? (
        <div className="vm-cards">
          {CARDS.map((def) => (
            <MetricCard
              key={def.key}
              def={def}
              data={data}
              vmName={vmName}
              onZoom={setWindow}
              rules={rules.data}
              incidents={incidents.data}
              now={freshness.data}
              expandedExplanation={
                def.expanded ? (
                  <ExpandedExplanation
                    vm={vm}
                    canWrite={project.canWrite}
                    eligible={eligible}
                    onInstall={() => setInstall({ reissue: false })}
                  />
                ) : undefined
              }
              explainWhenEmpty={def.expanded && !expanded}
              emptyExplanation={
                def.expanded && expanded
                  ? `No readings from the guest agent in this range. They start once svc-agent runs in the guest${
                      project.canWrite && eligible
                        ? " (“Issue a new agent token” above gives the install command and a token)."
                        : "."
                    }`
                  : undefined
              }
            />
          ))}
        </div>
      ) : monitoring.isPending ? (
        <Loading what="charts" />
      ) : null}
    </Page>
  );
}

/** The VM's newest observation and staleness: from the freshness query, else the range's answer. */
function nowQuality(fresh?: QueryVMMonitoringResponse, data?: QueryVMMonitoringResponse) {
  const f = fresh?.quality;
  if (f && Number(f.lastObservedUnix)) return { last: f.lastObservedUnix, stale: f.stale };
  const d = data?.quality;
  if (!f && !d) return undefined;
  // Nothing in the last hour: stale, with the newest observation the range knows of (or none).
  return { last: d?.lastObservedUnix ?? 0n, stale: true };
}

/** Telemetry quality: when the newest sample was observed and whether it is stale. Not VM health. */
function DataQuality(props: {
  fresh?: QueryVMMonitoringResponse;
  data?: QueryVMMonitoringResponse;
  range: VmRange;
  expanded: boolean;
  sender?: GuestSender;
  /** When the newest agent token was issued (Unix s), for an expanded VM no sender fed yet. */
  tokenIssued?: number;
}) {
  const q = nowQuality(props.fresh, props.data);
  // The CPU chart's coverage statement, word for word (coverage.ts: defined once).
  const d = props.data;
  const cpu = d
    ? coverageOf(
        (d.quality?.series ?? []).filter((s) => s.metricId === "cpu_utilization_pct"),
        Number(d.startTimeUnix),
        Number(d.endTimeUnix),
        d.stepSeconds,
      )
    : undefined;
  // Per source: the newest telemetry_last_observed point of each source's series.
  const sources = new Map<string, number>();
  for (const s of props.fresh?.series ?? []) {
    if (s.metricId !== "telemetry_last_observed") continue;
    const p = s.points[s.points.length - 1];
    if (p) sources.set(s.source, Math.max(sources.get(s.source) ?? 0, p.value));
  }
  const sourceRows = props.expanded ? ["HYPERVISOR", "GUEST_AGENT"] : ["HYPERVISOR"];
  return (
    <section className="card vm-facts" aria-label="Data quality" data-testid="data-quality">
      <h3>Data quality</h3>
      {q ? (
        <dl className="kv">
          <dt>Telemetry</dt>
          <dd data-testid="freshness">
            {!Number(q.last) ? (
              <Badge tone="muted">no data</Badge>
            ) : q.stale ? (
              <Badge tone="warn" title="no sample for more than three 30 s sampling intervals">
                stale
              </Badge>
            ) : (
              <Badge tone="ok">fresh</Badge>
            )}
          </dd>
          <dt>Last observed</dt>
          <dd data-testid="last-observed">
            {fmtTime(q.last)}
            {Number(q.last) ? <span className="muted"> ({fmtAgo(q.last)})</span> : null}
          </dd>
          <dt>By source</dt>
          <dd>
            {sourceRows.map((src, i) => (
              <span key={src}>
                {i > 0 ? " · " : ""}
                {sourceName(src)} <span className="muted">{fmtAgo(sources.get(src))}</span>
              </span>
            ))}
          </dd>
          {props.expanded || props.sender ? (
            <>
              <dt>Guest agent</dt>
              <dd data-testid="guest-sender">
                {props.sender ? (
                  <>
                    {props.sender.name}
                    {agentSilent(props.sender) ? (
                      <>
                        {" "}
                        <Badge tone="warn">silent</Badge>
                        <span className="muted">
                          {" "}
                          since {fmtTime(props.sender.lastSeenUnix)} ({fmtAgo(props.sender.lastSeenUnix)})
                        </span>
                      </>
                    ) : (
                      <span className="muted">, last seen {fmtAgo(props.sender.lastSeenUnix)}</span>
                    )}
                  </>
                ) : (
                  <>
                    <Badge tone="warn">silent</Badge>
                    <span className="muted">
                      {" "}
                      no guest-agent data yet
                      {props.tokenIssued
                        ? `; the agent token was issued ${fmtTime(props.tokenIssued)} (${fmtAgo(props.tokenIssued)})`
                        : ""}
                    </span>
                  </>
                )}
              </dd>
            </>
          ) : null}
          <dt>
            CPU coverage, {props.range.key === "custom" ? "selected range" : `last ${props.range.label}`}
          </dt>
          <dd data-testid="quality-coverage">{cpu && cpu.expected > 0 ? coverageText(cpu) : MISSING}</dd>
        </dl>
      ) : (
        <Loading what="data quality" />
      )}
      <p className="muted small vm-note">
        About the telemetry only: stale or missing data is not a VM fault.
      </p>
    </section>
  );
}

function QualityBanners(props: {
  data: QueryVMMonitoringResponse;
  fresh?: QueryVMMonitoringResponse;
  vm?: VMMonitoring;
}) {
  const failed = (props.data.quality?.errors ?? []).filter(
    (e) => e.reason !== "EXPANDED_MONITORING_REQUIRED",
  );
  const q = nowQuality(props.fresh, props.data);
  if (!q) return null;
  const state = props.vm?.state;
  const stopped = state === "STOPPED" || state === "STOPPING";
  return (
    <>
      {q.stale ? (
        <div
          className={`banner ${stopped ? "banner-info" : "banner-warn"}`}
          role="status"
          data-testid="stale-banner"
        >
          <strong>{Number(q.last) ? "Stale telemetry:" : "No telemetry:"}</strong>{" "}
          {Number(q.last)
            ? `no sample since ${fmtTime(q.last)} (${fmtAgo(q.last)}).`
            : "no sample in this range."}{" "}
          {stopped
            ? `The VM is ${state?.toLowerCase()}, so no new samples are expected.`
            : state
              ? `This is about the data, not the VM: its state is ${state}. The charts show what was received.`
              : "The charts show what was received."}
        </div>
      ) : null}
      {failed.length > 0 ? (
        <div className="banner banner-warn" role="status" data-testid="partial-banner">
          <strong>Partial answer:</strong> {failed.length} metric{failed.length === 1 ? "" : "s"} could not be
          read ({[...new Set(failed.map((e) => e.reason || e.code))].join(", ")}); the affected cards say
          which. Everything else is shown.
        </div>
      ) : null}
    </>
  );
}

function ExpandedExplanation(props: {
  vm?: VMMonitoring;
  canWrite: boolean;
  eligible: boolean;
  onInstall: () => void;
}) {
  const { vm } = props;
  return (
    <div>
      <p>
        <strong>Needs expanded monitoring.</strong> Filesystem usage is reported by the guest agent, which
        runs only with expanded monitoring, or by the QEMU guest agent where the provider's hypervisor
        collector reads it; neither reported for this VM in this range. This VM uses baseline monitoring (the
        hypervisor), which cannot see inside filesystems by itself — so there is no reading here, which is not
        the same as 0 % full.
      </p>
      {!vm ? null : props.eligible && props.canWrite ? (
        <div className="row">
          <ExpandedButton reissue={false} kind="plain" onOpen={props.onInstall} />
          <span className="muted small">
            Nothing is installed or restarted until you run the command yourself.
          </span>
        </div>
      ) : props.eligible ? (
        <p className="muted small">A project owner or editor can install it from this page.</p>
      ) : (
        <p className="muted small">
          Expanded monitoring is available in dc-1 for Debian 12 and Ubuntu 24.04; this VM is in {vm.location}
          .
        </p>
      )}
    </div>
  );
}
