import type { WindowRequest } from "./backend.ts";
import type { Source } from "./catalog.ts";
import { binaryOn, type LabeledSteps, orSteps, ratioOn } from "./windows.ts";

/**
 * The metricIds of QueryVMMonitoring (docs/api.md#queryvmmonitoring) as one table: the stored series each reads and the
 * PromQL that computes it. Every reader (the RPC, the agreement test, docs) takes the expression from
 * here, so the Prometheus API given the same text returns the same values.
 *
 * Windows: gauges are averaged over each step window (`avg_over_time(x[step])`), so a 7-day chart at
 * 1800 s reflects every sample and a missing sample is an absent point, never a value carried forward
 * by the 5-minute lookback. Counters become rates over `max(step, 2 × sampling interval)`; `rate()`
 * handles counter resets.
 *
 * `plan` is the same computation as `promql`, spelled as the backend's window reads
 * (MetricsBackend.windowAggregates): the RPC serves it in one pass over the raw samples, and the
 * agreement test holds the two to the same values.
 */

/**
 * A metric as window reads: one aggregate, or `scale * num / on(on) den`; with `avail`, df's ratio
 * `scale * num / on(on) (num + on(on) avail)` wherever avail is there, and the plain ratio elsewhere.
 */
export type MetricPlan =
  | { readonly kind: "window"; readonly request: WindowRequest }
  | {
      readonly kind: "ratio";
      readonly num: WindowRequest;
      readonly den: WindowRequest;
      readonly avail?: WindowRequest;
      readonly on: readonly string[];
      readonly scale: number;
    };

/** The window reads a plan needs, in the order planSeries takes their results. */
export function planRequests(plan: MetricPlan): WindowRequest[] {
  if (plan.kind === "window") return [plan.request];
  return plan.avail ? [plan.num, plan.den, plan.avail] : [plan.num, plan.den];
}

/** The metric's series from the results of planRequests(plan), as its PromQL computes them. */
export function planSeries(plan: MetricPlan, results: readonly (readonly LabeledSteps[])[]): LabeledSteps[] {
  if (plan.kind === "window") return [...results[0]];
  const [num, den, avail] = results;
  const plain = ratioOn(num, den, plan.on, plan.scale);
  if (!avail) return plain;
  const used = binaryOn(num, avail, plan.on, (u, a) => u + a);
  return orSteps(ratioOn(num, used, plan.on, plan.scale), plain);
}

export interface MetricDef {
  readonly id: string;
  /** Unit shown to clients: %, bytes, bytes/s, ops/s, packets/s, s, count. */
  readonly unit: string;
  /** Who writes the underlying series when the result carries no `source` label. */
  readonly source: Source;
  /** Served only for VMs whose monitoring level is EXPANDED (guest agent). */
  readonly expanded: boolean;
  /** Stored series it reads (for quality: newest observation per series). */
  readonly series: readonly string[];
  /** PromQL over `sel` (a `{vm="…"}` matcher list) with windows for a step of `stepS` seconds. */
  promql(sel: string, stepS: number, samplingS: number): string;
  /** The same as window reads, for a step of `stepS` seconds. */
  plan(stepS: number, samplingS: number): MetricPlan;
}

const gaugeWindowS = (stepS: number) => stepS;
const rateWindowS = (stepS: number, samplingS: number) => Math.max(stepS, 2 * samplingS);
const gaugeWindow = (stepS: number) => `${gaugeWindowS(stepS)}s`;
const rateWindow = (stepS: number, samplingS: number) => `${rateWindowS(stepS, samplingS)}s`;

function windowed(metric: string, fn: WindowRequest["fn"], windowS: number): MetricPlan {
  return { kind: "window", request: { metric, fn, windowMs: windowS * 1000 } };
}

function gauge(id: string, series: string, unit: string, source: Source, expanded = false): MetricDef {
  return {
    id,
    unit,
    source,
    expanded,
    series: [series],
    promql: (sel, stepS) => `avg_over_time(${series}${sel}[${gaugeWindow(stepS)}])`,
    plan: (stepS) => windowed(series, "avg_over_time", gaugeWindowS(stepS)),
  };
}

function rate(id: string, series: string, unit: string): MetricDef {
  return {
    id,
    unit,
    source: "hypervisor",
    expanded: false,
    series: [series],
    promql: (sel, stepS, samplingS) => `rate(${series}${sel}[${rateWindow(stepS, samplingS)}])`,
    plan: (stepS, samplingS) => windowed(series, "rate", rateWindowS(stepS, samplingS)),
  };
}

/**
 * `100 * num / den`, averaged per step. With `avail` (filesystems: what `df` shows), the denominator is
 * num + avail where avail was sent, as df computes Use% (used ÷ (used + available), so blocks reserved
 * for root are not counted as free); where it was not (agents before it was sent), num / den.
 */
