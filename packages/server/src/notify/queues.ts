/** One destination's claimed items, attempted one at a time in this order, and what they are rechecked against. */
export interface Queue<T, S> {
  readonly key: string;
  /** Later claims append. */
  readonly items: T[];
  /** The next item to attempt. */
  next: number;
  readonly state: S;
}

/** What the pool asks of its owner (the dispatcher: the outbox, the recheck, the attempt). */
export interface QueueHooks<T, S> {
  /**
   * Claims the next batch. `leaveOut()` names the keys whose queue already holds a full share not yet
   * attempted: call it just before claiming. `exhausted`: nothing more is due now.
   */
  claim(leaveOut: () => string[]): Promise<{ items: T[]; exhausted: boolean }>;
  keyOf(item: T): string;
  /**
   * The state of the queues of `keys` (one for each), read once for a claim; `items` are the claimed
   * and the not yet attempted ones of those keys' open queues.
   */
  readState(keys: string[], items: T[]): Promise<Map<string, S>>;
  /** A claim appended to an open queue: bring its state up to `fresh`. */
  refresh(state: S, fresh: S): void;
  /** Attempts the queue's next item; false when it was not attempted (it is released). */
  attempt(q: Queue<T, S>, item: T): Promise<boolean>;
}

export interface QueuePoolOptions {
  /** Queues worked at once. */
  readonly concurrency: number;
  /** Unattempted items a queue holds before its key is left out of a claim. */
  readonly share: number;
  /** How often an idle worker claims again while others still work, ms. */
  readonly pollIntervalMs: number;
}

/**
 * One pass's per-destination queues and their workers. Each destination's claimed items form one queue,
 * worked by one of `concurrency` workers one item at a time, in order: a slow destination holds up
 * only itself. When a worker finds no queue to take, it claims the next batch while the others go on:
 * items for a destination whose queue is still being worked are appended to it (so its order and
 * one-at-a-time hold), others start new queues. A claim leaves out destinations whose queue already
 * holds a full share not yet attempted, so one slow destination's backlog is not claimed ahead of the
 * others'. A worker idle while others work claims again after a poll interval, so what became due
 * meanwhile does not wait for the slow queue to end.
 *
 * run() resolves, never rejects, once nothing more is due and every queue is done, or after the first
 * failure of a hook (the workers then finish the queue in hand and stop): with the items claimed but not
 * attempted (for the owner to release) and that failure.
 */
export class DestinationQueues<T, S> {
  readonly #hooks: QueueHooks<T, S>;
  readonly #o: QueuePoolOptions;
  /** Queues not yet taken by a worker. */
  readonly #waiting: Queue<T, S>[] = [];
  /** Every unfinished queue (waiting or being worked), by key. */
  readonly #open = new Map<string, Queue<T, S>>();
  /** Claimed but not attempted. */
  readonly #released: T[] = [];
  /** Keys the last claim left out. */
  #leftOut = new Set<string>();
  /** The last claim found nothing more due. */
  #exhausted = false;
  #refilling: Promise<void> | undefined;
  #busy = 0;
  #failure: { err: unknown } | undefined;
  #wake = () => {};
  #changed = this.#nextChange();

  constructor(hooks: QueueHooks<T, S>, options: QueuePoolOptions) {
    this.#hooks = hooks;
    this.#o = options;
  }

  async run(): Promise<{ released: T[]; failure?: { err: unknown } }> {
    await Promise.all(Array.from({ length: this.#o.concurrency }, () => this.#worker()));
    for (const q of this.#open.values()) this.#release(q);
    return { released: this.#released, ...(this.#failure ? { failure: this.#failure } : {}) };
  }

  #nextChange(): Promise<void> {
    return new Promise<void>((r) => {
      this.#wake = r;
    });
  }

  #signal(): void {
    const wake = this.#wake;
    this.#changed = this.#nextChange();
    wake();
  }

  #release(q: Queue<T, S>): void {
    for (const item of q.items.slice(q.next)) this.#released.push(item);
  }

  async #refill(): Promise<void> {
    const { items, exhausted } = await this.#hooks.claim(() => {
      this.#leftOut = new Set(
        [...this.#open.values()].filter((q) => q.items.length - q.next >= this.#o.share).map((q) => q.key),
      );
      return [...this.#leftOut];
    });
    this.#exhausted = exhausted;
    if (items.length === 0) return;
    const byKey = new Map<string, T[]>();
    for (const item of items) {
      const key = this.#hooks.keyOf(item);
      const list = byKey.get(key);
      if (list) list.push(item);
      else byKey.set(key, [item]);
    }
    // One read for every key claimed for, covering the not yet attempted items of its open queue too.
    const unattempted = [...byKey.keys()].flatMap((key) => {
      const q = this.#open.get(key);
      return q ? q.items.slice(q.next) : [];
    });
    const states = await this.#hooks.readState([...byKey.keys()], [...items, ...unattempted]);
    for (const [key, list] of byKey) {
      const st = states.get(key);
      if (st === undefined) throw new Error(`no state read for queue ${key}`);
      const q = this.#open.get(key);
      if (q) {
        q.items.push(...list);
        this.#hooks.refresh(q.state, st);
      } else {
        const fresh = { key, items: list, next: 0, state: st };
        this.#open.set(key, fresh);
        this.#waiting.push(fresh);
      }
    }
  }

  async #work(q: Queue<T, S>): Promise<void> {
    for (; q.next < q.items.length; q.next++) {
      const item = q.items[q.next];
      if (!(await this.#hooks.attempt(q, item))) this.#released.push(item);
    }
  }

  async #worker(): Promise<void> {
    while (!this.#failure) {
      const q = this.#waiting.shift();
      if (q) {
        this.#busy++;
        try {
          await this.#work(q);
        } catch (err) {
          this.#failure ??= { err };
        } finally {
          this.#busy--;
          if (q.next < q.items.length && !this.#failure) {
            // A claim appended to this queue as its last attempt ended: go on with it.
            this.#waiting.unshift(q);
          } else {
            // Not attempted after a failure: released, due again at once after this pass.
            this.#release(q);
            this.#open.delete(q.key);
            // A destination the last claim left out may have more due: claim again.
            if (this.#leftOut.has(q.key)) this.#exhausted = false;
          }
          this.#signal();
        }
      } else if (this.#refilling) await this.#refilling;
      else if (!this.#exhausted) {
        this.#refilling = this.#refill()
          .catch((err: unknown) => {
            this.#failure ??= { err };
          })
          .finally(() => {
            this.#refilling = undefined;
            this.#signal();
          });
        await this.#refilling;
      } else if (this.#busy === 0) return;
      else {
        // Idle while others work (a slow destination's queue, say): claim again after a poll interval.
        let timer: NodeJS.Timeout | undefined;
        const poll = new Promise<void>((r) => {
          timer = setTimeout(() => {
            this.#exhausted = false;
            r();
          }, this.#o.pollIntervalMs);
        });
        await Promise.race([this.#changed, poll]);
        clearTimeout(timer);
      }
    }
  }
}
