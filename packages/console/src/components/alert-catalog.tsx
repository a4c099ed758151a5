import type { AlertRuleSpec } from "@gen/svc/monitoring/v1/alerts_pb.ts";
import { fmtBytes, MISSING } from "../format.ts";
import { Badge } from "./ui.tsx";

/**
 * What an alert rule can watch, as the server's rule catalog (packages/server/src/alerts/catalog.ts)
 * defines it: the metricId, its unit, whether instances are per mountpoint, and whether
 * QueryVMMonitoring serves the same metricId (so the preview can draw its history).
 */
export interface RuleMetricInfo {
  id: string;
  /** Short name used in the condition sentence ("CPU > 90 % for 5 min"). */
  short: string;
  label: string;
  unit: "%" | "bytes" | "bytes/s" | "bool" | "s";
  perMountpoint: boolean;
  /** QueryVMMonitoring has a metric of the same id. */
  charted: boolean;
  /** A rule may compare the value predicted ahead (forecastHorizonSeconds) instead of the newest one. */
  forecast?: boolean;
  description: string;
}

/** The metric picker's text: the label with its unit, once ("Guest memory used (bytes)", "CPU utilization (%)"). */
export function metricOptionLabel(m: RuleMetricInfo): string {
  return m.label.endsWith(`(${m.unit})`) ? m.label : `${m.label} (${m.unit})`;
}

/** The server's bounds of a forecast (packages/server/src/alerts/spec.ts), seconds. */
export const FORECAST_HORIZON = { min: 60, max: 7 * 86_400 } as const;
export const FORECAST_LOOKBACK = { min: 300, max: 86_400 } as const;

export const RULE_METRICS: readonly RuleMetricInfo[] = [
  {
    id: "cpu_utilization_pct",
    short: "CPU",
    label: "CPU utilization",
    unit: "%",
    perMountpoint: false,
    charted: true,
    description: "% of the VM's vCPUs (hypervisor).",
  },
  {
    id: "memory_used_pct",
    short: "Memory",
    label: "Guest memory used",
    unit: "%",
    perMountpoint: false,
    charted: true,
    forecast: true,
    description: "Used ÷ capacity × 100, page cache included.",
  },
  {
    id: "memory_used_bytes",
    short: "Memory used",
    label: "Guest memory used (bytes)",
    unit: "bytes",
    perMountpoint: false,
    charted: true,
    forecast: true,
    description: "Guest memory used, page cache included.",
  },
  {
    id: "filesystem_used_pct",
    short: "Filesystem",
    label: "Filesystem used",
    unit: "%",
    perMountpoint: true,
    charted: true,
    forecast: true,
    description:
      "Per mountpoint; supported filesystems only, needs expanded monitoring or the QEMU guest agent read by the hypervisor collector.",
  },
  {
    id: "filesystem_used_bytes",
    short: "Filesystem used",
    label: "Filesystem used (bytes)",
    unit: "bytes",
    perMountpoint: true,
    charted: true,
    forecast: true,
    description:
      "Per mountpoint; supported filesystems only, needs expanded monitoring or the QEMU guest agent read by the hypervisor collector.",
  },
  {
    id: "disk_read_bytes_per_sec",
    short: "Disk read",
    label: "Disk read rate",
    unit: "bytes/s",
    perMountpoint: false,
    charted: true,
    description: "Summed over the VM's disks.",
  },
  {
    id: "disk_write_bytes_per_sec",
    short: "Disk write",
    label: "Disk write rate",
    unit: "bytes/s",
    perMountpoint: false,
    charted: true,
    description: "Summed over the VM's disks.",
  },
  {
    id: "network_receive_bytes_per_sec",
    short: "Network in",
    label: "Network receive rate",
    unit: "bytes/s",
    perMountpoint: false,
    charted: true,
    description: "Summed over the VM's interfaces.",
  },
  {
    id: "network_transmit_bytes_per_sec",
    short: "Network out",
    label: "Network transmit rate",
    unit: "bytes/s",
    perMountpoint: false,
    charted: true,
    description: "Summed over the VM's interfaces.",
  },
  {
    id: "vm_unexpected_stop",
    short: "Unexpected stop",
    label: "VM stopped unexpectedly",
    unit: "bool",
    perMountpoint: false,
    charted: false,
    description: "1 while stopped without a user request outside maintenance. Only > 0 is allowed.",
  },
  {
    id: "telemetry_age_seconds",
    short: "Telemetry age",
    label: "Telemetry age",
    unit: "s",
    perMountpoint: false,
    charted: false,
    description: "Seconds since the newest sample of a running VM. Needs > (or ≥) and a threshold > 0.",
  },
];

