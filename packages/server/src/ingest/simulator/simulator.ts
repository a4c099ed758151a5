import type { Sample, TimeSeries, WriteRequest } from "@svc/remotewrite";
import { resolveSimulatorOptions, SimulatorError, type SimulatorOptions } from "./options.ts";
import { type CounterState, type SeriesRef, VmModel } from "./vm-model.ts";

/** A simulated hypervisor collector: the remote-write requests it would send for a set of VMs. */
export interface Simulator {
  /**
   * History for [fromMs, toMs] (both inclusive), generated window by window (`backfillWindowMs`) so
   * memory stays bounded; yields requests of at most `maxSamplesPerRequest` samples, oldest window
   * first. Must come before any `tick`, and only once.
   */
  backfill(fromMs: number, toMs: number): AsyncIterable<WriteRequest>;
  /**
   * Live operation: every step after the last generated one up to `nowMs` (inclusive). The first call
   * without a backfill produces only each VM's latest step. Returns [] when no step is due. The
   * returned requests are new and owned by the caller. `nowMs` must not go backwards.
   */
  tick(nowMs: number): WriteRequest[];
  /** Every VM's counters now, by VM name (to resume them after a restart). */
  counters(): Record<string, CounterState>;
  /** Continues the named VMs' counters from saved values; call before backfill or tick. */
  restoreCounters(saved: Record<string, CounterState>): void;
}

/** Builds a deterministic simulator: the same options (seed included) and calls give the same bytes. */
export function createSimulator(
  opts: Pick<SimulatorOptions, "vms"> & Partial<Omit<SimulatorOptions, "vms">>,
): Simulator {
  return new SimulatorImpl(resolveSimulatorOptions(opts));
}

class SimulatorImpl implements Simulator {
  readonly #o: SimulatorOptions;
  readonly #models: VmModel[];
  #started = false;
  #lastNow = Number.NEGATIVE_INFINITY;

  constructor(o: SimulatorOptions) {
    this.#o = o;
    this.#models = o.vms
      .filter((vm) => vm.state.toLowerCase() === "running")
      .map((vm) => new VmModel(vm, o.seed, o.intervalMs, o.scenarios));
    this.#names = o.vms.filter((vm) => vm.state.toLowerCase() === "running").map((vm) => vm.name);
  }

  readonly #names: string[];

  counters(): Record<string, CounterState> {
    return Object.fromEntries(this.#models.map((m, i) => [this.#names[i], m.counters()]));
  }

  restoreCounters(saved: Record<string, CounterState>): void {
    this.#models.forEach((m, i) => {
      const c = saved[this.#names[i]];
      if (c) m.restoreCounters(c);
    });
  }

  async *backfill(fromMs: number, toMs: number): AsyncIterable<WriteRequest> {
    if (this.#started) throw new SimulatorError("backfill must come first and run once");
    if (!(fromMs <= toMs)) throw new SimulatorError("backfill needs fromMs <= toMs");
    this.#started = true;
    this.#lastNow = toMs;
    for (const m of this.#models) {
      m.nextStepMs = m.stepAtOrAfter(fromMs);
      m.skipRestartsBefore(fromMs);
    }
    for (let w = fromMs; w <= toMs; w += this.#o.backfillWindowMs) {
      const until = Math.min(toMs, w + this.#o.backfillWindowMs - 1);
      yield* this.#generate(until);
      // Let the caller's I/O run between windows of a long backfill.
      await new Promise((r) => setImmediate(r));
    }
  }

  tick(nowMs: number): WriteRequest[] {
    if (nowMs < this.#lastNow) throw new SimulatorError(`tick(${nowMs}) goes back before ${this.#lastNow}`);
    this.#lastNow = nowMs;
    if (!this.#started) {
      this.#started = true;
      for (const m of this.#models) {
        m.nextStepMs = m.stepAtOrBefore(nowMs);
        m.skipRestartsBefore(m.nextStepMs);
      }
    }
    return this.#generate(nowMs);
  }

  #generate(untilMs: number): WriteRequest[] {
    const bySeries = new Map<SeriesRef, Sample[]>();
    const emit = (ref: SeriesRef, s: Sample) => {
      let arr = bySeries.get(ref);
      if (!arr) {
        arr = [];
        bySeries.set(ref, arr);
      }
      arr.push(s);
    };
    for (const m of this.#models) m.generate(untilMs, emit);
    return pack(bySeries, this.#o.maxSamplesPerRequest);
  }
}

/** Packs series into requests of at most `max` samples, splitting a long series into ascending runs. */
function pack(bySeries: Map<SeriesRef, Sample[]>, max: number): WriteRequest[] {
  const out: WriteRequest[] = [];
  let cur: TimeSeries[] = [];
  let n = 0;
  for (const [ref, samples] of bySeries) {
    for (let i = 0; i < samples.length; ) {
      if (n === max) {
        out.push({ timeseries: cur });
        cur = [];
        n = 0;
      }
      const take = Math.min(max - n, samples.length - i);
      cur.push({
        labels: ref.labels,
        samples: i === 0 && take === samples.length ? samples : samples.slice(i, i + take),
      });
      n += take;
      i += take;
    }
  }
  if (cur.length > 0) out.push({ timeseries: cur });
  return out;
}
