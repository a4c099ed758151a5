/** A VM the simulated hypervisor runs. */
export interface SimVm {
  /** Full VM resource name (the `vm` label). */
  readonly name: string;
  readonly vmId: string;
  /** Data center, e.g. "dc-1". */
  readonly location: string;
  readonly vcpus: number;
  readonly memoryBytes: number;
  /** Only "running" (case-insensitive) produces telemetry; any other state produces none. */
  readonly state: string;
}

/**
 * Scenario events on chosen VMs. Times are ms; ranges are [fromMs, toMs) (start inclusive, end exclusive).
 * - resize: from the first step at or after `atMs` the VM has `vcpus` (and `memoryBytes` if given);
 *   counters continue.
 * - restart: counters reset to near zero at the first step at or after `atMs`.
 * - stop: the VM is stopped in the range: at the first step of the range every series gets a
 *   staleness marker, then no samples; it boots again at the end (counters reset).
 * - gap: the VM runs (counters advance) but no telemetry is emitted in the range; no markers.
 * - late: samples of the range are held back and emitted, with their original timestamps, in the first
 *   batch whose step is at or after `deliverAtMs` (as a collector's buffer would).
 * - load: the VM runs hot in the range: the CPU busy fraction of every sampling interval ending at a
 *   step of the range is `utilization` (0 < utilization ≤ 1) with a little noise (±0.03 at most,
 *   never above 1), instead of its usual curve; disk and network follow, memory use rises a little.
 *   Overlapping loads: the highest wins. Counters continue; after the range the usual curve returns.
 */
export type ScenarioEvent =
  | {
      readonly kind: "resize";
      readonly vm: string;
      readonly atMs: number;
      readonly vcpus: number;
      readonly memoryBytes?: number;
    }
  | { readonly kind: "restart"; readonly vm: string; readonly atMs: number }
  | { readonly kind: "stop"; readonly vm: string; readonly fromMs: number; readonly toMs: number }
  | { readonly kind: "gap"; readonly vm: string; readonly fromMs: number; readonly toMs: number }
  | {
      readonly kind: "late";
      readonly vm: string;
      readonly fromMs: number;
      readonly toMs: number;
      readonly deliverAtMs: number;
    }
  | {
      readonly kind: "load";
      readonly vm: string;
      readonly fromMs: number;
      readonly toMs: number;
      /** CPU busy fraction of the VM's vCPUs in the range, in (0, 1]. */
      readonly utilization: number;
    };

export interface SimulatorOptions {
  readonly vms: readonly SimVm[];
  /** Seeds every random choice; same seed, VMs and calls → identical output. */
  readonly seed: number;
  /** Sampling interval, ms. Default 30,000. */
  readonly intervalMs: number;
  readonly scenarios: readonly ScenarioEvent[];
  /** Upper bound of samples in one WriteRequest (backfill and tick), default 20,000. */
  readonly maxSamplesPerRequest: number;
  /** Backfill generates history in windows of this length, ms (bounds memory); default 1 hour. */
  readonly backfillWindowMs: number;
}

export const defaultSimulatorOptions = {
  seed: 1,
  intervalMs: 30_000,
  scenarios: [],
  maxSamplesPerRequest: 20_000,
  backfillWindowMs: 3_600_000,
} as const;

export class SimulatorError extends Error {
  override readonly name = "SimulatorError";
}

/** Merges defaults, validates once, freezes. Throws SimulatorError naming the bad field. */
export function resolveSimulatorOptions(
  o: Pick<SimulatorOptions, "vms"> & Partial<Omit<SimulatorOptions, "vms">>,
): SimulatorOptions {
  const r: SimulatorOptions = { ...defaultSimulatorOptions, ...o };
  const posInt = (v: number, what: string) => {
    if (!Number.isSafeInteger(v) || v <= 0) throw new SimulatorError(`${what} must be a positive integer`);
  };
  posInt(r.intervalMs, "intervalMs");
  posInt(r.maxSamplesPerRequest, "maxSamplesPerRequest");
  posInt(r.backfillWindowMs, "backfillWindowMs");
  if (!Number.isSafeInteger(r.seed)) throw new SimulatorError("seed must be an integer");
  const names = new Set<string>();
  for (const vm of r.vms) {
    if (!vm.name || !vm.vmId || !vm.location)
      throw new SimulatorError("every VM needs name, vmId and location");
    if (names.has(vm.name)) throw new SimulatorError(`VM ${vm.name} is listed twice`);
    names.add(vm.name);
    posInt(vm.vcpus, `${vm.name}: vcpus`);
    posInt(vm.memoryBytes, `${vm.name}: memoryBytes`);
  }
  for (const e of r.scenarios) {
    if (!names.has(e.vm)) throw new SimulatorError(`scenario ${e.kind} names unknown VM ${e.vm}`);
    if (e.kind === "resize") posInt(e.vcpus, `resize of ${e.vm}: vcpus`);
    if ("fromMs" in e && !(e.fromMs < e.toMs))
      throw new SimulatorError(`${e.kind} of ${e.vm}: fromMs must be < toMs`);
    if (e.kind === "late" && e.deliverAtMs < e.toMs) {
      throw new SimulatorError(`late of ${e.vm}: deliverAtMs must be >= toMs`);
    }
    if (e.kind === "load" && !(e.utilization > 0 && e.utilization <= 1)) {
      throw new SimulatorError(`load of ${e.vm}: utilization must be > 0 and <= 1`);
    }
  }
  return Object.freeze(r);
}