export const metricInfo = (id: string): RuleMetricInfo | undefined => RULE_METRICS.find((m) => m.id === id);

export const OPERATORS: { id: string; symbol: string; label: string }[] = [
  { id: "GREATER_THAN", symbol: ">", label: "> greater than" },
  { id: "GREATER_THAN_OR_EQUAL", symbol: "≥", label: "≥ greater than or equal" },
  { id: "LESS_THAN", symbol: "<", label: "< less than" },
  { id: "LESS_THAN_OR_EQUAL", symbol: "≤", label: "≤ less than or equal" },
];
export const SEVERITIES = ["INFO", "WARNING", "CRITICAL"] as const;

export const opSymbol = (op: string): string => OPERATORS.find((o) => o.id === op)?.symbol ?? op;

/** 300 → "5 min", 90 → "90 s", 5400 → "1 h 30 min", 86400 → "1 d". */
export function fmtSeconds(s: number): string {
  if (!Number.isFinite(s)) return MISSING;
  if (s < 120 && s % 60 !== 0) return `${s} s`;
  if (s < 3600) return s % 60 === 0 ? `${s / 60} min` : `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86400) {
    const h = Math.floor(s / 3600);
    const m = Math.round((s % 3600) / 60);
    return m ? `${h} h ${m} min` : `${h} h`;
  }
  const d = Math.floor(s / 86400);
  const h = Math.round((s % 86400) / 3600);
  return h ? `${d} d ${h} h` : `${d} d`;
}

/** A value in the metric's unit, for people. */
export function fmtMetricValue(unit: string, v: number | null | undefined): string {
  if (v === undefined || v === null || Number.isNaN(v)) return MISSING;
  switch (unit) {
    case "%":
      return `${trim(v)} %`;
    case "bytes":
      return fmtBytes(v);
    case "bytes/s":
      return `${fmtBytes(v)}/s`;
    case "s":
      return fmtSeconds(Math.round(v));
    default:
      return trim(v);
  }
}

function trim(v: number): string {
  return Number.isInteger(v) ? String(v) : v.toFixed(Math.abs(v) < 10 ? 2 : 1);
}

/** "CPU > 90 % for 5 min"; the inventory metrics get their own sentence. */
export function conditionText(
  spec: Pick<AlertRuleSpec, "metricId" | "operator" | "threshold" | "sustainedSeconds">,
): string {
  const m = metricInfo(spec.metricId);
  const forText = spec.sustainedSeconds > 0 ? ` for ${fmtSeconds(spec.sustainedSeconds)}` : "";
  if (spec.metricId === "vm_unexpected_stop") return `VM stopped unexpectedly${forText}`;
  if (spec.metricId === "telemetry_age_seconds")
    return `No telemetry for ${opSymbol(spec.operator)} ${fmtSeconds(spec.threshold)}${forText}`;
  const value = fmtMetricValue(m?.unit ?? "", spec.threshold);
  return `${m?.short ?? spec.metricId} ${opSymbol(spec.operator)} ${value}${forText}`;
}

const severityTone: Record<string, "info" | "warn" | "bad"> = {
  INFO: "info",
  WARNING: "warn",
  CRITICAL: "bad",
};

export function SeverityBadge(props: { severity: string }) {
  return <Badge tone={severityTone[props.severity] ?? "muted"}>{props.severity.toLowerCase()}</Badge>;
}

/** PENDING / APPLIED / FAILED with the reason next to it. */
export function SyncBadge(props: { status: string; reason?: string; testId?: string }) {
  const tone = props.status === "APPLIED" ? "ok" : props.status === "FAILED" ? "bad" : "warn";
  const title =
    props.status === "PENDING"
      ? "Saved; the evaluator has not applied this version yet"
      : props.status === "APPLIED"
        ? "The evaluator runs this version"
        : props.reason;
  return (
    <span className="alert-sync" data-testid={props.testId}>
      <Badge tone={tone} title={title}>
        {props.status.toLowerCase()}
      </Badge>
      {props.status === "FAILED" && props.reason ? (
        <span className="alert-sync-reason">{props.reason}</span>
      ) : null}
    </span>
  );
}

const stateTone: Record<string, "ok" | "warn" | "bad" | "muted" | "info"> = {
  FIRING: "bad",
  PENDING: "warn",
  RESOLVED: "ok",
  INACTIVE: "muted",
  RETIRED: "muted",
};

export function InstanceStateBadge(props: { state: string }) {
  return <Badge tone={stateTone[props.state] ?? "muted"}>{props.state.toLowerCase()}</Badge>;
}
