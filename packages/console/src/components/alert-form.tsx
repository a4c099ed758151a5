import type { AlertRuleSpec } from "@gen/svc/monitoring/v1/alerts_pb.ts";
import type { Destination } from "@gen/svc/monitoring/v1/destinations_pb.ts";
import type { VMMonitoring } from "@gen/svc/monitoring/v1/monitoring_pb.ts";
import { useQuery } from "@tanstack/react-query";
import { type ReactNode, useState } from "react";
import { api } from "../api.ts";
import { lastSegment } from "../format.ts";
import { fmtMetricValue, fmtSeconds, metricOptionLabel, OPERATORS, SEVERITIES } from "./alert-catalog.tsx";
import type { SpecInit } from "./alert-preview.tsx";
import { FORECAST_HORIZON, FORECAST_LOOKBACK, metricInfo, RULE_METRICS } from "./rule-metrics.ts";
import { Badge, Field } from "./ui.tsx";

/** The editable form of a rule spec; numbers stay text until saved so a half-typed value is kept. */
export interface RuleForm {
  displayName: string;
  metricId: string;
  operator: string;
  threshold: string;
  sustainedSeconds: string;
  severity: string;
  allVms: boolean;
  vmNames: string[];
  destinationNames: string[];
  repeatIntervalSeconds: string;
  enabled: boolean;
  /** "0": compare the newest sample; else seconds ahead of the predicted value (forecast metrics only). */
  forecastHorizonSeconds: string;
  /** Seconds of samples the forecast's line is fitted to; only with a horizon. */
  forecastLookbackSeconds: string;
}

export const BLANK_FORM: RuleForm = {
  displayName: "",
  metricId: "cpu_utilization_pct",
  operator: "GREATER_THAN",
  threshold: "",
  sustainedSeconds: "300",
  severity: "WARNING",
  allVms: true,
  vmNames: [],
  destinationNames: [],
  repeatIntervalSeconds: "3600",
  enabled: true,
  forecastHorizonSeconds: "0",
  forecastLookbackSeconds: "0",
};

/** What a newly ticked forecast starts from: a day ahead from the last six hours. */
const FORECAST_DEFAULTS = { horizon: "86400", lookback: "21600" };

export function formFromSpec(s: AlertRuleSpec | undefined): RuleForm {
  if (!s) return BLANK_FORM;
  return {
    displayName: s.displayName,
    metricId: s.metricId,
    operator: s.operator,
    threshold: String(s.threshold),
    sustainedSeconds: String(s.sustainedSeconds),
    severity: s.severity,
    allVms: s.allVms,
    vmNames: [...s.vmNames],
    destinationNames: [...s.destinationNames],
    repeatIntervalSeconds: String(s.repeatIntervalSeconds),
    enabled: s.enabled ?? true,
    forecastHorizonSeconds: String(s.forecastHorizonSeconds ?? 0),
    forecastLookbackSeconds: String(s.forecastLookbackSeconds ?? 0),
  };
}

/** Form field → its error; keys are the spec's field names (what the server names as spec.<field>). */
export type FieldErrors = Partial<Record<keyof RuleForm, string>>;

function parseNumber(text: string, integer: boolean): number | undefined {
  if (text.trim() === "") return undefined;
  const n = Number(text);
  if (!Number.isFinite(n) || (integer && !Number.isInteger(n))) return undefined;
  return n;
}

/**
 * The spec the form stands for, or the fields that are not numbers yet. Everything else (ranges, the
 * metric's rules, VM existence) is the server's to check; its errors come back naming the field.
 */
export function specFromForm(f: RuleForm): { spec?: SpecInit; errors: FieldErrors } {
  const errors: FieldErrors = {};
  const threshold = parseNumber(f.threshold, false);
  const sustained = parseNumber(f.sustainedSeconds, true);
  const repeat = parseNumber(f.repeatIntervalSeconds, true);
  if (threshold === undefined) errors.threshold = f.threshold.trim() ? "must be a number" : "is required";
  if (sustained === undefined) errors.sustainedSeconds = "must be a whole number of seconds";
  if (repeat === undefined) errors.repeatIntervalSeconds = "must be a whole number of seconds (0 = never)";
  const forecast = forecastOf(f, errors);
  if (Object.keys(errors).length > 0) return { errors };
  return {
    errors,
    spec: {
      displayName: f.displayName,
      metricId: f.metricId,
      operator: f.operator,
      threshold,
      sustainedSeconds: sustained,
      severity: f.severity,
      allVms: f.allVms,
      vmNames: f.allVms ? [] : f.vmNames,
      enabled: f.enabled,
      repeatIntervalSeconds: repeat,
      destinationNames: f.destinationNames,
      forecastHorizonSeconds: forecast.horizon,
      forecastLookbackSeconds: forecast.lookback,
    },
  };
}

