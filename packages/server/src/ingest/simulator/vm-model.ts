import type { Label, Sample } from "@svc/remotewrite";
import { staleNaN } from "../../storage/interface.ts";
import type { ScenarioEvent, SimVm } from "./options.ts";
import { gauss, hashString, rand } from "./rng.ts";

/** One output series of a VM; `late` entries carry held-back samples in their own TimeSeries. */
export interface SeriesRef {
  readonly labels: readonly Label[];
}

/** Receives samples in step order; per ref, timestamps ascend. */
export type Emit = (ref: SeriesRef, sample: Sample) => void;

const DAY_MS = 86_400_000;
const PAGE = 4096;
/** gauss() slot of the load scenario's noise, apart from every slot the usual curve draws. */
const LOAD_NOISE_SLOT = 1000;

interface DiskCounters {
  readBytes: number;
  writtenBytes: number;
  reads: number;
  writes: number;
}
interface NetCounters {
  rxBytes: number;
  txBytes: number;
  rxPackets: number;
  txPackets: number;
}

/** A VM's counter values, saved by the demo collector so a restart continues them instead of resetting. */
export interface CounterState {
  cpuSeconds: number;
  disks: Record<string, DiskCounters>;
  nets: Record<string, NetCounters>;
}

function sorted(labels: Label[]): Label[] {
  return labels.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/**
 * The telemetry of one VM as a deterministic function of (seed, VM, step): a diurnal utilisation curve
 * with noise drives CPU, disk and network counters; memory follows the same curve with a slowly
 * varying page cache. Scenario events modify the state at the steps they cover.
 */
export class VmModel {
  readonly vm: SimVm;
  /** Next step to generate (ms), or undefined before the first call. */
  nextStepMs: number | undefined;
  readonly #seed: number;
  readonly #key: number;
  readonly #intervalMs: number;
  readonly #phaseMs: number;
  readonly #events: readonly ScenarioEvent[];
  readonly #applied = new Set<ScenarioEvent>();
  // Shape of this VM's load, fixed by its seed.
  readonly #base: number;
  readonly #amp: number;
  readonly #peakHour: number;
  readonly #memBase: number;
  readonly #diskScale: number;
  readonly #netScale: number;
  // State.
  #vcpus: number;
  #memoryBytes: number;
  #cpuSeconds: number;
  #stopped = false;
  readonly #disks: Map<string, DiskCounters> = new Map();
  readonly #nets: Map<string, NetCounters> = new Map();
  readonly #held: { deliverAtMs: number; ref: SeriesRef; sample: Sample }[] = [];
  // Series.
  readonly #cpuRef: SeriesRef;
  readonly #vcpusRef: SeriesRef;
  readonly #memRefs: { total: SeriesRef; free: SeriesRef; cached: SeriesRef };
  readonly #diskRefs = new Map<string, SeriesRef[]>();
  readonly #netRefs = new Map<string, SeriesRef[]>();
  readonly #lateRefs = new Map<SeriesRef, SeriesRef>();

  constructor(vm: SimVm, seed: number, intervalMs: number, events: readonly ScenarioEvent[]) {
    this.vm = vm;
    this.#seed = seed;
    this.#key = hashString(vm.name);
    this.#intervalMs = intervalMs;
    this.#events = events.filter((e) => e.vm === vm.name);
    const r = (slot: number) => rand(seed, this.#key, -1, slot);
    this.#phaseMs = Math.floor(r(0) * intervalMs);
    this.#base = 0.03 + r(1) * 0.35;
    this.#amp = 0.05 + r(2) * 0.35;
    this.#peakHour = 11 + r(3) * 8;
    this.#memBase = 0.2 + r(4) * 0.4;
    this.#diskScale = 2e5 + r(5) * 5e6;
    this.#netScale = 1e5 + r(6) * 3e6;
    this.#vcpus = vm.vcpus;
    this.#memoryBytes = vm.memoryBytes;
    // A VM found running has been up for a while: counters start at a plausible offset.
    const uptimeS = 3600 + r(7) * 30 * 86400;
    this.#cpuSeconds = Math.round(uptimeS * vm.vcpus * this.#base * 1000) / 1000;

    const base = [
      { name: "location", value: vm.location },
      { name: "vm", value: vm.name },
      { name: "vm_id", value: vm.vmId },
    ];
    const ref = (name: string, extra: Label[] = []): SeriesRef => ({
      labels: sorted([{ name: "__name__", value: name }, ...base, ...extra]),
    });
    this.#cpuRef = ref("svc_vm_cpu_seconds_total");
    this.#vcpusRef = ref("svc_vm_vcpus");
    this.#memRefs = {
      total: ref("svc_vm_memory_total_bytes"),
      free: ref("svc_vm_memory_free_bytes"),
      cached: ref("svc_vm_memory_cached_bytes"),
    };
    const disks = r(8) < 0.4 ? ["vda", "vdb"] : ["vda"];
    const nets = r(9) < 0.25 ? ["eth0", "eth1"] : ["eth0"];
    disks.forEach((d, i) => {
      const l = [{ name: "device", value: d }];
      this.#diskRefs.set(d, [
        ref("svc_vm_disk_read_bytes_total", l),
        ref("svc_vm_disk_written_bytes_total", l),
        ref("svc_vm_disk_reads_completed_total", l),
        ref("svc_vm_disk_writes_completed_total", l),
      ]);
      const b = uptimeS * this.#diskScale * (i === 0 ? 1 : 0.3);
      this.#disks.set(d, {
        readBytes: Math.round(b * 0.4),
        writtenBytes: Math.round(b * 0.6),
        reads: Math.round((b * 0.4) / 32768),
        writes: Math.round((b * 0.6) / 16384),
      });
    });
    nets.forEach((n, i) => {
      const l = [{ name: "interface", value: n }];
      this.#netRefs.set(n, [
        ref("svc_vm_network_receive_bytes_total", l),
        ref("svc_vm_network_transmit_bytes_total", l),
        ref("svc_vm_network_receive_packets_total", l),
        ref("svc_vm_network_transmit_packets_total", l),
      ]);
      const b = uptimeS * this.#netScale * (i === 0 ? 1 : 0.1);
      this.#nets.set(n, {
        rxBytes: Math.round(b * 0.7),
        txBytes: Math.round(b * 0.3),
        rxPackets: Math.round((b * 0.7) / 900),
        txPackets: Math.round((b * 0.3) / 600),
      });
    });
  }

  /** The first step time at or after `t` (ms): steps sit at k × interval + this VM's phase. */
  stepAtOrAfter(t: number): number {
    const k = Math.ceil((t - this.#phaseMs) / this.#intervalMs);
    return k * this.#intervalMs + this.#phaseMs;
  }

  /** The last step time at or before `t` (ms). */
  stepAtOrBefore(t: number): number {
    const k = Math.floor((t - this.#phaseMs) / this.#intervalMs);
    return k * this.#intervalMs + this.#phaseMs;
  }

  /** Generates every step from `nextStepMs` up to `untilMs` (inclusive) into `emit`. */
  generate(untilMs: number, emit: Emit): void {
    if (this.nextStepMs === undefined) throw new Error("VmModel: nextStepMs not set");
    for (let t = this.nextStepMs; t <= untilMs; t += this.#intervalMs) {
      this.#step(t, emit);
      this.nextStepMs = t + this.#intervalMs;
    }
  }

  #in(e: { fromMs: number; toMs: number }, t: number): boolean {
    return t >= e.fromMs && t < e.toMs;
  }

  #step(t: number, emit: Emit): void {
    const step = Math.floor(t / this.#intervalMs);
    let reset = false;
    let stopNow = false;
    let gap = false;
    let late: number | undefined;
    let load: number | undefined;
    for (const e of this.#events) {
      if (e.kind === "resize" && t >= e.atMs && !this.#applied.has(e)) {
        this.#applied.add(e);
        this.#vcpus = e.vcpus;
        if (e.memoryBytes !== undefined) this.#memoryBytes = e.memoryBytes;
      } else if (e.kind === "restart" && t >= e.atMs && !this.#applied.has(e)) {
        this.#applied.add(e);
        reset = true;
      } else if (e.kind === "stop" && this.#in(e, t)) stopNow = true;
      else if (e.kind === "gap" && this.#in(e, t)) gap = true;
      else if (e.kind === "late" && this.#in(e, t)) late = e.deliverAtMs;
      else if (e.kind === "load" && this.#in(e, t)) load = Math.max(load ?? 0, e.utilization);
    }

    // A collector's buffer is flushed whatever the VM does now; older samples go first.
    for (let i = 0; i < this.#held.length; ) {
      const h = this.#held[i];
      if (h.deliverAtMs <= t) {
        emit(this.#lateRef(h.ref), h.sample);
        this.#held.splice(i, 1);
      } else i++;
    }

    if (stopNow) {
      if (!this.#stopped) {
        this.#stopped = true;
        const stale = staleNaN();
        for (const ref of this.#allRefs()) emit(ref, { value: stale, timestampMs: t });
      }
      return;
    }
    if (this.#stopped) {
      this.#stopped = false;
      reset = true; // booted again: a new hypervisor process, counters from zero
    }
    if (reset) this.#resetCounters();

    const samples = this.#advance(t, step, load);
    if (gap) return;
    for (const [ref, value] of samples) {
      const sample = { value, timestampMs: t };
      if (late !== undefined) this.#held.push({ deliverAtMs: late, ref, sample });
      else emit(ref, sample);
    }
  }

  counters(): CounterState {
    return {
      cpuSeconds: this.#cpuSeconds,
      disks: Object.fromEntries([...this.#disks].map(([d, c]) => [d, { ...c }])),
      nets: Object.fromEntries([...this.#nets].map(([n, c]) => [n, { ...c }])),
    };
  }

  /**
   * Restarts before `ms` happened in history this run does not generate: their counter reset is
   * already in the counters it starts from, so they must not reset them again at the first step.
   */
  skipRestartsBefore(ms: number): void {
    for (const e of this.#events) if (e.kind === "restart" && e.atMs < ms) this.#applied.add(e);
  }

  /** Continues from saved values (devices this model does not have are ignored). */
  restoreCounters(saved: CounterState): void {
    this.#cpuSeconds = saved.cpuSeconds;
    for (const [d, c] of Object.entries(saved.disks)) if (this.#disks.has(d)) this.#disks.set(d, { ...c });
    for (const [n, c] of Object.entries(saved.nets)) if (this.#nets.has(n)) this.#nets.set(n, { ...c });
  }

  #resetCounters(): void {
    this.#cpuSeconds = 0;
    for (const d of this.#disks.values())
      Object.assign(d, { readBytes: 0, writtenBytes: 0, reads: 0, writes: 0 });
    for (const n of this.#nets.values())
      Object.assign(n, { rxBytes: 0, txBytes: 0, rxPackets: 0, txPackets: 0 });
  }

  /**
   * Advances the counters over the interval ending at `t` and returns every series' value at `t`.
   * `load`: a load scenario's CPU busy fraction for this interval, replacing the usual curve.
   */
  #advance(t: number, step: number, load: number | undefined): [SeriesRef, number][] {
    const s = this.#seed;
    const k = this.#key;
    const dt = this.#intervalMs / 1000;
    const hour = (t % DAY_MS) / 3_600_000;
    const diurnal = 0.5 * (1 + Math.cos((2 * Math.PI * (hour - this.#peakHour)) / 24));
    let u = this.#base + this.#amp * diurnal + 0.04 * gauss(s, k, step, 0);
    if (rand(s, k, step, 1) < 0.005) u = 0.85 + 0.15 * rand(s, k, step, 2); // occasional burst
    u = Math.min(0.99, Math.max(0.005, u));
    // Under load the busy fraction sits at the scenario's level; the noise (|x| < 0.028) keeps 0.97
    // above 0.94, so a "> 90 %" rule sees every point of the range.
    if (load !== undefined)
      u = Math.min(1, Math.max(0.005, load + 0.008 * gauss(s, k, step, LOAD_NOISE_SLOT)));
    this.#cpuSeconds = Math.round((this.#cpuSeconds + u * this.#vcpus * dt) * 1000) / 1000;

    const total = this.#memoryBytes;
    const usedFrac = Math.min(
      0.9,
      Math.max(0.05, this.#memBase + 0.15 * diurnal + 0.01 * gauss(s, k, step, 1) + 0.1 * (load ?? 0)),
    );
    const cacheFrac = Math.min(0.95 - usedFrac, 0.1 + 0.2 * rand(s, k, Math.floor(step / 120), 3));
    const cached = Math.floor((total * cacheFrac) / PAGE) * PAGE;
    const free = Math.max(0, Math.floor((total * (1 - usedFrac)) / PAGE) * PAGE - cached);

    const out: [SeriesRef, number][] = [
      [this.#cpuRef, this.#cpuSeconds],
      [this.#vcpusRef, this.#vcpus],
      [this.#memRefs.total, total],
      [this.#memRefs.free, free],
      [this.#memRefs.cached, cached],
    ];
    let i = 10;
    for (const [dev, c] of this.#disks) {
      const load = (0.2 + u) * Math.exp(0.5 * gauss(s, k, step, i++));
      const rd = Math.round(this.#diskScale * 0.4 * load * dt);
      const wr = Math.round(this.#diskScale * 0.6 * load * Math.exp(0.3 * gauss(s, k, step, i++)) * dt);
      c.readBytes += rd;
      c.writtenBytes += wr;
      c.reads += Math.round(rd / (4096 + 60_000 * rand(s, k, step, i++)));
      c.writes += Math.round(wr / (4096 + 30_000 * rand(s, k, step, i++)));
      const [a, b, cc, d] = this.#diskRefs.get(dev)!;
      out.push([a, c.readBytes], [b, c.writtenBytes], [cc, c.reads], [d, c.writes]);
    }
    for (const [iface, c] of this.#nets) {
      const load = (0.1 + u) * Math.exp(0.4 * gauss(s, k, step, i++));
      const rx = Math.round(this.#netScale * 0.7 * load * dt);
      const tx = Math.round(this.#netScale * 0.3 * load * Math.exp(0.3 * gauss(s, k, step, i++)) * dt);
      c.rxBytes += rx;
      c.txBytes += tx;
      c.rxPackets += Math.round(rx / (600 + 800 * rand(s, k, step, i++)));
      c.txPackets += Math.round(tx / (300 + 900 * rand(s, k, step, i++)));
      const [a, b, cc, d] = this.#netRefs.get(iface)!;
      out.push([a, c.rxBytes], [b, c.txBytes], [cc, c.rxPackets], [d, c.txPackets]);
    }
    return out;
  }

  #allRefs(): SeriesRef[] {
    return [
      this.#cpuRef,
      this.#vcpusRef,
      this.#memRefs.total,
      this.#memRefs.free,
      this.#memRefs.cached,
      ...[...this.#diskRefs.values()].flat(),
      ...[...this.#netRefs.values()].flat(),
    ];
  }

  #lateRef(ref: SeriesRef): SeriesRef {
    let l = this.#lateRefs.get(ref);
    if (!l) {
      l = { labels: ref.labels };
      this.#lateRefs.set(ref, l);
    }
    return l;
  }
}
