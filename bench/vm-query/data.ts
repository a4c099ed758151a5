/**
 * The samples bench/vm-query loads, the same in both modes: per VM, the six stored series the six
 * charts of its QueryVMMonitoring row read, every 30 s, and the last-observation series every 10th step.
 */

const quick = process.argv.includes("--quick");
const num = (name: string, dflt: number) => (process.env[name] ? Number(process.env[name]) : dflt);
/** VMs in the project (BENCH_VMS). */
export const VMS = num("BENCH_VMS", quick ? 100 : 1000);
/** Days of samples (BENCH_DAYS). */
export const DAYS = num("BENCH_DAYS", quick ? 1 : 7);
// 1,000 measured requests per row: the p99 of 400 is the 4th-slowest request, so two or three
// collector pauses decided it from run to run.
/** Measured requests per row (per arm in the remote mode's paired rows; BENCH_ITER). */
export const ITER = num("BENCH_ITER", quick ? 100 : 1000);
// V8 keeps optimizing the request path for ~2,000 requests (its compiler threads ran ~1 s of CPU
// over the first 500 7-day requests here, competing for the two cores), so a row is measured after
// that warm-up: the steady state of a server that has been running, not its first seconds.
/** Warm-up requests per row (BENCH_WARMUP). */
export const WARMUP = num("BENCH_WARMUP", quick ? 300 : 2000);
/** Sampling interval of the loaded series, ms. */
export const STEP_MS = 30_000;

/** The six charts of the QueryVMMonitoring rows (metricIds), what the loaded series serve. */
export const SIX_METRICS: readonly string[] = [
  "cpu_utilization_pct",
  "memory_used_bytes",
  "memory_used_pct",
  "vcpus",
  "disk_read_bytes_per_sec",
  "network_receive_bytes_per_sec",
];

/** Label sets of a VM's seven series (the six read by the charts, then last observation), as ingest stores them. */
export function vmSeriesLabels(vm: string, vmId: string): Record<string, string>[] {
  const b = { project_id: "bench", vm, vm_id: vmId, location: "dc-1", source: "hypervisor" };
  return [
    { ...b, __name__: "svc_vm_cpu_utilization_pct" },
    { ...b, __name__: "svc_vm_memory_used_bytes" },
    { ...b, __name__: "svc_vm_memory_total_bytes" },
    { ...b, __name__: "svc_vm_vcpus" },
    { ...b, __name__: "svc_vm_disk_read_bytes_total", device: "vda" },
    { ...b, __name__: "svc_vm_network_receive_bytes_total", interface: "eth0" },
    { ...b, __name__: "svc_vm_last_observation_timestamp_seconds" },
  ];
}

/**
 * Values of VM `i`'s seven series at step `k` (time `ts`, ms), in vmSeriesLabels' order; the last one
 * is only stored at steps where `observed(k, lastStep)`.
 */
export function valuesAt(i: number, k: number, ts: number): number[] {
  return [
    20 + 15 * Math.sin((k + i) / 120) + (i % 7),
    2e9 + 1e6 * ((k + i) % 500),
    4 * 2 ** 30,
    2,
    k * 4096 * (1 + (i % 3)),
    k * 1500 * (1 + (i % 5)),
    ts / 1000,
  ];
}

/** Whether the last-observation series has a sample at step k (every 10th, and the last). */
export function observed(k: number, lastStep: number): boolean {
  return k % 10 === 0 || k === lastStep;
}