/** Whether the form asks for a forecast: a forecast metric and a horizon other than 0. */
export function forecasting(f: RuleForm): boolean {
  return metricInfo(f.metricId)?.forecast === true && f.forecastHorizonSeconds.trim() !== "0";
}

/**
 * The forecast's two numbers, checked against the server's bounds so a wrong one is named before the
 * save (the server checks them again); 0 and 0 when the rule compares the newest sample.
 */
function forecastOf(f: RuleForm, errors: FieldErrors): { horizon: number; lookback: number } {
  if (!forecasting(f)) return { horizon: 0, lookback: 0 };
  const horizon = parseNumber(f.forecastHorizonSeconds, true);
  const lookback = parseNumber(f.forecastLookbackSeconds, true);
  const within = (n: number | undefined, b: { min: number; max: number }) =>
    n !== undefined && n >= b.min && n <= b.max;
  if (!within(horizon, FORECAST_HORIZON))
    errors.forecastHorizonSeconds = `must be a whole number of seconds from ${FORECAST_HORIZON.min} (${fmtSeconds(FORECAST_HORIZON.min)}) to ${FORECAST_HORIZON.max} (${fmtSeconds(FORECAST_HORIZON.max)})`;
  if (!within(lookback, FORECAST_LOOKBACK))
    errors.forecastLookbackSeconds = `must be a whole number of seconds from ${FORECAST_LOOKBACK.min} (${fmtSeconds(FORECAST_LOOKBACK.min)}) to ${FORECAST_LOOKBACK.max} (${fmtSeconds(FORECAST_LOOKBACK.max)})`;
  return { horizon: horizon ?? 0, lookback: lookback ?? 0 };
}

/** "spec.vmNames[2]" → "vmNames"; undefined for fields the form does not show. */
export function formFieldOf(field: string | undefined): keyof RuleForm | undefined {
  if (!field) return undefined;
  const m = /^spec\.([A-Za-z]+)/.exec(field);
  if (!m) return undefined;
  const k = m[1] as keyof RuleForm;
  return k in BLANK_FORM ? k : undefined;
}

export function useDestinations(projectName: string) {
  return useQuery({
    queryKey: ["alert-destinations", projectName],
    staleTime: 60_000,
    queryFn: async () => (await api.destinations.listDestinations({ projectName })).destinations,
  });
}

