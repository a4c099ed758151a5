import type { ConnectRouter } from "@connectrpc/connect";
import { type AlertRule, type AlertRuleSpec, AlertService } from "@svc/sdk/gen/svc/monitoring/v1/alerts_pb";
import {
  deleteAlertRule,
  getAlertRule,
  listAlertRules,
  listInstances,
  parseRuleName,
  previewAlertRule,
  type RuleSpec,
  type RulesDeps,
  type RuleView,
  ruleTemplates,
  saveAlertRule,
} from "../../alerts/index.ts";
import type { AlertOptions } from "../../alerts/options.ts";
import type { Db } from "../../db/database.ts";
import { authorizeProject } from "../../iam/principal.ts";
import { parseProjectName } from "../../inventory/names.ts";
import type { MetricsBackend } from "../../metrics/backend.ts";
import { principalOf } from "../context.ts";

export interface AlertServiceDeps {
  readonly db: Db;
  readonly metrics: MetricsBackend;
  readonly options: AlertOptions;
  readonly pageKey: Buffer;
  readonly now: () => number;
  /** The evaluator's nudge: apply a saved revision without waiting for the next cycle. */
  readonly onChange?: () => void;
}

function specMessage(s: RuleSpec): AlertRuleSpec {
  return {
    $typeName: "svc.monitoring.v1.AlertRuleSpec",
    displayName: s.displayName,
    metricId: s.metricId,
    operator: s.operator,
    threshold: s.threshold,
    sustainedSeconds: s.sustainedSeconds,
    severity: s.severity,
    allVms: s.allVms,
    enabled: s.enabled,
    repeatIntervalSeconds: s.repeatIntervalSeconds,
    destinationNames: [...s.destinationNames],
    vmNames: [...s.vmNames],
    forecastHorizonSeconds: s.forecast?.horizonSeconds ?? 0,
    forecastLookbackSeconds: s.forecast?.lookbackSeconds ?? 0,
  };
}

function ruleMessage(v: RuleView): AlertRule {
  return {
    $typeName: "svc.monitoring.v1.AlertRule",
    name: v.name,
    id: v.id,
    spec: specMessage(v.spec),
    version: v.version,
    appliedVersion: v.appliedVersion,
    syncStatus: v.syncStatus,
    syncReason: v.syncReason,
    createTimeUnix: v.createTimeUnix,
    updateTimeUnix: v.updateTimeUnix,
    instanceCounts: { $typeName: "svc.monitoring.v1.AlertRuleInstanceCounts", ...v.instanceCounts },
    expectedInstances: v.expectedInstances,
    replayed: v.replayed,
    appliedSpec: v.appliedSpec ? specMessage(v.appliedSpec) : undefined,
    instances: [],
  };
}

export function registerAlertService(router: ConnectRouter, deps: AlertServiceDeps): void {
  const rules: RulesDeps = {
    db: deps.db,
    options: deps.options,
    metrics: deps.metrics,
    onChange: deps.onChange,
  };
  router.service(AlertService, {
    saveAlertRule: async (r, ctx) => ruleMessage(await saveAlertRule(rules, principalOf(ctx), r, deps.now())),
    getAlertRule: async (r, ctx) => {
      const view = await getAlertRule(rules, principalOf(ctx), r.name, deps.now());
      const msg = ruleMessage(view);
      if (r.includeInstances) {
        const { projectId, id } = parseRuleName(r.name);
        msg.instances = (await listInstances(deps.db, projectId, id)).map((i) => ({
          $typeName: "svc.monitoring.v1.AlertInstance",
          ...i,
        }));
      }
      return msg;
    },
    listAlertRules: async (r, ctx) => {
      const page = await listAlertRules(rules, principalOf(ctx), deps.pageKey, r, deps.now());
      return { rules: page.rules.map(ruleMessage), nextPageToken: page.nextPageToken };
    },
    deleteAlertRule: async (r, ctx) =>
      deleteAlertRule(rules, principalOf(ctx), r.name, r.expectedVersion, deps.now()),
    listAlertRuleTemplates: async (r, ctx) => {
      if (r.projectName)
        await authorizeProject(deps.db, principalOf(ctx), parseProjectName(r.projectName), "monitoring.read");
      return {
        templates: ruleTemplates.map((t) => ({
          id: t.id,
          displayName: t.displayName,
          description: t.description,
          spec: specMessage(t.spec),
        })),
      };
    },
    previewAlertRule: async (r, ctx) =>
      previewAlertRule(
        { db: deps.db, metrics: deps.metrics, options: deps.options },
        principalOf(ctx),
        r,
        deps.now(),
      ),
  });
}
