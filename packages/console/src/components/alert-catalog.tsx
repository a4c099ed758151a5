import type { AlertRuleSpec } from "@gen/svc/monitoring/v1/alerts_pb.ts";
import { fmtBytes, MISSING } from "../format.ts";
import { metricInfo, type RuleMetricInfo } from "./rule-metrics.ts";
import { Badge } from "./ui.tsx";

/** The metric picker's text: the label with its unit, once ("Guest memory used (bytes)", "CPU utilization (%)"). */
export function metricOptionLabel(m: RuleMetricInfo): string {
  return m.label.endsWith(`(${m.unit})`) ? m.label : `${m.label} (${m.unit})`;
}

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
