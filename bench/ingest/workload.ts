/**
 * The ingest workload every target receives: node_exporter-like hypervisor series of VMs (the svc_vm_*
 * catalog names and labels, so svc's ingest accepts them as is), one sample per series every 30 s,
 * each VM on its own scrape offset with millisecond jitter, and churn: every `churnEveryMs` a share
 * of the VMs stops reporting (each of its series gets a staleness marker) and new VMs take their place.
 * Bodies are encoded up front so the sender's own CPU does not vary between targets.
 */
import type { TimeSeries } from "@svc/remotewrite";
import { encodeRemoteWriteBody, pushRemoteWrite } from "@svc/remotewrite";
import { seededRandom } from "../../packages/server/testing/seeded-random.ts";

/** Prometheus' staleness marker (NaN with payload 2), as remote write carries it. */
const STALE_NAN = new Float64Array(new Uint32Array([2, 0x7ff00000]).buffer)[0];

export interface WorkloadOptions {
  /** Active series at any time (rounded up to whole VMs). */
  readonly series: number;
  readonly hours: number;
  /** Series per remote-write request (upper bound; whole VMs per request). */
  readonly seriesPerRequest: number;
  /** Share of VMs replaced at each churn step, 0..1. */
  readonly churnShare: number;
  readonly churnEveryMs: number;
  /** Projects the VMs are spread over. */
  readonly projects: number;
  /** The last sample's time, ms. */
  readonly endMs: number;
}

export interface BenchVm {
  readonly projectId: string;
  readonly location: string;
  readonly vmId: string;
  readonly name: string;
}

export interface Workload {
  readonly opts: WorkloadOptions;
  /** Every VM that reports at some point (the inventory svc needs). */
  readonly vms: readonly BenchVm[];
  readonly seriesPerVm: number;
  /** Series active at the end (what RSS is divided by). */
  readonly activeSeries: number;
  /** Distinct series over the run, churned ones included. */
  readonly totalSeries: number;
  /** Samples sent, staleness markers included. */
  readonly samples: number;
  /**
   * Request bodies per 30 s step. Within a step, request i goes to sender i % senders; a VM keeps its
   * request slot, so one sender carries each series in order. Senders finish a step before the next
   * (a live collector is never an hour behind itself; Prometheus refuses samples older than its head
   * max time − 1 h as out of bounds).
   */
  readonly steps: Uint8Array[][];
  readonly requests: number;
  readonly startMs: number;
  readonly endMs: number;
}

interface MetricSpec {
  readonly name: string;
  readonly kind: "counter" | "gauge";
  readonly label?: readonly [string, readonly string[]];
}

/** Hypervisor-side series of one VM (node_exporter shapes: counters per device/interface). */
const METRICS: readonly MetricSpec[] = [
  { name: "svc_vm_cpu_seconds_total", kind: "counter" },
  { name: "svc_vm_vcpus", kind: "gauge" },
  { name: "svc_vm_memory_total_bytes", kind: "gauge" },
  { name: "svc_vm_memory_free_bytes", kind: "gauge" },
  { name: "svc_vm_memory_cached_bytes", kind: "gauge" },
  ...[
    "svc_vm_disk_read_bytes_total",
    "svc_vm_disk_written_bytes_total",
    "svc_vm_disk_reads_completed_total",
    "svc_vm_disk_writes_completed_total",
  ].map((name) => ({ name, kind: "counter" as const, label: ["device", ["vda", "vdb"]] as const })),
  ...[
    "svc_vm_network_receive_bytes_total",
    "svc_vm_network_transmit_bytes_total",
    "svc_vm_network_receive_packets_total",
    "svc_vm_network_transmit_packets_total",
  ].map((name) => ({ name, kind: "counter" as const, label: ["interface", ["eth0", "eth1"]] as const })),
];

interface SeriesShape {
  readonly name: string;
  readonly extra?: { name: string; value: string };
  readonly kind: "counter" | "gauge" | "vcpus" | "memtotal" | "cpu";
}

const SHAPES: readonly SeriesShape[] = METRICS.flatMap((m): SeriesShape[] => {
  const kind =
    m.name === "svc_vm_vcpus"
      ? "vcpus"
      : m.name === "svc_vm_memory_total_bytes"
        ? "memtotal"
        : m.name === "svc_vm_cpu_seconds_total"
          ? "cpu"
          : m.kind;
  if (!m.label) return [{ name: m.name, kind }];
  const [label, values] = m.label;
  return values.map((value) => ({ name: m.name, kind, extra: { name: label, value } }));
});

interface VmState {
  readonly vm: BenchVm;
  readonly offsetMs: number;
  readonly values: Float64Array;
  readonly vcpus: number;
  readonly memTotal: number;
  /** Sends staleness markers at the next step, then stops. */
  retiring: boolean;
}

