/**
 * `api/v1/rules` and `api/v1/alerts`: the project's svc alert rules as one Prometheus rule group of
 * alerting rules, and their pending and firing instances, in Prometheus 3's JSON
 * (web/api/v1/api.go RuleDiscovery, AlertDiscovery), with its filters. Read-only; no record rules.
 */
import { type ActiveInstance, type ActiveRule, activeRules, rulePromQL } from "../alerts/index.ts";
import type { Db } from "../db/database.ts";
import type { LabelMatcher } from "../storage/interface.ts";
import { compileMatchers } from "../tsdb/matchers.ts";
import { badParam } from "./errors.ts";
import { goJson, successBody } from "./format.ts";
import { type Params, parseMatchers } from "./params.ts";

export interface RulesDeps {
  readonly db: Db;
  readonly evaluationIntervalMs: number;
  readonly maxExpressionBytes: number;
}

/** The one group's name and file: svc's rules are one group per project. */
export const GROUP_NAME = "svc";
export const groupFile = (projectId: string) => `projects/${projectId}/alertRules`;

/** Go's time.Time in JSON (RFC 3339, UTC); the zero time when never. */
function rfc3339(ms: number | null): string {
  return ms === null ? "0001-01-01T00:00:00Z" : new Date(ms).toISOString();
}

/** Go's strconv.FormatFloat(v, 'e', -1, 64), as Prometheus writes an alert's value. */
export function goExp(v: number | null): string {
  if (v === null || Number.isNaN(v)) return "NaN";
  if (!Number.isFinite(v)) return v > 0 ? "+Inf" : "-Inf";
  return v.toExponential().replace(/e([+-])(\d)$/, "e$10$2");
}

function ruleLabels(r: ActiveRule): Record<string, string> {
  return { severity: r.spec.severity.toLowerCase() };
}

function ruleAnnotations(r: ActiveRule): Record<string, string> {
  const s = r.spec;
  const what = `${s.metricId} ${s.operator} ${s.threshold} for ${s.sustainedSeconds}s`;
  return { summary: s.displayName, description: `svc alert rule ${r.id}: ${what}` };
}

function alertJson(r: ActiveRule, i: ActiveInstance) {
  const labels: Record<string, string> = {
    alertname: r.spec.displayName,
    ...ruleLabels(r),
    vm: i.vmName,
    vm_id: i.vmName.slice(i.vmName.lastIndexOf("/") + 1),
  };
  if (i.mountpoint) labels.mountpoint = i.mountpoint;
  return {
    labels,
    annotations: ruleAnnotations(r),
    state: i.state === "FIRING" ? "firing" : "pending",
    activeAt: rfc3339(i.activeSince),
    value: goExp(i.lastValue),
  };
}

function ruleJson(r: ActiveRule, withAlerts: boolean) {
  const states = new Set(r.instances.map((i) => i.state));
  const health = r.lastEvalError ? "err" : r.lastEvalTime === null ? "unknown" : "ok";
  return {
    state: states.has("FIRING") ? "firing" : states.has("PENDING") ? "pending" : "inactive",
    name: r.spec.displayName,
    query: rulePromQL(r.spec) ?? "",
    duration: r.spec.sustainedSeconds,
    keepFiringFor: 0,
    labels: ruleLabels(r),
    annotations: ruleAnnotations(r),
    ...(withAlerts ? { alerts: r.instances.map((i) => alertJson(r, i)) } : {}),
    health,
    ...(r.lastEvalError ? { lastError: r.lastEvalError } : {}),
    evaluationTime: 0,
    lastEvaluation: rfc3339(r.lastEvalTime),
    type: "alerting",
  };
}

function boolParam(p: Params, name: string): boolean {
  const s = p.get(name);
  if (s === undefined) return false;
  // Go's strconv.ParseBool.
  if (["1", "t", "T", "TRUE", "true", "True"].includes(s)) return true;
  if (["0", "f", "F", "FALSE", "false", "False"].includes(s)) return false;
  throw badParam(name, `strconv.ParseBool: parsing ${JSON.stringify(s.slice(0, 64))}: invalid syntax`);
}

function labelsMatch(sets: LabelMatcher[][], labels: Record<string, string>): boolean {
  if (sets.length === 0) return true;
  return sets.some((set) => compileMatchers(set).every((m) => m.matches(labels[m.name] ?? "")));
}

/** `group_limit` and `group_next_token` as Prometheus 3 reads them. */
function pagination(p: Params): { limit: number; token: string | undefined } {
  const limit = p.get("group_limit");
  const token = p.get("group_next_token");
  if (token !== undefined && limit === undefined)
    throw badParam(
      "group_next_token",
      "group_limit needs to be present in order to paginate over the groups",
    );
  if (limit === undefined) return { limit: 0, token };
  if (!/^[+-]?\d+$/.test(limit))
    throw badParam(
      "group_limit",
      `group_limit needs to be a valid number: ${JSON.stringify(limit.slice(0, 64))}`,
    );
  const n = Number(limit);
  if (n <= 0) throw badParam("group_limit", "group_limit needs to be greater than 0");
  return { limit: n, token };
}

export async function listRules(deps: RulesDeps, projectId: string, p: Params): Promise<string> {
  const type = p.get("type");
  if (type !== undefined && type !== "alert" && type !== "record")
    throw badParam("type", `not supported value ${JSON.stringify(type.slice(0, 64))}`);
  const withAlerts = !boolParam(p, "exclude_alerts");
  const sets = parseMatchers(p, deps.maxExpressionBytes);
  // svc has one group: any limit fits it, so the answer never carries a next token.
  const { token } = pagination(p);
  const names = new Set(p.all("rule_name[]"));
  const groups = new Set(p.all("rule_group[]"));
  const files = new Set(p.all("file[]"));
  const file = groupFile(projectId);
  // The only group's token; any other is not one svc gave out.
  const groupToken = Buffer.from(`${file};${GROUP_NAME}`).toString("base64url");
  if (token !== undefined && token !== groupToken)
    throw badParam("group_next_token", "invalid group_next_token");

  const inGroup = (groups.size === 0 || groups.has(GROUP_NAME)) && (files.size === 0 || files.has(file));
  const all = type === "record" || !inGroup ? [] : await activeRules(deps.db, projectId);
  const rules = all.filter(
    (r) => (names.size === 0 || names.has(r.spec.displayName)) && labelsMatch(sets, ruleLabels(r)),
  );
  if (rules.length === 0) return successBody('{"groups":[]}');
  const evaluated = rules.map((r) => r.lastEvalTime).filter((t): t is number => t !== null);
  const group = {
    name: GROUP_NAME,
    file,
    rules: rules.map((r) => ruleJson(r, withAlerts)),
    interval: deps.evaluationIntervalMs / 1000,
    limit: 0,
    evaluationTime: 0,
    lastEvaluation: rfc3339(evaluated.length ? Math.max(...evaluated) : null),
  };
  return successBody(goJson({ groups: [group] }));
}

export async function listAlerts(deps: RulesDeps, projectId: string): Promise<string> {
  const rules = await activeRules(deps.db, projectId);
  const alerts = rules.flatMap((r) => r.instances.map((i) => alertJson(r, i)));
  return successBody(goJson({ alerts }));
}
