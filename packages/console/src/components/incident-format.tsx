import type { Incident } from "@gen/svc/monitoring/v1/alerts_pb.ts";
import { useQuery } from "@tanstack/react-query";
import { api } from "../api.ts";
import { fmtDuration, lastSegment, MISSING } from "../format.ts";
import { useProject, useSession } from "../session.tsx";

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

/** "cpu_utilization_pct > 90 %" */
export function conditionText(i: Pick<Incident, "metricId" | "operator" | "threshold">): string {
  return `${i.metricId} ${operatorSymbol(i.operator)} ${fmtValue(i.threshold)}${metricUnit(i.metricId)}`;
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

/** users/<id> → "you" for the signed-in user, otherwise the id; "evaluator" stays. */
export function actorLabel(actor: string, me: string, emails?: Map<string, string>): string {
  if (!actor) return MISSING;
  if (actor === me) return "you";
  return emails?.get(actor) ?? actor;
}

/**
 * Names people in incidents: "you", or the email of a member the console knows (recipients of the
 * project's email destinations; the console has no member list), or users/<id>.
 */
export function useActorLabel(): (actor: string) => string {
  const project = useProject();
  const { session } = useSession();
  const q = useQuery({
    queryKey: ["destinations", project.name],
    queryFn: () => api.destinations.listDestinations({ projectName: project.name }),
    staleTime: 60_000,
  });
  const emails = new Map<string, string>();
  for (const d of q.data?.destinations ?? []) for (const r of d.recipients) emails.set(r.user, r.email);
  return (actor) => actorLabel(actor, session.user, emails);
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
