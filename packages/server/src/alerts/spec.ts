import { createHash } from "node:crypto";
import { invalidArgument } from "../errors.ts";
import { checkFreeText, MAX_DISPLAY_NAME } from "../free-text.ts";
import { parseVmName } from "../inventory/names.ts";
import { type RuleMetric, ruleMetrics } from "./catalog.ts";
import type { AlertOptions } from "./options.ts";

export const operators = [
  "GREATER_THAN",
  "GREATER_THAN_OR_EQUAL",
  "LESS_THAN",
  "LESS_THAN_OR_EQUAL",
] as const;
export type Operator = (typeof operators)[number];
export const severities = ["INFO", "WARNING", "CRITICAL"] as const;
export type Severity = (typeof severities)[number];

export const MAX_VM_NAMES = 1_000;
export const MAX_DESTINATIONS = 5;
export const MAX_REPEAT_INTERVAL_SECONDS = 7 * 86_400;
export const MIN_REPEAT_INTERVAL_SECONDS = 60;

/** A validated, normalized rule spec: what a revision stores and the evaluator runs. */
export interface RuleSpec {
  readonly displayName: string;
  readonly metricId: string;
  readonly operator: Operator;
  readonly threshold: number;
  readonly sustainedSeconds: number;
  readonly severity: Severity;
  readonly allVms: boolean;
  /** Sorted, unique; empty when allVms. */
  readonly vmNames: readonly string[];
  readonly enabled: boolean;
  readonly repeatIntervalSeconds: number;
  /** Sorted, unique. */
  readonly destinationNames: readonly string[];
  /** Forecast rules only (absent otherwise, as in revisions saved before forecasts existed). */
  readonly forecast?: Forecast;
}

/** Compare the value predicted horizonSeconds ahead by a least-squares line over lookbackSeconds. */
export interface Forecast {
  readonly horizonSeconds: number;
  readonly lookbackSeconds: number;
}

/** Metrics a forecast rule may watch: usage that fills up. */
export const FORECAST_METRICS: readonly string[] = [
  "memory_used_pct",
  "memory_used_bytes",
  "filesystem_used_pct",
  "filesystem_used_bytes",
];
export const FORECAST_HORIZON_SECONDS = { min: 60, max: 7 * 86_400 } as const;
export const FORECAST_LOOKBACK_SECONDS = { min: 300, max: 86_400 } as const;

/** The wire shape (the generated message's fields) that validateSpec reads. */
export interface SpecInput {
  displayName: string;
  metricId: string;
  operator: string;
  threshold: number;
  sustainedSeconds: number;
  severity: string;
  allVms: boolean;
  vmNames: readonly string[];
  enabled?: boolean;
  repeatIntervalSeconds: number;
  destinationNames: readonly string[];
  forecastHorizonSeconds?: number;
  forecastLookbackSeconds?: number;
}

/**
 * Checks every field of a spec for a rule of `projectId`, naming the field (`<prefix>.<field>`) in
 * the error, and returns it normalized. VM existence is the caller's check (it needs the inventory).
 */
export function validateSpec(
  input: SpecInput | undefined,
  projectId: string,
  opts: Pick<AlertOptions, "maxSustainedSeconds">,
  prefix = "spec",
): RuleSpec {
  const f = (name: string) => `${prefix}.${name}`;
  if (!input) throw invalidArgument(prefix, "is required");
  const displayName = checkFreeText(f("displayName"), input.displayName, {
    max: MAX_DISPLAY_NAME,
    required: true,
  });
  const metric = ruleMetrics.get(input.metricId);
  if (!metric) {
    throw invalidArgument(
      f("metricId"),
      input.metricId
        ? `${JSON.stringify(input.metricId)} is not a metric alert rules can watch (one of ${[...ruleMetrics.keys()].join(", ")})`
        : "is required",
    );
  }
  if (!(operators as readonly string[]).includes(input.operator))
    throw invalidArgument(f("operator"), `must be one of ${operators.join(", ")}`);
  if (!Number.isFinite(input.threshold)) throw invalidArgument(f("threshold"), "must be a finite number");
  if (!Number.isInteger(input.sustainedSeconds) || input.sustainedSeconds < 0)
    throw invalidArgument(f("sustainedSeconds"), "must be an integer ≥ 0");
  if (input.sustainedSeconds > opts.maxSustainedSeconds)
    throw invalidArgument(f("sustainedSeconds"), `must be at most ${opts.maxSustainedSeconds}`);
  if (!(severities as readonly string[]).includes(input.severity))
    throw invalidArgument(f("severity"), `must be one of ${severities.join(", ")}`);
  const vmNames = uniqueSorted(input.vmNames, f("vmNames"));
  if (input.allVms && vmNames.length > 0)
    throw invalidArgument(f("vmNames"), "must be empty when allVms is true");
  if (!input.allVms && vmNames.length === 0)
    throw invalidArgument(f("vmNames"), "must name at least one VM when allVms is false");
  if (vmNames.length > MAX_VM_NAMES)
    throw invalidArgument(f("vmNames"), `must hold at most ${MAX_VM_NAMES} VMs`);
  for (const [i, name] of vmNames.entries()) {
    const field = `${f("vmNames")}[${i}]`;
    if (parseVmName(name, field).projectId !== projectId)
      throw invalidArgument(field, `${name} belongs to another project`);
  }
  const r = input.repeatIntervalSeconds;
  if (
    !Number.isInteger(r) ||
    r < 0 ||
    (r > 0 && r < MIN_REPEAT_INTERVAL_SECONDS) ||
    r > MAX_REPEAT_INTERVAL_SECONDS
  ) {
    throw invalidArgument(
      f("repeatIntervalSeconds"),
      `must be 0 (never) or ${MIN_REPEAT_INTERVAL_SECONDS}..${MAX_REPEAT_INTERVAL_SECONDS}`,
    );
  }
  const destinationNames = uniqueSorted(input.destinationNames, f("destinationNames"));
  if (destinationNames.length > MAX_DESTINATIONS)
    throw invalidArgument(f("destinationNames"), `must hold at most ${MAX_DESTINATIONS} destinations`);
  for (const [i, d] of destinationNames.entries()) {
    const m = /^projects\/([^/]+)\/destinations\/([A-Za-z0-9-]{1,64})$/.exec(d);
    const field = `${f("destinationNames")}[${i}]`;
    if (!m) throw invalidArgument(field, "must be projects/<project_id>/destinations/<id>");
    if (m[1] !== projectId) throw invalidArgument(field, `${d} belongs to another project`);
  }
  checkMetricSemantics(metric, input, f);
  const forecast = checkForecast(input, f);
  return {
    displayName,
    metricId: metric.id,
    operator: input.operator as Operator,
    threshold: input.threshold,
    sustainedSeconds: input.sustainedSeconds,
    severity: input.severity as Severity,
    allVms: input.allVms,
    vmNames,
    enabled: input.enabled ?? true,
    repeatIntervalSeconds: r,
    destinationNames,
    ...(forecast ? { forecast } : {}),
  };
}