function ratio(
  id: string,
  num: string,
  den: string,
  on: readonly string[],
  source: Source,
  expanded: boolean,
  avail?: string,
): MetricDef {
  return {
    id,
    unit: "%",
    source,
    expanded,
    series: avail ? [num, den, avail] : [num, den],
    promql: (sel, stepS) => {
      const w = gaugeWindow(stepS);
      const o = `on(${on.join(", ")})`;
      const plain = `100 * avg_over_time(${num}${sel}[${w}]) / ${o} avg_over_time(${den}${sel}[${w}])`;
      if (!avail) return plain;
      const used = `avg_over_time(${num}${sel}[${w}])`;
      return `100 * ${used} / ${o} (${used} + ${o} avg_over_time(${avail}${sel}[${w}])) or ${plain}`;
    },
    plan: (stepS) => {
      const windowMs = gaugeWindowS(stepS) * 1000;
      return {
        kind: "ratio",
        num: { metric: num, fn: "avg_over_time", windowMs },
        den: { metric: den, fn: "avg_over_time", windowMs },
        ...(avail ? { avail: { metric: avail, fn: "avg_over_time" as const, windowMs } } : {}),
        on,
        scale: 100,
      };
    },
  };
}

const defs: readonly MetricDef[] = [
  gauge("cpu_utilization_pct", "svc_vm_cpu_utilization_pct", "%", "hypervisor"),
  {
    id: "vcpus",
    unit: "count",
    source: "hypervisor",
    expanded: false,
    series: ["svc_vm_vcpus"],
    // The vCPU count at the end of each step window: an average would invent fractional vCPUs.
    promql: (sel, stepS) => `last_over_time(svc_vm_vcpus${sel}[${gaugeWindow(stepS)}])`,
    plan: (stepS) => windowed("svc_vm_vcpus", "last_over_time", gaugeWindowS(stepS)),
  },
  gauge("memory_used_bytes", "svc_vm_memory_used_bytes", "bytes", "hypervisor"),
  gauge("memory_total_bytes", "svc_vm_memory_total_bytes", "bytes", "hypervisor"),
  ratio(
    "memory_used_pct",
    "svc_vm_memory_used_bytes",
    "svc_vm_memory_total_bytes",
    ["vm", "source"],
    "hypervisor",
    false,
  ),
  gauge("memory_cached_bytes", "svc_vm_memory_cached_bytes", "bytes", "hypervisor"),
  gauge("memory_available_bytes", "svc_vm_memory_available_bytes", "bytes", "guest_agent", true),
  gauge("memory_buffers_bytes", "svc_vm_memory_buffers_bytes", "bytes", "guest_agent", true),
  rate("disk_read_bytes_per_sec", "svc_vm_disk_read_bytes_total", "bytes/s"),
  rate("disk_write_bytes_per_sec", "svc_vm_disk_written_bytes_total", "bytes/s"),
  rate("disk_read_ops_per_sec", "svc_vm_disk_reads_completed_total", "ops/s"),
  rate("disk_write_ops_per_sec", "svc_vm_disk_writes_completed_total", "ops/s"),
  rate("network_receive_bytes_per_sec", "svc_vm_network_receive_bytes_total", "bytes/s"),
  rate("network_transmit_bytes_per_sec", "svc_vm_network_transmit_bytes_total", "bytes/s"),
  rate("network_receive_packets_per_sec", "svc_vm_network_receive_packets_total", "packets/s"),
  rate("network_transmit_packets_per_sec", "svc_vm_network_transmit_packets_total", "packets/s"),
  ratio(
    "filesystem_used_pct",
    "svc_vm_filesystem_used_bytes",
    "svc_vm_filesystem_size_bytes",
    ["vm", "source", "mountpoint", "fstype", "device"],
    "guest_agent",
    // Not gated on expanded monitoring: the hypervisor collector reads filesystems through the QEMU guest
    // agent at the baseline level (docs/hypervisor.md); a VM with neither agent has no reading.
    false,
    "svc_vm_filesystem_avail_bytes",
  ),
  gauge("filesystem_used_bytes", "svc_vm_filesystem_used_bytes", "bytes", "guest_agent"),
  gauge("filesystem_size_bytes", "svc_vm_filesystem_size_bytes", "bytes", "guest_agent"),
  {
    id: "telemetry_last_observed",
    unit: "s",
    source: "hypervisor",
    expanded: false,
    series: ["svc_vm_last_observation_timestamp_seconds"],
    promql: (sel, stepS) =>
      `max_over_time(svc_vm_last_observation_timestamp_seconds${sel}[${gaugeWindow(stepS)}])`,
    plan: (stepS) =>
      windowed("svc_vm_last_observation_timestamp_seconds", "max_over_time", gaugeWindowS(stepS)),
  },
];

/** metricId → definition. */
export const metricIds: ReadonlyMap<string, MetricDef> = new Map(defs.map((d) => [d.id, d]));

/** `{vm="<name>"}` with the value escaped as a PromQL string. */
export function vmSelector(vmName: string): string {
  return `{vm=${JSON.stringify(vmName)}}`;
}

/** Labels of a result series that identify the VM or its source; the rest (device, mountpoint…) stay. */
export const VM_IDENTITY_LABELS: ReadonlySet<string> = new Set([
  "__name__",
  "vm",
  "vm_id",
  "location",
  "source",
]);
