/**
 * Series computed at ingest (docs/ingest.md): CPU utilization per sampling interval with the vCPU count of
 * that interval, guest memory used = total − free, and the newest source observation time. Pure state
 * machine, no I/O: the ingest path feeds it one VM's samples of a batch and appends what it returns.
 */

/** A sample, with staleness carried as a flag (NaN payloads do not survive arithmetic). */
export interface Point {
  readonly t: number;
  readonly v: number;
  readonly stale: boolean;
}

export interface VmBatch {
  /** svc_vm_cpu_seconds_total samples, any order. */
  readonly cpuSeconds: Point[];
  /** svc_vm_vcpus samples of the same batch. */
  readonly vcpus: Point[];
  readonly memTotal: Point[];
  readonly memFree: Point[];
  /** Newest timestamp of any sample of this VM and source in the batch (ms), or -Infinity. */
  readonly newestT: number;
}

export interface VmDeriveState {
  lastCpu?: { t: number; v: number };
  /**
   * The interval between the last two CPU samples derived from, ms: a longer wait for the next one means
   * the writer skipped this replica meanwhile (it wrote through another), so ingest reads back.
   */
  lastCpuIntervalMs?: number;
  lastVcpus?: number;
  lastObservationT?: number;
}

/**
 * Why a CPU utilization was not stored (issue 48): `over_capacity`, above 100 % of the VM's vCPUs;
 * `counter_backwards`, the counter fell and the fall read as a reset is above it too (two writers
 * sending different counters for one VM, not a restart).
 */
export type UtilizationRefusal = "over_capacity" | "counter_backwards";
export const UTILIZATION_REFUSALS: readonly UtilizationRefusal[] = ["over_capacity", "counter_backwards"];

/**
 * Above this a utilization cannot be real: 100 % of the vCPUs, with room for timestamps rounded to the
 * millisecond and a counter read a moment apart from its timestamp.
 */
export const MAX_UTILIZATION_PCT = 101;

export interface Derived {
  readonly cpuUtilizationPct: Point[];
  /** Utilizations refused, with why (not in cpuUtilizationPct). */
  readonly refusedUtilization: { readonly t: number; readonly reason: UtilizationRefusal }[];
  readonly memoryUsedBytes: Point[];
  readonly lastObservation: Point[];
}

/**
 * Intervals longer than this produce no utilization point: an average over a telemetry gap would
 * draw a line through time nobody observed. Milliseconds (five minutes, the query lookback).
 */
export const MAX_DERIVE_INTERVAL_MS = 5 * 60_000;

export function emptyBatch(): VmBatch {
  return { cpuSeconds: [], vcpus: [], memTotal: [], memFree: [], newestT: Number.NEGATIVE_INFINITY };
}

/**
 * Derives one VM's series from a batch and advances `state`. `inventoryVcpus` is the fallback when no
 * vCPU sample has been seen. Samples older than the state's last CPU sample (late deliveries behind
 * newer data) are stored raw by the caller but derive nothing: their interval is unknown.
 */
export function derive(batch: VmBatch, state: VmDeriveState, inventoryVcpus: number): Derived {
  // A collector batch usually holds one sample per series: the copies, sorts and maps below are
  // skipped for single samples (this runs for every VM of every request).
  const vcpus = sortedByTime(
    batch.vcpus.length === 1 && usableVcpus(batch.vcpus[0]) ? batch.vcpus : batch.vcpus.filter(usableVcpus),
  );
  const vcpusAt = (t: number): number => {
    let n = state.lastVcpus ?? inventoryVcpus;
    for (const p of vcpus) {
      if (p.t > t) break;
      n = p.v;
    }
    return n;
  };

  const cpuUtilizationPct: Point[] = [];
  const refusedUtilization: { t: number; reason: UtilizationRefusal }[] = [];
  for (const p of sortedByTime(batch.cpuSeconds)) {
    if (p.stale) {
      cpuUtilizationPct.push({ t: p.t, v: Number.NaN, stale: true });
      state.lastCpu = undefined;
      continue;
    }
    const last = state.lastCpu;
    if (last && p.t <= last.t) continue;
    if (last && p.t - last.t <= MAX_DERIVE_INTERVAL_MS) {
      // A counter reset (restart) counts the new value as the delta, as Prometheus' rate() does.
      const delta = p.v >= last.v ? p.v - last.v : p.v;
      const n = vcpusAt(p.t);
      const pct = (delta / (((p.t - last.t) / 1000) * n)) * 100;
      if (pct > MAX_UTILIZATION_PCT)
        refusedUtilization.push({ t: p.t, reason: p.v >= last.v ? "over_capacity" : "counter_backwards" });
      else cpuUtilizationPct.push({ t: p.t, v: pct, stale: false });
    }
    if (last) state.lastCpuIntervalMs = p.t - last.t;
    // In place: one object per VM for good, not a new one per sample to be promoted and collected.
    if (last) {
      last.t = p.t;
      last.v = p.v;
    } else state.lastCpu = { t: p.t, v: p.v };
  }
  const newestVcpus = vcpus[vcpus.length - 1];
  if (newestVcpus) state.lastVcpus = newestVcpus.v;

  const memoryUsedBytes: Point[] = [];
  const one = batch.memFree.length === 1 ? batch.memFree[0] : undefined;
  const free = one ? undefined : new Map(batch.memFree.map((p) => [p.t, p]));
  for (const total of batch.memTotal) {
    const f = one ? (one.t === total.t ? one : undefined) : free!.get(total.t);
    if (!f) continue;
    memoryUsedBytes.push(
      total.stale || f.stale
        ? { t: total.t, v: Number.NaN, stale: true }
        : { t: total.t, v: total.v - f.v, stale: false },
    );
  }
  if (memoryUsedBytes.length > 1) memoryUsedBytes.sort(byTime);

  const lastObservation: Point[] = [];
  if (batch.newestT > (state.lastObservationT ?? Number.NEGATIVE_INFINITY)) {
    lastObservation.push({ t: batch.newestT, v: batch.newestT / 1000, stale: false });
    state.lastObservationT = batch.newestT;
  }
  return { cpuUtilizationPct, refusedUtilization, memoryUsedBytes, lastObservation };
}

const byTime = (a: Point, b: Point) => a.t - b.t;
const usableVcpus = (p: Point) => !p.stale && p.v > 0;

/** Points ascending by time: the input itself when it has at most one, else a sorted copy. */
function sortedByTime(ps: readonly Point[]): readonly Point[] {
  return ps.length <= 1 ? ps : [...ps].sort(byTime);
}
