/**
 * What an alert rule may watch: each metricId names how one instance's values are read from the
 * store (or the inventory). Values are per VM, or per (VM, mountpoint) for filesystem metrics.
 *
 * - gauge: the stored samples as they are.
 * - ratio: 100 × num / den of the samples taken at the same time (a missing side is no sample); with
 *   `avail` (filesystems), 100 × num / (num + avail) where avail was taken with num, as df's Use%
 *   (root-reserved blocks are not free), and num / den where it was not sent (older agents).
 * - rate: per-second increase between consecutive counter samples (a reset counts the new value),
 *   summed over the VM's devices at each sample time.
 * - unexpected_stop: 1 while the VM is stopped with reason UNEXPECTED outside a maintenance window,
 *   else 0 (from the inventory's state events; never no_data).
 * - telemetry_age: seconds since the VM's newest sample while it runs outside maintenance, else 0.
 */
export type RuleMetric =
  | {
      readonly kind: "gauge";
      readonly id: string;
      readonly unit: string;
      readonly series: string;
      readonly perMountpoint: boolean;
    }
  | {
      readonly kind: "ratio";
      readonly id: string;
      readonly unit: string;
      readonly num: string;
      readonly den: string;
      readonly avail?: string;
      readonly perMountpoint: boolean;
    }
  | {
      readonly kind: "rate";
      readonly id: string;
      readonly unit: string;
      readonly series: string;
      readonly perMountpoint: false;
    }
  | {
      readonly kind: "unexpected_stop";
      readonly id: string;
      readonly unit: string;
      readonly perMountpoint: false;
    }
  | {
      readonly kind: "telemetry_age";
      readonly id: string;
      readonly unit: string;
      readonly perMountpoint: false;
    };

/** Filesystem types a filesystem rule watches; pseudo and network filesystems are left out. */
export const SUPPORTED_FSTYPES: readonly string[] = ["ext4", "ext3", "ext2", "xfs", "btrfs", "vfat"];

/** Series every VM reports while it runs; telemetry_age reads the newest of them. */
export const LAST_OBSERVATION_SERIES = "svc_vm_last_observation_timestamp_seconds";

const defs: readonly RuleMetric[] = [
  {
    kind: "gauge",
    id: "cpu_utilization_pct",
    unit: "%",
    series: "svc_vm_cpu_utilization_pct",
    perMountpoint: false,
  },
  {
    kind: "gauge",
    id: "memory_used_bytes",
    unit: "bytes",
    series: "svc_vm_memory_used_bytes",
    perMountpoint: false,
  },
  {
    kind: "ratio",
    id: "memory_used_pct",
    unit: "%",
    num: "svc_vm_memory_used_bytes",
    den: "svc_vm_memory_total_bytes",
    perMountpoint: false,
  },
  {
    kind: "ratio",
    id: "filesystem_used_pct",
    unit: "%",
    num: "svc_vm_filesystem_used_bytes",
    den: "svc_vm_filesystem_size_bytes",
    avail: "svc_vm_filesystem_avail_bytes",
    perMountpoint: true,
  },
  {
    kind: "gauge",
    id: "filesystem_used_bytes",
    unit: "bytes",
    series: "svc_vm_filesystem_used_bytes",
    perMountpoint: true,
  },
  {
    kind: "rate",
    id: "disk_read_bytes_per_sec",
    unit: "bytes/s",
    series: "svc_vm_disk_read_bytes_total",
    perMountpoint: false,
  },
  {
    kind: "rate",
    id: "disk_write_bytes_per_sec",
    unit: "bytes/s",
    series: "svc_vm_disk_written_bytes_total",
    perMountpoint: false,
  },
  {
    kind: "rate",
    id: "network_receive_bytes_per_sec",
    unit: "bytes/s",
    series: "svc_vm_network_receive_bytes_total",
    perMountpoint: false,
  },
  {
    kind: "rate",
    id: "network_transmit_bytes_per_sec",
    unit: "bytes/s",
    series: "svc_vm_network_transmit_bytes_total",
    perMountpoint: false,
  },
  { kind: "unexpected_stop", id: "vm_unexpected_stop", unit: "bool", perMountpoint: false },
  { kind: "telemetry_age", id: "telemetry_age_seconds", unit: "s", perMountpoint: false },
];

export const ruleMetrics: ReadonlyMap<string, RuleMetric> = new Map(defs.map((d) => [d.id, d]));

/** The stored metric names a rule's one read selects. */
export function storedSeries(m: RuleMetric): string[] {
  switch (m.kind) {
    case "gauge":
    case "rate":
      return [m.series];
    case "ratio":
      return m.avail ? [m.num, m.den, m.avail] : [m.num, m.den];
    case "telemetry_age":
      return [LAST_OBSERVATION_SERIES];
    case "unexpected_stop":
      return [];
  }
}
