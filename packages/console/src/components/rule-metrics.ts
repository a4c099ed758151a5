/**
 * The rule catalog as the console shows it. The facts (metricId, unit, per mountpoint, charted,
 * forecast, the forecast bounds) are the server's, held to them by test/console-rule-metrics.test.ts,
 * which fails on any drift; the words (short, label, description) are the console's own. No imports,
 * so that test reads this module as it is.
 */

/**
 * What an alert rule can watch, as the server's rule catalog (packages/server/src/alerts/catalog.ts)
 * defines it: the metricId, its unit, whether instances are per mountpoint, and whether
 * QueryVMMonitoring serves the same metricId (so the preview can draw its history).
 */
export interface RuleMetricInfo {
  id: string;
  /** Short name used in the condition sentence ("CPU > 90 % for 5 min"). */
  short: string;
  label: string;
  unit: "%" | "bytes" | "bytes/s" | "bool" | "s";
  perMountpoint: boolean;
  /** QueryVMMonitoring has a metric of the same id. */
  charted: boolean;
  /** A rule may compare the value predicted ahead (forecastHorizonSeconds) instead of the newest one. */
  forecast?: boolean;
  description: string;
}

/** The server's bounds of a forecast (packages/server/src/alerts/spec.ts), seconds. */
export const FORECAST_HORIZON = { min: 60, max: 7 * 86_400 } as const;
export const FORECAST_LOOKBACK = { min: 300, max: 86_400 } as const;

export const RULE_METRICS: readonly RuleMetricInfo[] = [
  {
    id: "cpu_utilization_pct",
    short: "CPU",
    label: "CPU utilization",
    unit: "%",
    perMountpoint: false,
    charted: true,
    description: "% of the VM's vCPUs (hypervisor).",
  },
  {
    id: "memory_used_pct",
    short: "Memory",
    label: "Guest memory used",
    unit: "%",
    perMountpoint: false,
    charted: true,
    forecast: true,
    description: "Used ÷ capacity × 100, page cache included.",
  },
  {
    id: "memory_used_bytes",
    short: "Memory used",
    label: "Guest memory used (bytes)",
    unit: "bytes",
    perMountpoint: false,
    charted: true,
    forecast: true,
    description: "Guest memory used, page cache included.",
  },
  {
    id: "filesystem_used_pct",
    short: "Filesystem",
    label: "Filesystem used",
    unit: "%",
    perMountpoint: true,
    charted: true,
    forecast: true,
    description:
      "Per mountpoint; supported filesystems only, needs expanded monitoring or the QEMU guest agent read by the hypervisor collector.",
  },
  {
    id: "filesystem_used_bytes",
    short: "Filesystem used",
    label: "Filesystem used (bytes)",
    unit: "bytes",
    perMountpoint: true,
    charted: true,
    forecast: true,
    description:
      "Per mountpoint; supported filesystems only, needs expanded monitoring or the QEMU guest agent read by the hypervisor collector.",
  },
  {
    id: "disk_read_bytes_per_sec",
    short: "Disk read",
    label: "Disk read rate",
    unit: "bytes/s",
    perMountpoint: false,
    charted: true,
    description: "Summed over the VM's disks.",
  },
  {
    id: "disk_write_bytes_per_sec",
    short: "Disk write",
    label: "Disk write rate",
    unit: "bytes/s",
    perMountpoint: false,
    charted: true,
    description: "Summed over the VM's disks.",
  },
  {
    id: "network_receive_bytes_per_sec",
    short: "Network in",
    label: "Network receive rate",
    unit: "bytes/s",
    perMountpoint: false,
    charted: true,
    description: "Summed over the VM's interfaces.",
  },
  {
    id: "network_transmit_bytes_per_sec",
    short: "Network out",
    label: "Network transmit rate",
    unit: "bytes/s",
    perMountpoint: false,
    charted: true,
    description: "Summed over the VM's interfaces.",
  },
  {
    id: "vm_unexpected_stop",
    short: "Unexpected stop",
    label: "VM stopped unexpectedly",
    unit: "bool",
    perMountpoint: false,
    charted: false,
    description: "1 while stopped without a user request outside maintenance. Only > 0 is allowed.",
  },
  {
    id: "telemetry_age_seconds",
    short: "Telemetry age",
    label: "Telemetry age",
    unit: "s",
    perMountpoint: false,
    charted: false,
    description: "Seconds since the newest sample of a running VM. Needs > (or ≥) and a threshold > 0.",
  },
];

export const metricInfo = (id: string): RuleMetricInfo | undefined => RULE_METRICS.find((m) => m.id === id);
