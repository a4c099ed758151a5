/**
 * The skeleton of a background worker (the notification dispatcher's; written so the alert evaluator
 * and the history purges can use it too). Its contract:
 *
 * - `serial(fn)` runs `fn` once whatever was queued before it has ended, however that ended: one run at a
 *   time, in call order. Its promise is `fn`'s.
 * - `start()` calls `onTimer` every `intervalMs` (`nudge()` when no onTimer is given) until `stop()`;
 *   the timer is unref'd, so it never keeps the process alive. Starting a started worker does nothing
 *   (it answers false).
 * - `nudge()` calls `onNudge` on the next turn of the event loop; nudges before that turn make one call.
 *   A rejection of `onNudge` goes to `onError`, never further.
 * - `stop()` ends the timer and resolves once every run queued through `serial` before it was called has
 *   ended; it never rejects. A nudge after stop still runs (a test drives a stopped worker by hand).
 *
 * What a run does, how it is timed against the clock it reads, and what it reports are the owner's.
 */
export interface BackgroundOptions {
  readonly intervalMs: number;
  /** What a nudge does; usually `() => worker.serial(pass)`. */
  readonly onNudge: () => Promise<unknown>;
  /** What the timer does; `nudge()` when not given. Must not throw (catch inside). */
  readonly onTimer?: () => void;
  readonly onError: (err: unknown) => void;
}

export class BackgroundWorker {
  readonly #o: BackgroundOptions;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<unknown> = Promise.resolve();
  #nudged = false;

  constructor(options: BackgroundOptions) {
    this.#o = options;
  }

  get started(): boolean {
    return this.#timer !== undefined;
  }

  start(): boolean {
    if (this.#timer) return false;
    this.#timer = setInterval(this.#o.onTimer ?? (() => this.nudge()), this.#o.intervalMs);
    this.#timer.unref();
    return true;
  }

  nudge(): void {
    if (this.#nudged) return;
    this.#nudged = true;
    setImmediate(() => {
      this.#nudged = false;
      void this.#o.onNudge().catch(this.#o.onError);
    });
  }

  serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#running.catch(() => {}).then(fn);
    this.#running = run;
    return run;
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#running.catch(() => {});
  }
}

/**
 * Housekeeping at most once per `everyMs` of the caller's clock (the hourly history purges): `run(atMs,
 * fn)` calls `fn` when `everyMs` or more have passed since the atMs of the last call that ran (at the
 * first call with any atMs ≥ everyMs), and hands a rejection to `onError`.
 */
export class Periodic {
  #last = 0;

  constructor(
    readonly everyMs: number,
    readonly onError: (err: unknown) => void,
  ) {}

  async run(atMs: number, fn: () => Promise<unknown>): Promise<void> {
    if (atMs - this.#last < this.everyMs) return;
    this.#last = atMs;
    try {
      await fn();
    } catch (err) {
      this.onError(err);
    }
  }
}
