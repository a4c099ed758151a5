/**
 * Read side for tools that show alert rules the way a Prometheus ruler does (promapi's
 * `api/v1/rules` and `api/v1/alerts`): the rules the evaluator currently applies, each with the
 * PromQL over svc's metrics that watches the same values, and their pending and firing instances.
 */
import type { Db } from "../db/database.ts";
import { regexQuote } from "../metrics/latest.ts";
import { LAST_OBSERVATION_SERIES, ruleMetrics, SUPPORTED_FSTYPES } from "./catalog.ts";
import { loadRevision } from "./rules.ts";
import type { Operator, RuleSpec } from "./spec.ts";

export interface ActiveInstance {
  readonly vmName: string;
  readonly mountpoint: string;
  readonly state: "PENDING" | "FIRING";
  /** When the breach began (Prometheus' activeAt), ms. */
  readonly activeSince: number;
  readonly lastValue: number | null;
  /** "" | "NO_DATA" | "ERROR": the last evaluation's problem, which froze the state. */
  readonly flag: string;
}

export interface ActiveRule {
  readonly id: string;
  /** The applied revision's spec: what the evaluator runs. */
  readonly spec: RuleSpec;
  readonly lastEvalTime: number | null;
  readonly lastEvalError: string;
  readonly instances: readonly ActiveInstance[];
}

const PROMQL_OP: Readonly<Record<Operator, string>> = {
  GREATER_THAN: ">",
  GREATER_THAN_OR_EQUAL: ">=",
  LESS_THAN: "<",
  LESS_THAN_OR_EQUAL: "<=",
};

/**
 * The PromQL that watches the values a rule compares (its breach is the expression having a
 * result), or undefined when the rule reads the inventory rather than metrics (unexpected stops).
 * svc evaluates the rule itself (docs/alerts.md: the newest sample at most 90 s old, the
 * hypervisor's series before the agent's, stops and maintenance); the expression is what to chart.
 */
export function rulePromQL(spec: RuleSpec): string | undefined {
  const metric = ruleMetrics.get(spec.metricId);
  if (!metric) return undefined;
  const m: string[] = [];
  if (!spec.allVms) m.push(`vm=~"${spec.vmNames.map(regexQuote).join("|").replace(/[\\"]/g, "\\$&")}"`);
  if (metric.perMountpoint) m.push(`fstype=~"${SUPPORTED_FSTYPES.join("|")}"`);
  const sel = (name: string) => `${name}${m.length ? `{${m.join(",")}}` : ""}`;
  const cmp = `${PROMQL_OP[spec.operator]} ${spec.threshold}`;
  switch (metric.kind) {
    case "gauge":
      return `${sel(metric.series)} ${cmp}`;
    case "ratio":
      return metric.avail
        ? `(100 * ${sel(metric.num)} / (${sel(metric.num)} + ${sel(metric.avail)}) or 100 * ${sel(metric.num)} / ${sel(metric.den)}) ${cmp}`
        : `100 * ${sel(metric.num)} / ${sel(metric.den)} ${cmp}`;
    case "rate":
      return `sum without (device, interface) (irate(${sel(metric.series)}[90s])) ${cmp}`;
    case "telemetry_age":
      return `time() - ${sel(LAST_OBSERVATION_SERIES)} ${cmp}`;
    case "unexpected_stop":
      return undefined;
  }
}

/**
 * The project's enabled rules as the evaluator applies them (a rule not applied yet watches no VM,
 * so it is not listed), oldest first, each with its PENDING and FIRING instances.
 */
export async function activeRules(db: Db, projectId: string): Promise<ActiveRule[]> {
  const rules = await db
    .selectFrom("alert_rules")
    .select(["id", "applied_version", "last_eval_time", "last_eval_error"])
    .where("project_id", "=", projectId)
    .where("delete_time", "is", null)
    .where("applied_version", ">", 0)
    .orderBy("create_time")
    .orderBy("id")
    .execute();
  if (rules.length === 0) return [];
  const rows = await db
    .selectFrom("alert_instances")
    .select(["rule_id", "vm_name", "mountpoint", "state", "state_since", "pending_since"])
    .select(["last_value", "flag"])
    .where("project_id", "=", projectId)
    .where("state", "in", ["PENDING", "FIRING"])
    .orderBy("vm_name")
    .orderBy("mountpoint")
    .execute();
  const out: ActiveRule[] = [];
  for (const r of rules) {
    const spec = await loadRevision(db, r.id, r.applied_version);
    if (!spec.enabled) continue;
    const instances = rows
      .filter((i) => i.rule_id === r.id)
      .map((i) => ({
        vmName: i.vm_name,
        mountpoint: i.mountpoint,
        state: i.state as "PENDING" | "FIRING",
        activeSince: i.pending_since ?? i.state_since,
        lastValue: i.last_value,
        flag: i.flag,
      }));
    out.push({
      id: r.id,
      spec,
      lastEvalTime: r.last_eval_time,
      lastEvalError: r.last_eval_error,
      instances,
    });
  }
  return out;
}