export function RuleFormFields(props: {
  form: RuleForm;
  onChange: (f: RuleForm) => void;
  errors: FieldErrors;
  vms: VMMonitoring[] | undefined;
  destinations: Destination[] | undefined;
  destinationsError?: unknown;
  disabled: boolean;
}) {
  const { form, errors } = props;
  const set = <K extends keyof RuleForm>(k: K, v: RuleForm[K]) => props.onChange({ ...form, [k]: v });
  const m = metricInfo(form.metricId);
  const sustained = parseNumber(form.sustainedSeconds, true);
  const repeat = parseNumber(form.repeatIntervalSeconds, true);
  const threshold = parseNumber(form.threshold, false);
  const [vmFilter, setVmFilter] = useState("");
  const vmRows = (props.vms ?? []).filter((v) => {
    const f = vmFilter.trim().toLowerCase();
    return !f || v.displayName.toLowerCase().includes(f) || v.name.toLowerCase().includes(f);
  });
  const knownVms = new Set((props.vms ?? []).map((v) => v.name));
  const unknownSelected = form.vmNames.filter((n) => props.vms && !knownVms.has(n));
  return (
    <fieldset className="alert-form" disabled={props.disabled} data-testid="alert-form">
      <div className="alert-form-section">
        <h3>Rule</h3>
        <div className="alert-form-grid">
          <Field label="Display name" error={errors.displayName}>
            <input
              name="displayName"
              value={form.displayName}
              maxLength={200}
              placeholder="e.g. High CPU on web servers"
              onChange={(e) => set("displayName", e.target.value)}
            />
          </Field>
          <Field label="Severity" error={errors.severity}>
            <select name="severity" value={form.severity} onChange={(e) => set("severity", e.target.value)}>
              {SEVERITIES.map((s) => (
                <option key={s} value={s}>
                  {s[0] + s.slice(1).toLowerCase()}
                </option>
              ))}
            </select>
          </Field>
        </div>
        <label className="alert-toggle">
          <input
            type="checkbox"
            name="enabled"
            checked={form.enabled}
            onChange={(e) => set("enabled", e.target.checked)}
          />
          <span>
            <strong>Enabled</strong>
            <span className="hint">
              {" "}
              — unchecked pauses the rule: it is not evaluated and its instances retire.
            </span>
          </span>
        </label>
        {errors.enabled ? <span className="field-error">{errors.enabled}</span> : null}
      </div>

      <div className="alert-form-section">
        <h3>Condition</h3>
        <div className="alert-form-grid alert-form-grid-4">
          <Field label="Metric" error={errors.metricId} hint={m?.description}>
            <select name="metricId" value={form.metricId} onChange={(e) => set("metricId", e.target.value)}>
              {RULE_METRICS.map((x) => (
                <option key={x.id} value={x.id}>
                  {metricOptionLabel(x)}
                </option>
              ))}
              {m ? null : <option value={form.metricId}>{form.metricId}</option>}
            </select>
          </Field>
          <Field label="Operator" error={errors.operator}>
            <select name="operator" value={form.operator} onChange={(e) => set("operator", e.target.value)}>
              {OPERATORS.map((o) => (
                <option key={o.id} value={o.id}>
                  {o.label}
                </option>
              ))}
            </select>
          </Field>
          <Field
            label="Threshold"
            error={errors.threshold}
            hint={
              m && threshold !== undefined && m.unit !== "%" && m.unit !== "bool"
                ? `= ${fmtMetricValue(m.unit, threshold)}`
                : undefined
            }
          >
            <span className="alert-unit-input">
              <input
                name="threshold"
                inputMode="decimal"
                value={form.threshold}
                onChange={(e) => set("threshold", e.target.value)}
              />
              <span className="alert-unit">{m?.unit === "bool" ? "0 / 1" : m?.unit}</span>
            </span>
          </Field>
          <Field
            label="Sustained for"
            error={errors.sustainedSeconds}
            hint={
              sustained === undefined
                ? "0–86400 seconds"
                : sustained === 0
                  ? "fires on the first breaching sample"
                  : `= ${fmtSeconds(sustained)}`
            }
          >
            <span className="alert-unit-input">
              <input
                name="sustainedSeconds"
                inputMode="numeric"
                value={form.sustainedSeconds}
                onChange={(e) => set("sustainedSeconds", e.target.value)}
              />
              <span className="alert-unit">s</span>
            </span>
          </Field>
        </div>
        {m?.forecast ? <ForecastFields form={form} errors={errors} onChange={props.onChange} /> : null}
      </div>

      <div className="alert-form-section">
        <h3>VMs</h3>
        <div className="alert-radios">
          <label>
            <input
              type="radio"
              name="allVms"
              checked={form.allVms}
              onChange={() => props.onChange({ ...form, allVms: true })}
            />{" "}
            All VMs of the project, including VMs created later
          </label>
          <label>
            <input
              type="radio"
              name="allVms"
              checked={!form.allVms}
              onChange={() => props.onChange({ ...form, allVms: false })}
            />{" "}
            Only the selected VMs{!form.allVms ? ` (${form.vmNames.length} selected)` : ""}
          </label>
        </div>
        {!form.allVms ? (
          <div className="alert-picklist" data-testid="alert-vm-picker">
            <input
              type="search"
              placeholder="Filter VMs"
              aria-label="Filter VMs"
              value={vmFilter}
              onChange={(e) => setVmFilter(e.target.value)}
            />
            <div className="alert-picklist-items">
              {vmRows.map((v) => (
                <PickItem
                  key={v.name}
                  checked={form.vmNames.includes(v.name)}
                  onToggle={(on) => set("vmNames", toggled(form.vmNames, v.name, on))}
                >
                  <span>{v.displayName || lastSegment(v.name)}</span>
                  <span className="muted small">
                    {v.location} · {v.state.toLowerCase()}
                  </span>
                </PickItem>
              ))}
              {unknownSelected.map((n) => (
                <PickItem key={n} checked onToggle={() => set("vmNames", toggled(form.vmNames, n, false))}>
                  <span>{lastSegment(n)}</span>
                  <Badge tone="bad">not in the inventory</Badge>
                </PickItem>
              ))}
              {props.vms && vmRows.length === 0 ? <span className="muted small">No VM matches.</span> : null}
            </div>
          </div>
        ) : null}
        {errors.vmNames ? <span className="field-error">{errors.vmNames}</span> : null}
      </div>

      <div className="alert-form-section">
        <h3>Notifications</h3>
        <div className="alert-form-grid">
          <div className="field">
            <span className="field-label">Destinations</span>
            {props.destinationsError ? (
              <span className="field-error">Could not list destinations.</span>
            ) : props.destinations === undefined ? (
              <span className="muted small">Loading…</span>
            ) : props.destinations.length === 0 && form.destinationNames.length === 0 ? (
              <span className="muted small">None in this project: incidents show in the console only.</span>
            ) : (
              <div className="checks" data-testid="alert-destinations">
                {props.destinations.map((d) => (
                  <PickItem
                    key={d.name}
                    checked={form.destinationNames.includes(d.name)}
                    onToggle={(on) => set("destinationNames", toggled(form.destinationNames, d.name, on))}
                  >
                    <span>{d.displayName || lastSegment(d.name)}</span>
                    <Badge tone="info">{d.kind.toLowerCase()}</Badge>
                    {d.paused ? <Badge tone="warn">paused</Badge> : null}
                  </PickItem>
                ))}
                {form.destinationNames
                  .filter((n) => !props.destinations?.some((d) => d.name === n))
                  .map((n) => (
                    <PickItem
                      key={n}
                      checked
                      onToggle={() => set("destinationNames", toggled(form.destinationNames, n, false))}
                    >
                      <span>{lastSegment(n)}</span>
                      <Badge tone="bad">deleted</Badge>
                    </PickItem>
                  ))}
              </div>
            )}
            <span className="hint">Up to 5. Incidents always show in the console.</span>
            {errors.destinationNames ? <span className="field-error">{errors.destinationNames}</span> : null}
          </div>
          <Field
            label="Repeat interval"
            error={errors.repeatIntervalSeconds}
            hint={
              repeat === undefined
                ? "0 (never) or 60–604800 seconds"
                : repeat === 0
                  ? "a still-firing incident is notified once"
                  : `a still-firing incident notifies again every ${fmtSeconds(repeat)}`
            }
          >
            <span className="alert-unit-input">
              <input
                name="repeatIntervalSeconds"
                inputMode="numeric"
                value={form.repeatIntervalSeconds}
                onChange={(e) => set("repeatIntervalSeconds", e.target.value)}
              />
              <span className="alert-unit">s</span>
            </span>
          </Field>
        </div>
      </div>
    </fieldset>
  );
}

