/**
 * The sending side's loop, shared by the guest agent and the hypervisor collector: one drain of the
 * spool at a time; a drain that asks for a retry (svc unreachable, busy, or refusing) or throws runs again
 * after a backoff that starts at `minMs` and doubles up to `maxMs`, and a success resets it.
 */
export interface SendLoopOptions {
  readonly minMs: number;
  readonly maxMs: number;
  /** A drain that threw (a local failure: disk, a corrupt record); the backlog stays and is retried. */
  readonly onError: (err: unknown) => void;
}

export class SendLoop {
  readonly #drain: () => Promise<"done" | "retry">;
  readonly #o: SendLoopOptions;
  #sending: Promise<void> | undefined;
  #retry: NodeJS.Timeout | undefined;
  #backoffMs = 0;
  #stopped = false;
  /** Drains that ended in a retry. */
  retries = 0;

  constructor(drain: () => Promise<"done" | "retry">, o: SendLoopOptions) {
    this.#drain = drain;
    this.#o = o;
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  /** Starts a drain now unless one runs, a retry is pending, or the loop stopped. */
  kick(): void {
    if (this.#sending || this.#retry || this.#stopped) return;
    this.#sending = this.#drain()
      .then((r) => {
        if (r === "retry") this.#scheduleRetry();
      })
      .catch((err: unknown) => {
        this.#o.onError(err);
        this.#scheduleRetry();
      })
      .finally(() => {
        this.#sending = undefined;
      });
  }

  /** A batch went through: the next failure starts from the shortest delay again. */
  succeeded(): void {
    this.#backoffMs = 0;
  }

  /** Resolves when no drain runs (the spool is empty or the next drain waits on a retry delay). */
  async flush(): Promise<void> {
    while (this.#sending) await this.#sending;
  }

  /** No more drains; waits for a running one. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#retry);
    await this.flush();
  }

  #scheduleRetry(): void {
    this.retries++;
    this.#backoffMs = Math.min(this.#o.maxMs, this.#backoffMs === 0 ? this.#o.minMs : this.#backoffMs * 2);
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      this.kick();
    }, this.#backoffMs);
  }
}
