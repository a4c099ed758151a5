import type { Incident } from "@gen/svc/monitoring/v1/alerts_pb.ts";
import { fmtDuration, lastSegment, MISSING } from "../format.ts";
import { fmtMetricValue } from "./alert-catalog.tsx";
import { metricInfo } from "./rule-metrics.ts";

/** Small display pieces shared by the incident and destination screens. */

export { Time } from "./ui.tsx";

const OPERATORS: Record<string, string> = {
  GREATER_THAN: ">",
  GREATER_THAN_OR_EQUAL: "≥",
  LESS_THAN: "<",
  LESS_THAN_OR_EQUAL: "≤",
};

export function operatorSymbol(op: string): string {
  return OPERATORS[op] ?? op;
}

/** "97.0" / "12" — a value as the rule compares it, without inventing a unit. */
export function fmtValue(v: number | undefined): string {
  if (v === undefined || Number.isNaN(v)) return MISSING;
  if (Number.isInteger(v)) return String(v);
  return Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(1);
}

const UNITS: Record<string, string> = {
  cpu_utilization_pct: " %",
  memory_used_pct: " %",
  filesystem_used_pct: " %",
  telemetry_age_seconds: " s",
};

export function metricUnit(metricId: string): string {
  if (UNITS[metricId]) return UNITS[metricId];
  if (metricId.endsWith("_pct")) return " %";
  if (metricId.endsWith("_seconds")) return " s";
  return "";
}

/** "cpu_utilization_pct" → "CPU utilization": the metric's display name (alert-catalog.tsx), or the id. */
export function metricLabel(metricId: string): string {
  return metricInfo(metricId)?.label ?? metricId;
}

/** "CPU utilization > 90 %": the metric by its display name, never its id. */
export function conditionText(i: Pick<Incident, "metricId" | "operator" | "threshold">): string {
  const m = metricInfo(i.metricId);
  const value = m ? fmtMetricValue(m.unit, i.threshold) : `${fmtValue(i.threshold)}${metricUnit(i.metricId)}`;
  return `${metricLabel(i.metricId)} ${operatorSymbol(i.operator)} ${value}`;
}

/** How long the incident has been (or was) open. */
export function incidentDuration(i: Pick<Incident, "openTimeUnix" | "closeTimeUnix">, nowMs = Date.now()) {
  const open = Number(i.openTimeUnix);
  if (!open) return MISSING;
  const end = Number(i.closeTimeUnix) || Math.floor(nowMs / 1000);
  return fmtDuration(Math.max(0, end - open));
}

/** projects/p/locations/dc-1/vms/web-2 → the console path /vms/dc-1/web-2 and the short name. */
export function vmLink(vmName: string): { href: string; label: string } | undefined {
  const m = /^projects\/[^/]+\/locations\/([^/]+)\/vms\/([^/]+)$/.exec(vmName);
  if (!m) return undefined;
  return { href: `/vms/${m[1]}/${m[2]}`, label: m[2] };
}

/** projects/p/alertRules/<id> → /alerts/<id> */
export function ruleHref(rule: string): string {
  return `/alerts/${lastSegment(rule)}`;
}

export const incidentStateTone: Record<string, "ok" | "warn" | "bad" | "info" | "muted"> = {
  OPEN: "bad",
  RESOLVED: "ok",
  RETIRED: "muted",
};

export const severityTone: Record<string, "ok" | "warn" | "bad" | "info" | "muted"> = {
  CRITICAL: "bad",
  WARNING: "warn",
  INFO: "info",
};
