import type { Logger } from "pino";
import type { ShardLeases } from "../cluster/shards.ts";
import { BackgroundWorker, Periodic } from "../lifecycle/background.ts";
import type { AlertMetrics } from "./instrumentation.ts";

/**
 * When the evaluator runs (Prometheus' seam: the rule manager's group loop, apart from what a cycle
 * does): the cycle timer, the shard leases' keeper between cycles, nudges to apply saved revisions, the
 * stop, and one cycle or apply at a time. The cycle and the apply themselves are the evaluator's
 * (evaluator.ts). The timers, nudges and one-run-at-a-time are lifecycle/background.ts's helper, as the
 * dispatcher's are.
 */

/** What the schedule runs, over the shards held (undefined: every project). */
export interface ScheduledWork<R> {
  cycle(atMs: number, held: ReadonlySet<number> | undefined): Promise<R>;
  apply(atMs: number, held: ReadonlySet<number> | undefined): Promise<number>;
}

export interface ScheduleDeps {
  readonly now: () => number;
  readonly log: Logger;
  readonly intervalMs: number;
  /** With several replicas: the shards of projects this one evaluates (cluster/shards.ts). */
  readonly shards?: ShardLeases;
  readonly instruments?: AlertMetrics;
}

export class CycleSchedule<R> {
  readonly #deps: ScheduleDeps;
  readonly #work: ScheduledWork<R>;
  /** The cycle timer, nudges (applies) and one cycle or apply at a time (lifecycle/background.ts). */
  readonly #worker: BackgroundWorker;
  /** Renews the shard leases between cycles and evaluates shards taken over (issue 48). */
  readonly #keeper: BackgroundWorker | undefined;
  /** The shards the last cycles evaluated (undefined before the first, or without shards). */
  #evaluated: ReadonlySet<number> | undefined;
  /** performance.now() when the last full cycle began. */
  #lastCycleMs: number | undefined;
  #cycling = false;
  /** A timer's cycle (of every shard held) runs or waits to. */
  #ticking = false;