/**
 * A forecast rule's inputs (memory and filesystem metrics): compare the value a least-squares line over
 * the last `lookback` seconds predicts `horizon` seconds ahead, as PromQL's predict_linear does.
 */
function ForecastFields(props: { form: RuleForm; errors: FieldErrors; onChange: (f: RuleForm) => void }) {
  const { form, errors } = props;
  const on = forecasting(form);
  const horizon = parseNumber(form.forecastHorizonSeconds, true);
  const lookback = parseNumber(form.forecastLookbackSeconds, true);
  const set = (k: "forecastHorizonSeconds" | "forecastLookbackSeconds", v: string) =>
    props.onChange({ ...form, [k]: v });
  return (
    <div className="alert-forecast" data-testid="alert-forecast">
      <label className="alert-toggle">
        <input
          type="checkbox"
          name="forecast"
          checked={on}
          onChange={(e) =>
            props.onChange({
              ...form,
              forecastHorizonSeconds: e.target.checked ? FORECAST_DEFAULTS.horizon : "0",
              forecastLookbackSeconds: e.target.checked ? FORECAST_DEFAULTS.lookback : "0",
            })
          }
        />
        <span>
          <strong>Forecast</strong>
          <span className="hint">
            {" "}
            — compare the value predicted ahead (a straight line through the recent samples) instead of the
            newest one: warns before the memory or disk is full.
          </span>
        </span>
      </label>
      {on ? (
        <div className="alert-form-grid">
          <Field
            label="Predict ahead"
            error={errors.forecastHorizonSeconds}
            hint={
              horizon === undefined
                ? `${FORECAST_HORIZON.min}–${FORECAST_HORIZON.max} seconds`
                : `the value ${fmtSeconds(horizon)} from each evaluation`
            }
          >
            <span className="alert-unit-input">
              <input
                name="forecastHorizonSeconds"
                inputMode="numeric"
                value={form.forecastHorizonSeconds}
                onChange={(e) => set("forecastHorizonSeconds", e.target.value)}
              />
              <span className="alert-unit">s</span>
            </span>
          </Field>
          <Field
            label="From the samples of the last"
            error={errors.forecastLookbackSeconds}
            hint={
              lookback === undefined
                ? `${FORECAST_LOOKBACK.min}–${FORECAST_LOOKBACK.max} seconds`
                : `the line is fitted to the last ${fmtSeconds(lookback)}`
            }
          >
            <span className="alert-unit-input">
              <input
                name="forecastLookbackSeconds"
                inputMode="numeric"
                value={form.forecastLookbackSeconds}
                onChange={(e) => set("forecastLookbackSeconds", e.target.value)}
              />
              <span className="alert-unit">s</span>
            </span>
          </Field>
        </div>
      ) : null}
    </div>
  );
}

