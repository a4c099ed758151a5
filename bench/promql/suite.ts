/**
 * The query suite, run as range queries over a 1 h and a day-long window (24 h, or the loaded span
 * with --quick). The catalog has no classic histogram, so histogram_quantile runs over a synthetic
 * one built from the per-device disk counters (vda → le="4096", vdb → le="+Inf"): a real bucket
 * shape the function must interpolate and fix up for monotonicity in both engines.
 */
export interface BenchQuery {
  readonly name: string;
  readonly expr: string;
}

const buckets =
  'label_replace(label_replace(rate(svc_vm_disk_reads_completed_total[5m]), "le", "4096", "device", "vda"), "le", "+Inf", "device", "vdb")';

export const suite: readonly BenchQuery[] = [
  { name: "rate", expr: "rate(svc_vm_cpu_seconds_total[5m])" },
  { name: "sum by", expr: "sum by (interface) (rate(svc_vm_network_receive_bytes_total[5m]))" },
  { name: "histogram_quantile", expr: `histogram_quantile(0.9, sum by (le) (${buckets}))` },
  { name: "topk", expr: "topk(5, rate(svc_vm_disk_read_bytes_total[5m]))" },
  { name: "avg_over_time", expr: "avg_over_time(svc_vm_memory_free_bytes[10m])" },
  { name: "subquery", expr: "max_over_time(rate(svc_vm_cpu_seconds_total[5m])[30m:1m])" },
  {
    name: "binary",
    expr: "sum(svc_vm_memory_total_bytes - on(vm) svc_vm_memory_free_bytes) / sum(svc_vm_memory_total_bytes)",
  },
];

/** Labels svc's ingest adds to every series; Prometheus' copy of the data has no such labels. */
export const SVC_ONLY_LABELS: ReadonlySet<string> = new Set(["location", "source", "vm_id"]);