export function buildWorkload(opts: WorkloadOptions): Workload {
  const stepMs = 30_000;
  const steps = Math.max(2, Math.round((opts.hours * 3_600_000) / stepMs));
  const startMs = Math.floor(opts.endMs / stepMs) * stepMs - (steps - 1) * stepMs;
  const perVm = SHAPES.length;
  const nVms = Math.ceil(opts.series / perVm);
  const rand = seededRandom(42);
  const vms: BenchVm[] = [];
  const newVm = (): VmState => {
    const i = vms.length;
    const projectId = `bench-${i % opts.projects}`;
    const vm: BenchVm = {
      projectId,
      location: "dc-1",
      vmId: `vm-${i}`,
      name: `projects/${projectId}/locations/dc-1/vms/vm-${i}`,
    };
    vms.push(vm);
    const values = new Float64Array(perVm);
    for (let k = 0; k < perVm; k++) values[k] = Math.floor(rand() * 1e6);
    const memTotal = (2 + Math.floor(rand() * 15)) * 2 ** 30;
    return {
      vm,
      offsetMs: Math.floor(rand() * stepMs),
      values,
      vcpus: 1 + Math.floor(rand() * 8),
      memTotal,
      retiring: false,
    };
  };
  let active: VmState[] = Array.from({ length: nVms }, newVm);
  const churnSteps = Math.max(1, Math.round(opts.churnEveryMs / stepMs));
  const vmsPerRequest = Math.max(1, Math.floor(opts.seriesPerRequest / perVm));
  const bodies: Uint8Array[][] = [];
  let samples = 0;
  for (let s = 0; s < steps; s++) {
    const base = startMs + s * stepMs;
    if (s > 0 && s % churnSteps === 0 && opts.churnShare > 0) {
      const k = Math.round(active.length * opts.churnShare);
      for (let i = 0; i < k; i++) active[Math.floor(rand() * active.length)].retiring = true;
    }
    // A step's samples fall in [base − 30 s, base): the scrape offset spreads VMs over the interval.
    const stepSeries: TimeSeries[][] = [];
    let batch: TimeSeries[] = [];
    let inBatch = 0;
    const next: VmState[] = [];
    for (const st of active) {
      const jitter = Math.floor(rand() * 40) - 20;
      const t = Math.min(base - stepMs + st.offsetMs + jitter, opts.endMs);
      for (let k = 0; k < perVm; k++) {
        const shape = SHAPES[k];
        let value: number;
        if (st.retiring) value = STALE_NAN;
        else if (shape.kind === "vcpus") value = st.vcpus;
        else if (shape.kind === "memtotal") value = st.memTotal;
        else if (shape.kind === "cpu") {
          st.values[k] += Math.round(rand() * st.vcpus * 3000) / 100; // seconds with 2 decimals
          value = Math.round(st.values[k] * 100) / 100;
        } else if (shape.kind === "counter") {
          st.values[k] += Math.floor(rand() * 5000);
          value = st.values[k];
        } else {
          // Gauges wander; memory gauges are whole bytes.
          st.values[k] = Math.round(st.values[k] * (0.99 + rand() * 0.02));
          value = st.values[k] * 4096;
        }
        const labels = [
          { name: "__name__", value: shape.name },
          ...(shape.extra ? [shape.extra] : []),
          { name: "vm", value: st.vm.name },
        ];
        batch.push({ labels, samples: [{ value, timestampMs: t }] });
        samples++;
      }
      if (st.retiring) next.push(newVm());
      else next.push(st);
      if (++inBatch === vmsPerRequest) {
        stepSeries.push(batch);
        batch = [];
        inBatch = 0;
      }
    }
    if (batch.length > 0) stepSeries.push(batch);
    active = next;
    bodies.push(stepSeries.map((ts) => encodeRemoteWriteBody({ timeseries: ts, metadata: [] })));
  }
  return {
    opts,
    vms,
    seriesPerVm: perVm,
    activeSeries: nVms * perVm,
    totalSeries: vms.length * perVm,
    samples,
    steps: bodies,
    requests: bodies.reduce((n, l) => n + l.length, 0),
    startMs: startMs - stepMs,
    endMs: opts.endMs,
  };
}

/** Requests a target refused while the workload was sent, and the first refusal's answer. */
export interface SendFailures {
  count: number;
  first: string;
}

/**
 * Sends one step's bodies to `url` from `concurrency` senders (request i by sender i % concurrency, so
 * each series stays in order) and resolves when all are answered; refusals are counted in `failed`.
 */
export async function sendStep(
  url: string,
  token: string,
  step: readonly Uint8Array[],
  concurrency: number,
  failed: SendFailures,
): Promise<void> {
  await Promise.all(
    Array.from({ length: concurrency }, async (_, k) => {
      for (let i = k; i < step.length; i += concurrency) {
        const r = await pushRemoteWrite(url, token, step[i], { timeoutMs: 120_000 });
        if (r.status >= 300) {
          failed.count++;
          failed.first ||= `${r.status} ${r.body.slice(0, 300)}`;
        }
      }
    }),
  );
}