/** Field by field, what differs between two specs (for the version-conflict explanation). */
export function specDiff(
  a: RuleForm,
  b: RuleForm,
  vmLabel: (n: string) => string,
  destLabel: (n: string) => string,
  /** Every field, changed or not. */
  all = false,
): { field: string; a: string; b: string }[] {
  const num = (t: string) => (t.trim() !== "" && Number.isFinite(Number(t)) ? String(Number(t)) : t);
  const show = (f: RuleForm, k: keyof RuleForm): string => {
    const mi = metricInfo(f.metricId);
    switch (k) {
      case "metricId":
        return mi?.label ?? f.metricId;
      case "operator":
        return OPERATORS.find((o) => o.id === f.operator)?.symbol ?? f.operator;
      case "threshold":
        return `${num(f.threshold)}${mi && mi.unit !== "bool" ? ` ${mi.unit}` : ""}`;
      case "sustainedSeconds":
      case "repeatIntervalSeconds":
        return `${num(f[k])} s`;
      case "forecastHorizonSeconds":
      case "forecastLookbackSeconds":
        return forecasting(f) ? `${num(f[k])} s` : "no forecast";
      case "allVms":
        return f.allVms ? "all VMs" : "selected VMs";
      case "vmNames":
        return f.allVms ? "—" : [...f.vmNames].sort().map(vmLabel).join(", ") || "none";
      case "destinationNames":
        return [...f.destinationNames].sort().map(destLabel).join(", ") || "none";
      case "enabled":
        return f.enabled ? "enabled" : "paused";
      default:
        return String(f[k]);
    }
  };
  const labels: Record<keyof RuleForm, string> = {
    displayName: "Display name",
    metricId: "Metric",
    operator: "Operator",
    threshold: "Threshold",
    sustainedSeconds: "Sustained for",
    severity: "Severity",
    allVms: "VMs",
    vmNames: "Selected VMs",
    destinationNames: "Destinations",
    repeatIntervalSeconds: "Repeat interval",
    enabled: "Enabled",
    forecastHorizonSeconds: "Forecast ahead",
    forecastLookbackSeconds: "Forecast from the last",
  };
  const out: { field: string; a: string; b: string }[] = [];
  for (const k of Object.keys(labels) as (keyof RuleForm)[]) {
    const x = show(a, k);
    const y = show(b, k);
    if (all || x !== y) out.push({ field: labels[k], a: x, b: y });
  }
  return out;
}

/** `list` with `name` added (on) or removed (off), order kept. */
function toggled(list: readonly string[], name: string, on: boolean): string[] {
  return on ? [...list, name] : list.filter((n) => n !== name);
}

/** A checkbox row of a pick list. */
function PickItem(props: { checked: boolean; onToggle: (on: boolean) => void; children: ReactNode }) {
  return (
    <label>
      <input type="checkbox" checked={props.checked} onChange={(e) => props.onToggle(e.target.checked)} />
      {props.children}
    </label>
  );
}
