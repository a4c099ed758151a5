/** The alerts domain: rules and revisions, the evaluator, incidents, preview, templates. */
export { type ActiveInstance, type ActiveRule, activeRules, rulePromQL } from "./active.ts";
export { type RuleMetric, ruleMetrics, SUPPORTED_FSTYPES } from "./catalog.ts";
export { type Evaluation, evaluateSamples, type InstanceSeries } from "./condition.ts";
export { type CycleReport, createEvaluator, type Evaluator } from "./evaluator.ts";
export { type AlertOptions, defaultAlertOptions, resolveAlertOptions } from "./options.ts";
export { type PreviewView, previewAlertRule, runPreview } from "./preview.ts";
export {
  deleteAlertRule,
  getAlertRule,
  listAlertRules,
  listInstances,
  parseRuleName,
  type RulesDeps,
  type RuleView,
  ruleName,
  saveAlertRule,
} from "./rules.ts";
export { operators, type RuleSpec, severities, validateSpec } from "./spec.ts";
export { type InstanceState, type InstanceStatus, step } from "./state.ts";
export { ruleTemplates } from "./templates.ts";
