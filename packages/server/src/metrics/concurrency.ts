import { SvcError } from "../errors.ts";

export interface ConcurrencyOptions {
  /** Queries of one project running at once. */
  readonly maxConcurrent: number;
  /** Queries of one project waiting for a slot; beyond that the call is refused at once. */
  readonly maxQueued: number;
  /** Longest wait for a slot before refusing, ms. */
  readonly maxWaitMs: number;
  /** Retry-After sent with a refusal, seconds. */
  readonly retryAfterSeconds: number;
}

export const defaultConcurrencyOptions: ConcurrencyOptions = Object.freeze({
  maxConcurrent: 4, // queries
  maxQueued: 8, // queries
  maxWaitMs: 2_000, // 2 s
  retryAfterSeconds: 2, // s
});

/**
 * Per-project query concurrency, shared by every reader a tenant can drive (the Connect RPCs and the
 * Prometheus API), so one project's dashboards cannot starve another's. Over the cap a call waits in
 * a short queue; past it, or past the wait, it fails with resource_exhausted (HTTP 429) and
 * Retry-After.
 */
export interface ProjectLimiter {
  run<T>(projectId: string, fn: () => Promise<T>): Promise<T>;
  /** Running and queued counts, for tests and self-metrics. */
  stats(projectId: string): { running: number; queued: number };
}

interface Slot {
  running: number;
  queue: { resolve: () => void; reject: (e: unknown) => void; timer: NodeJS.Timeout }[];
}

/** Merges overrides into the defaults and checks them; frozen. */
export function resolveConcurrencyOptions(overrides: Partial<ConcurrencyOptions> = {}): ConcurrencyOptions {
  const o = Object.freeze({ ...defaultConcurrencyOptions, ...overrides });
  if (!(o.maxConcurrent >= 1 && o.maxQueued >= 0 && o.maxWaitMs >= 0))
    throw new Error("invalid concurrency options");
  return o;
}

/** The refusal of a query over its project's cap (HTTP 429 with Retry-After), whichever limiter says no. */
export function tooManyQueries(o: ConcurrencyOptions, why: string): SvcError {
  return new SvcError(
    "resource_exhausted",
    `too many concurrent queries for this project (${why}); retry after ${o.retryAfterSeconds} s`,
    {
      reason: "RATE_LIMITED",
      metadata: { retryAfterSeconds: String(o.retryAfterSeconds) },
      retryAfterSeconds: o.retryAfterSeconds,
    },
  );
}

export function createProjectLimiter(overrides: Partial<ConcurrencyOptions> = {}): ProjectLimiter {
  const o = resolveConcurrencyOptions(overrides);
  const slots = new Map<string, Slot>();
  const refuse = (why: string) => tooManyQueries(o, why);

  function release(projectId: string, slot: Slot): void {
    const next = slot.queue.shift();
    if (next) {
      clearTimeout(next.timer);
      next.resolve();
      return;
    }
    slot.running--;
    if (slot.running === 0) slots.delete(projectId);
  }

  return {
    async run(projectId, fn) {
      let slot = slots.get(projectId);
      if (!slot) {
        slot = { running: 0, queue: [] };
        slots.set(projectId, slot);
      }
      if (slot.running < o.maxConcurrent) {
        slot.running++;
      } else {
        if (slot.queue.length >= o.maxQueued)
          throw refuse(`${o.maxConcurrent} running, ${o.maxQueued} queued`);
        const s = slot;
        // The slot passes directly from the finishing query to the first waiter.
        await new Promise<void>((resolve, reject) => {
          const entry = {
            resolve,
            reject,
            timer: setTimeout(() => {
              s.queue.splice(s.queue.indexOf(entry), 1);
              reject(refuse(`waited ${o.maxWaitMs} ms for a slot`));
            }, o.maxWaitMs),
          };
          s.queue.push(entry);
        });
      }
      try {
        return await fn();
      } finally {
        release(projectId, slot);
      }
    },
    stats(projectId) {
      const s = slots.get(projectId);
      return { running: s?.running ?? 0, queued: s?.queue.length ?? 0 };
    },
  };
}
