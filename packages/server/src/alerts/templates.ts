import type { RuleSpec } from "./spec.ts";

export interface RuleTemplate {
  readonly id: string;
  readonly displayName: string;
  readonly description: string;
  readonly spec: RuleSpec;
}

const base = {
  allVms: true,
  vmNames: [],
  enabled: true,
  repeatIntervalSeconds: 3600,
  destinationNames: [],
} as const;

/** The initial templates (docs/alerts.md#templates): ready specs with sensible defaults, for every VM of the project. */
export const ruleTemplates: readonly RuleTemplate[] = [
  {
    id: "cpu",
    displayName: "High CPU utilization",
    description: "CPU utilization above 90% of the VM's vCPUs for 5 minutes (hypervisor data).",
    spec: {
      ...base,
      displayName: "High CPU utilization",
      metricId: "cpu_utilization_pct",
      operator: "GREATER_THAN",
      threshold: 90,
      sustainedSeconds: 300,
      severity: "WARNING",
    },
  },
  {
    id: "memory",
    displayName: "High guest memory use",
    description:
      "Guest memory used (capacity minus free, page cache included) above 95% for 10 minutes. Cache counts as used, so the threshold is high.",
    spec: {
      ...base,
      displayName: "High guest memory use",
      metricId: "memory_used_pct",
      operator: "GREATER_THAN",
      threshold: 95,
      sustainedSeconds: 600,
      severity: "WARNING",
    },
  },
  {
    id: "filesystem",
    displayName: "Filesystem almost full",
    description:
      "A supported filesystem (ext2/3/4, xfs, btrfs, vfat) more than 90% full for 5 minutes, per mountpoint. Needs a guest agent (expanded monitoring's, or the QEMU guest agent the hypervisor collector reads); a missing reading is no data, never 0% full.",
    spec: {
      ...base,
      displayName: "Filesystem almost full",
      metricId: "filesystem_used_pct",
      operator: "GREATER_THAN",
      threshold: 90,
      sustainedSeconds: 300,
      severity: "CRITICAL",
    },
  },
  {
    id: "filesystem-forecast",
    displayName: "Filesystem full within 4 hours",
    description:
      "A supported filesystem predicted to be 100% full within 4 hours by a least-squares line over its last 6 hours (PromQL's predict_linear), for 10 minutes, per mountpoint. Catches a disk filling up before the 90% rule fires; a missing reading is no data.",
    spec: {
      ...base,
      displayName: "Filesystem full within 4 hours",
      metricId: "filesystem_used_pct",
      operator: "GREATER_THAN_OR_EQUAL",
      threshold: 100,
      sustainedSeconds: 600,
      severity: "CRITICAL",
      forecast: { horizonSeconds: 14_400, lookbackSeconds: 21_600 },
    },
  },
  {
    id: "unexpected-stop",
    displayName: "VM stopped unexpectedly",
    description:
      "The VM stopped without a user request and outside a maintenance window. Stops by the user and maintenance raise nothing.",
    spec: {
      ...base,
      displayName: "VM stopped unexpectedly",
      metricId: "vm_unexpected_stop",
      operator: "GREATER_THAN",
      threshold: 0,
      sustainedSeconds: 0,
      severity: "CRITICAL",
    },
  },
  {
    id: "telemetry",
    displayName: "Telemetry unavailable",
    description:
      "A running VM (outside maintenance) sent no samples for 5 minutes: the telemetry is missing, which says nothing about the VM's health.",
    spec: {
      ...base,
      displayName: "Telemetry unavailable",
      metricId: "telemetry_age_seconds",
      operator: "GREATER_THAN",
      threshold: 300,
      sustainedSeconds: 0,
      severity: "WARNING",
    },
  },
];