function checkForecast(input: SpecInput, f: (n: string) => string): Forecast | undefined {
  const h = input.forecastHorizonSeconds ?? 0;
  const l = input.forecastLookbackSeconds ?? 0;
  if (h === 0) {
    if (l !== 0)
      throw invalidArgument(
        f("forecastLookbackSeconds"),
        "is only for forecast rules (forecastHorizonSeconds > 0)",
      );
    return undefined;
  }
  if (!FORECAST_METRICS.includes(input.metricId))
    throw invalidArgument(
      f("forecastHorizonSeconds"),
      `forecasts are for memory and filesystem usage (${FORECAST_METRICS.join(", ")}), not ${input.metricId}`,
    );
  if (!Number.isInteger(h) || h < FORECAST_HORIZON_SECONDS.min || h > FORECAST_HORIZON_SECONDS.max)
    throw invalidArgument(
      f("forecastHorizonSeconds"),
      `must be 0 (no forecast) or ${FORECAST_HORIZON_SECONDS.min}..${FORECAST_HORIZON_SECONDS.max}`,
    );
  if (!Number.isInteger(l) || l < FORECAST_LOOKBACK_SECONDS.min || l > FORECAST_LOOKBACK_SECONDS.max)
    throw invalidArgument(
      f("forecastLookbackSeconds"),
      `must be ${FORECAST_LOOKBACK_SECONDS.min}..${FORECAST_LOOKBACK_SECONDS.max} with a forecast`,
    );
  return { horizonSeconds: h, lookbackSeconds: l };
}

function checkMetricSemantics(m: RuleMetric, input: SpecInput, f: (n: string) => string): void {
  if (m.kind === "unexpected_stop" && !(input.operator === "GREATER_THAN" && input.threshold === 0)) {
    throw invalidArgument(f("operator"), "vm_unexpected_stop is 0 or 1: use GREATER_THAN with threshold 0");
  }
  if (m.kind === "telemetry_age" && !(input.operator.startsWith("GREATER_THAN") && input.threshold > 0)) {
    throw invalidArgument(
      f("threshold"),
      "telemetry_age_seconds needs GREATER_THAN (or _OR_EQUAL) and a threshold > 0 seconds",
    );
  }
}

function uniqueSorted(values: readonly string[], field: string): string[] {
  const seen = new Set<string>();
  for (const [i, v] of values.entries()) {
    if (seen.has(v)) throw invalidArgument(`${field}[${i}]`, `${v} is listed twice`);
    seen.add(v);
  }
  return [...seen].sort();
}

/** Whether `value` breaches `threshold` under `operator`. */
export function breaches(operator: Operator, value: number, threshold: number): boolean {
  switch (operator) {
    case "GREATER_THAN":
      return value > threshold;
    case "GREATER_THAN_OR_EQUAL":
      return value >= threshold;
    case "LESS_THAN":
      return value < threshold;
    case "LESS_THAN_OR_EQUAL":
      return value <= threshold;
  }
}

/**
 * The fields that decide what fires. A revision whose key differs from the applied one retires the
 * rule's instances (a forecast's horizon and lookback are part of it); edits of the name, severity, destinations, repeat interval or VM selection keep
 * them (VMs dropped from the selection retire on their own).
 */
export function conditionKey(s: RuleSpec): string {
  const c: unknown[] = [s.metricId, s.operator, s.threshold, s.sustainedSeconds, s.enabled];
  // Appended only when set, so the keys of rules without a forecast stay what they were.
  if (s.forecast) c.push(s.forecast.horizonSeconds, s.forecast.lookbackSeconds);
  return createHash("sha256").update(JSON.stringify(c)).digest("hex").slice(0, 32);
}
