/**
 * The ingest workload shared by every target: VMs × metrics series at a 30 s interval over a few
 * hours, sent time step by time step as remote-write bodies of at most `seriesPerRequest` series.
 */
import type { WriteRequest } from "@svc/remotewrite";
import { encodeRemoteWriteBody } from "@svc/remotewrite";

export interface Workload {
  readonly series: number;
  readonly samples: number;
  /** bodies[step * groups + g]: group g's series at one time step. */
  readonly bodies: Uint8Array[];
  /** Series groups per step; a sender keeps one group on one connection so per-series order holds. */
  readonly groups: number;
  readonly startMs: number;
  readonly endMs: number;
}

const METRICS = [
  "svc_vm_cpu_seconds_total",
  "svc_vm_cpu_utilization_pct",
  "svc_vm_vcpus",
  "svc_vm_memory_used_bytes",
  "svc_vm_memory_total_bytes",
  "svc_vm_disk_read_bytes_total",
  "svc_vm_disk_written_bytes_total",
  "svc_vm_disk_reads_completed_total",
  "svc_vm_disk_writes_completed_total",
  "svc_vm_network_receive_bytes_total",
  "svc_vm_network_transmit_bytes_total",
  "svc_vm_network_receive_packets_total",
  "svc_vm_network_transmit_packets_total",
  "svc_vm_filesystem_used_bytes",
  "svc_vm_filesystem_size_bytes",
  "svc_vm_last_observation_timestamp_seconds",
  "svc_vm_info",
  "svc_vm_load1",
  "svc_vm_processes",
  "svc_vm_uptime_seconds",
];

/** Deterministic pseudo-random numbers (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function buildWorkload(
  nSeries: number,
  hours: number,
  endMs: number,
  seriesPerRequest = 1000,
): Workload {
  const stepMs = 30_000;
  const steps = Math.round((hours * 3_600_000) / stepMs);
  const startMs = Math.floor(endMs / stepMs) * stepMs - (steps - 1) * stepMs;
  const labels = Array.from({ length: nSeries }, (_, i) => {
    const vm = Math.floor(i / METRICS.length);
    return [
      { name: "__name__", value: METRICS[i % METRICS.length] },
      { name: "location", value: `dc-${vm % 3}` },
      { name: "project_id", value: `p${vm % 50}` },
      { name: "vm", value: `projects/p${vm % 50}/locations/dc-${vm % 3}/vms/vm-${vm}` },
      { name: "vm_id", value: `vm-${vm}` },
    ];
  });
  const rand = rng(42);
  const state = new Float64Array(nSeries).map(() => Math.floor(rand() * 1e6));
  const bodies: Uint8Array[] = [];
  for (let s = 0; s < steps; s++) {
    const t = startMs + s * stepMs;
    for (let from = 0; from < nSeries; from += seriesPerRequest) {
      const timeseries = [];
      for (let i = from; i < Math.min(nSeries, from + seriesPerRequest); i++) {
        const counter = METRICS[i % METRICS.length].endsWith("_total");
        // Counters grow by a random amount; gauges wander with two decimals.
        state[i] = counter
          ? state[i] + Math.floor(rand() * 5000)
          : Math.round(state[i] * (0.99 + rand() * 0.02));
        const value = counter ? state[i] : state[i] / 100;
        timeseries.push({ labels: labels[i], samples: [{ value, timestampMs: t }] });
      }
      const req: WriteRequest = { timeseries };
      bodies.push(encodeRemoteWriteBody(req));
    }
  }
  return {
    groups: Math.ceil(nSeries / seriesPerRequest),
    series: nSeries,
    samples: nSeries * steps,
    bodies,
    startMs,
    endMs: startMs + (steps - 1) * stepMs,
  };
}

/** Indexes of the bodies sender `worker` of `workers` sends, in time order. */
export function bodiesFor(w: Workload, worker: number, workers: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < w.bodies.length; i++) if ((i % w.groups) % workers === worker) out.push(i);
  return out;
}