  constructor(deps: ScheduleDeps, work: ScheduledWork<R>) {
    this.#deps = deps;
    this.#work = work;
    const { log, shards } = deps;
    this.#worker = new BackgroundWorker({
      intervalMs: deps.intervalMs,
      onTimer: () => this.#tickLogged(),
      onNudge: () => this.#apply(),
      onError: (err) => log.error({ err }, "applying alert rule revisions failed"),
    });
    // The keeper's runs are not serialised with the cycles: it renews leases while a long cycle runs.
    // Its timer runs #keep at once (not on a nudge's next turn), so none starts after stop().
    const keepFailed = (err: unknown) => log.error({ err }, "renewing the evaluator's shard leases failed");
    this.#keeper =
      shards &&
      new BackgroundWorker({
        intervalMs: shards.renewIntervalMs,
        onTimer: () => void this.#keep().catch(keepFailed),
        onNudge: () => this.#keep(),
        onError: keepFailed,
      });
  }

  start(): void {
    if (!this.#worker.start()) return;
    // A starting replica takes its share and evaluates it at once, not a cycle later (issue 48).
    setImmediate(() => this.#tickLogged());
    this.#keeper?.start();
  }

  #tickLogged(): void {
    void this.tick().catch((err: unknown) => this.#deps.log.error({ err }, "alert evaluation cycle failed"));
  }

  /**
   * What the timer runs: a cycle of the shards this process holds (all without shards); undefined when
   * it holds none, or while the previous cycle still runs.
   */
  async tick(atMs?: number): Promise<R | undefined> {
    const { shards, now } = this.#deps;
    // Leases are renewed even while a long cycle runs, so a slow cycle does not hand its shards over.
    const held = shards ? await shards.acquire(now()) : undefined;
    this.#held(held);
    // A cycle still running (longer than the interval) is not queued behind: the next tick evaluates.
    // One of shards just taken over (#keep) is short: this cycle waits for it rather than be skipped.
    if (this.#ticking || held?.size === 0) return undefined;
    this.#ticking = true;
    this.#lastCycleMs = performance.now();
    let report: R;
    try {
      report = await this.cycle(atMs ?? now(), held);
    } finally {
      this.#ticking = false;
    }
    this.#evaluated = held;
    // Shards beyond this replica's share (a replica joined) go back right after being evaluated, so
    // the replica taking them evaluates them well within a cycle of this one (cluster/shards.ts).
    if (shards) this.#held(await shards.acquire(now(), { shed: true }));
    return report;
  }

  /**
   * Between cycles, every renewIntervalMs: renews the leases, takes free or expired shards (a replica
   * stopped or died) and evaluates the ones taken at once rather than at the next cycle.
   */
  async #keep(): Promise<void> {
    const { shards, now } = this.#deps;
    if (!shards) return;
    const held = await shards.acquire(now());
    this.#held(held);
    const fresh = new Set([...held].filter((s) => !this.#evaluated?.has(s)));
    if (fresh.size === 0 || this.#cycling || !this.#worker.started) return;
    await this.cycle(now(), fresh);
    this.#evaluated = new Set([...(this.#evaluated ?? []), ...fresh]);
  }

  #held(held: ReadonlySet<number> | undefined): void {
    const m = this.#deps.instruments;
    if (m) {
      m.state.holdsLease = held === undefined || held.size > 0;
      if (this.#deps.shards) m.state.shards = this.#deps.shards.status;
    }
    if (held && this.#evaluated) this.#evaluated = new Set([...this.#evaluated].filter((s) => held.has(s)));
  }

  /** Asks for pending revisions to be applied soon, without waiting for the next cycle. */
  nudge(): void {
    this.#worker.nudge();
  }

  /** Revisions are applied by their project's shard holder; another replica's save waits for it. */
  async #apply(): Promise<number> {
    const { shards, now } = this.#deps;
    const held = shards ? await shards.acquire(now()) : undefined;
    return held?.size === 0 ? 0 : this.serial(() => this.#work.apply(now(), held));
  }

  /** Stops the timers and waits for a running cycle. */
  async stop(): Promise<void> {
    const started = this.#worker.started;
    // Both timers end before anything is awaited.
    const keeper = this.#keeper?.stop();
    await this.#worker.stop();
    await keeper;
    // A stopping replica evaluates its shards once more when its last cycle began more than half a
    // cycle ago, so whoever takes them over after the release evaluates them within a cycle.
    const { shards, now } = this.#deps;
    const last = this.#lastCycleMs;
    const half = this.#deps.intervalMs / 2;
    if (started && shards && this.#evaluated?.size && last !== undefined && performance.now() - last > half)
      await this.cycle(now(), this.#evaluated).catch((err: unknown) =>
        this.#deps.log.error({ err }, "the last alert evaluation before stopping failed"),
      );
  }

  /** A cycle of the shards held (undefined: every project), after the cycle or apply running. */
  cycle(atMs: number, held: ReadonlySet<number> | undefined): Promise<R> {
    return this.serial(async () => {
      this.#cycling = true;
      try {
        return await this.#work.cycle(atMs, held);
      } finally {
        this.#cycling = false;
      }
    });
  }

  /** One cycle or apply at a time: they write the same rows. */
  serial<T>(fn: () => Promise<T>): Promise<T> {
    return this.#worker.serial(fn);
  }
}

/**
 * Housekeeping at most once per periodMs of the times it is offered (the cycles' clock), starting with
 * the first; a failure is logged and waits for the next period.
 */
export function periodic(
  periodMs: number,
  run: (atMs: number) => Promise<void>,
  log: Logger,
  what: string,
): (atMs: number) => Promise<void> {
  const p = new Periodic(periodMs, (err) => log.warn({ err }, `${what} failed`));
  return (atMs) => p.run(atMs, () => run(atMs));
}
