import type { NotificationMessage } from "../message.ts";

/**
 * What every channel shows of a message, as provider-neutral pieces: a title, a tone (the colour),
 * labelled facts, and helpers to fit text into a provider's limits. Each channel file only maps these
 * onto its payload.
 */

export type Tone = "critical" | "warning" | "info" | "resolved" | "retired" | "test";

/** The colour of each tone, 0xRRGGBB. */
export const toneColors: Readonly<Record<Tone, number>> = {
  critical: 0xd92d20,
  warning: 0xf79009,
  info: 0x2e90fa,
  resolved: 0x12b76a,
  retired: 0x98a2b3,
  test: 0x7a5af8,
};

export function toneOf(m: NotificationMessage): Tone {
  if (m.type === "test" || !m.incident) return "test";
  if (m.type === "incident.resolved") return "resolved";
  if (m.type === "incident.retired") return "retired";
  const s = m.incident.severity.toUpperCase();
  return s === "CRITICAL" ? "critical" : s === "WARNING" ? "warning" : "info";
}

export interface Fact {
  readonly label: string;
  readonly value: string;
  /** When it is a time, Unix seconds (channels that can localise a time use it). */
  readonly timeUnix?: number;
}

const OPERATORS: Readonly<Record<string, string>> = {
  GREATER_THAN: ">",
  GREATER_THAN_OR_EQUAL: "≥",
  LESS_THAN: "<",
  LESS_THAN_OR_EQUAL: "≤",
};

/**
 * The display name and unit of each alert metric (docs/alerts.md's catalog; the console's rule form uses
 * the same names), so a notification reads "CPU utilization > 90 %", never the metricId. An id not
 * listed (a metric added later) is shown as it is.
 */
const METRICS: Readonly<Record<string, { readonly name: string; readonly unit: string }>> = {
  cpu_utilization_pct: { name: "CPU utilization", unit: "%" },
  memory_used_pct: { name: "Guest memory used", unit: "%" },
  memory_used_bytes: { name: "Guest memory used", unit: "bytes" },
  filesystem_used_pct: { name: "Filesystem used", unit: "%" },
  filesystem_used_bytes: { name: "Filesystem used", unit: "bytes" },
  disk_read_bytes_per_sec: { name: "Disk read rate", unit: "bytes/s" },
  disk_write_bytes_per_sec: { name: "Disk write rate", unit: "bytes/s" },
  network_receive_bytes_per_sec: { name: "Network receive rate", unit: "bytes/s" },
  network_transmit_bytes_per_sec: { name: "Network transmit rate", unit: "bytes/s" },
  vm_unexpected_stop: { name: "VM stopped unexpectedly", unit: "" },
  telemetry_age_seconds: { name: "Telemetry age", unit: "s" },
};

/** "cpu_utilization_pct" → "CPU utilization". */
export function metricName(metricId: string): string {
  return METRICS[metricId]?.name ?? metricId;
}

/** A value of the metric with its unit: "96.1 %", "7.5 GiB", "12 MiB/s", "300 s". */
export function formatMetricValue(metricId: string, v: number): string {
  const unit = METRICS[metricId]?.unit ?? "";
  if (unit === "bytes" || unit === "bytes/s") {
    const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let x = v;
    let i = 0;
    while (Math.abs(x) >= 1024 && i < units.length - 1) {
      x /= 1024;
      i++;
    }
    return `${formatNumber(Number(x.toFixed(i === 0 ? 0 : 2)))} ${units[i]}${unit === "bytes/s" ? "/s" : ""}`;
  }
  return unit ? `${formatNumber(v)} ${unit}` : formatNumber(v);
}

/** A value with at most 6 significant digits and no exponent for ordinary magnitudes. */
export function formatNumber(v: number): string {
  if (!Number.isFinite(v)) return String(v);
  return String(Number(v.toPrecision(6)));
}

/** 2026-01-02T03:04:05Z */
export function formatTime(unix: number): string {
  return new Date(unix * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** The last segment of a resource name (projects/p/vms/web-2 → web-2). */
export const shortName = (name: string) => name.slice(name.lastIndexOf("/") + 1);

/** The facts shown under the title, in order; empty values are left out. */
export function factsOf(m: NotificationMessage): Fact[] {
  const out: Fact[] = [];
  const add = (label: string, value: string | undefined, timeUnix?: number) => {
    const v = oneLine(value ?? "");
    if (v) out.push({ label, value: v, ...(timeUnix === undefined ? {} : { timeUnix }) });
  };
  const i = m.incident;
  if (i) {
    add("Severity", i.severity);
    add("State", i.retireReason ? `${i.state} (${i.retireReason})` : i.state);
  }
  if (m.vm) add("VM", m.vm.mountpoint ? `${shortName(m.vm.name)} ${m.vm.mountpoint}` : shortName(m.vm.name));
  if (i) {
    add(
      "Condition",
      `${metricName(i.metricId)} ${OPERATORS[i.operator] ?? i.operator} ${formatMetricValue(i.metricId, i.threshold)}`,
    );
    if (i.firingValue !== undefined) add("Firing value", formatMetricValue(i.metricId, i.firingValue));
    if (i.lastValue !== undefined) add("Last value", formatMetricValue(i.metricId, i.lastValue));
    add("Opened", formatTime(i.openTimeUnix), i.openTimeUnix);
    if (i.closeTimeUnix !== undefined)
      add(i.state === "RETIRED" ? "Retired" : "Resolved", formatTime(i.closeTimeUnix), i.closeTimeUnix);
  }
  if (m.rule) add("Rule", m.rule.displayName);
  add("Project", shortName(m.project));
  return out;
}

/** The title: the message's one-line summary (a test send says so). */
export function titleOf(m: NotificationMessage): string {
  return oneLine(m.summary) || (m.type === "test" ? "Test notification" : "Notification");
}

/** The label of the link button. */
export function linkLabelOf(m: NotificationMessage): string {
  return m.incident ? "Open incident" : "Open in svc";
}

/**
 * Collapses line breaks, control characters and runs of white space: titles and facts are one line,
 * and no control character reaches a payload (JSON would spell each as six bytes).
 */
export function oneLine(s: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: removing them is the point
  return s.replace(/[\s\u0000-\u001f\u007f-\u009f]+/g, " ").trim();
}

export const ELLIPSIS = "…";

/**
 * Fits `raw` into `max` UTF-16 units (what the providers count) after `esc`, which may lengthen
 * it: the longest prefix of `raw` whose escaped form plus an ellipsis fits, so neither an escape
 * sequence nor a surrogate pair is cut in half.
 */
export function fit(raw: string, max: number, esc: (s: string) => string = (s) => s): string {
  const whole = esc(raw);
  if (whole.length <= max) return whole;
  const prefix = (n: number) => {
    const last = raw.charCodeAt(n - 1);
    return raw.slice(0, last >= 0xd800 && last <= 0xdbff ? n - 1 : n);
  };
  // The escaped length grows with the prefix, so a binary search finds the longest that fits.
  let lo = 0;
  let hi = Math.min(raw.length, max);
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (esc(prefix(mid)).length + ELLIPSIS.length <= max) lo = mid;
    else hi = mid - 1;
  }
  return max < ELLIPSIS.length ? "" : `${esc(prefix(lo))}${ELLIPSIS}`;
}
