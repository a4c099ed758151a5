/**
 * A pool of worker threads that evaluate PromQL off the event loop. The main thread keeps the store:
 * a worker's selects come back here; the in-memory part is read (and counted against `maxSamples`)
 * on the main thread and handed over as transferable buffers, and the TSDB's immutable blocks are
 * read by the worker itself (Querier.selectParts), while the unchanged engine runs in the worker.
 * The result comes back packed, or (…Encoded) as the Prometheus API's body, built and compressed in
 * the worker. The deadline terminates the worker (the work really stops) and the pool starts a
 * fresh one.
 *
 * Fairness: queued queries are taken round-robin across tenants, and with two or more workers one
 * tenant never holds more than all but one of them, so another project always finds a worker free
 * of the first one's queries. A query that waits longer than `maxQueueWaitMs` for a worker is
 * refused with QueryOverloadError (HTTP 429), not left to time out.
 */
import { availableParallelism } from "node:os";
import { MessageChannel, type MessagePort, type Worker } from "node:worker_threads";
import { startWorker } from "../../lifecycle/worker-script.ts";
import { columnsOf } from "../../storage/columns.ts";
import type { Queryable } from "../../storage/interface.ts";
import type { Expr } from "../ast.ts";
import type { QueryResult } from "../engine/engine.ts";
import { QueryOverloadError, QueryTimeoutError, TooManySamplesError } from "../errors.ts";
import { defaultEngineOptions, type QueryOptions } from "../options.ts";
import {
  type AnswerEncoding,
  type EncodedAnswer,
  fromWire,
  type JobMessage,
  packColumns,
  packedTransfer,
  type SelectReply,
  toWire,
  unpackResult,
  type WorkerEngineOptions,
  type WorkerInit,
  type WorkerMessage,
} from "./protocol.ts";
import { threadCpuSeconds } from "./thread-cpu.ts";

/**
 * Series whose labels one worker keeps per store (a select's labels cross once per worker, not once
 * per query); past it the worker starts over. About 1 KB each in the worker's heap.
 */
const LABELS_KEPT_PER_WORKER = 100_000;

export interface QueryPoolOptions {
  /** Worker threads kept warm once started (started on first use, or by `warm()`). */
  readonly workers: number;
  /** Raw samples one query may load from the store (counted as they are read), samples. */
  readonly maxSamples: number;
  /** Deadline of a query without `timeoutMs` of its own, ms (0: none). Includes the wait for a worker. */
  readonly timeoutMs: number;
  /** Longest wait for a free worker before refusing with QueryOverloadError, ms. */
  readonly maxQueueWaitMs: number;
  /** Retry-After of that refusal, seconds. */
  readonly retryAfterSeconds: number;
  /** The engine's own options in each worker (its deadline is the pool's). */
  readonly engine: WorkerEngineOptions;
  /**
   * Told each finished query's CPU seconds (its worker thread's, plus the event loop's reads for it)
   * and its tenant, unless the query asked not to be charged (`charge: false`).
   */
  readonly onCpu?: (tenant: string, seconds: number) => void;
}

export const defaultQueryPoolOptions: QueryPoolOptions = Object.freeze({
  workers: Math.max(1, availableParallelism()), // threads
  maxSamples: defaultEngineOptions.maxSamples, // samples
  timeoutMs: defaultEngineOptions.timeoutMs, // ms
  maxQueueWaitMs: 2_000, // ms
  retryAfterSeconds: 2, // s
  engine: Object.freeze({
    lookbackDeltaMs: defaultEngineOptions.lookbackDeltaMs,
    maxPointsPerSeries: defaultEngineOptions.maxPointsPerSeries,
    maxSamples: defaultEngineOptions.maxSamples,
    defaultSubqueryStepMs: defaultEngineOptions.defaultSubqueryStepMs,
  }),
});

/** Per-query options of the pool: the engine's, plus who asks (the unit of fairness). */
export interface PoolQueryOptions extends QueryOptions {
  /** Queries of different tenants are served round-robin; absent: one shared tenant. */
  readonly tenant?: string;
}

export interface QueryPoolStats {
  /** Configured size. */
  readonly size: number;
  /** Live workers (starting or ready). */
  readonly workers: number;
  /** Queries being evaluated now. */
  readonly running: number;
  /** Queries waiting for a worker. */
  readonly queued: number;
  /** Workers started since the pool was created. */
  readonly started: number;
  /** Workers terminated at a query's deadline (or abort) and replaced. */
  readonly replaced: number;
  /** Queries refused with QueryOverloadError after waiting maxQueueWaitMs for a worker. */
  readonly rejected: number;
}

export interface QueryPool {
  /** The options it was created with (an inline engine beside it uses the same limits). */
  readonly options: QueryPoolOptions;
  /** As Engine.instantQuery, in a worker; rejects with the engine's errors. */
  instantQuery(
    queryable: Queryable,
    expr: Expr,
    timeMs: number,
    opts?: PoolQueryOptions,
  ): Promise<QueryResult>;
  /** As Engine.rangeQuery (ms, inclusive), in a worker. */
  rangeQuery(
    queryable: Queryable,
    expr: Expr,
    startMs: number,
    endMs: number,
    stepMs: number,
    opts?: PoolQueryOptions,
  ): Promise<QueryResult>;
  /** As instantQuery, answered as the Prometheus API's encoded body, built in the worker. */
  instantQueryEncoded(
    queryable: Queryable,
    expr: Expr,
    timeMs: number,
    encoding: AnswerEncoding,
    opts?: PoolQueryOptions,
  ): Promise<EncodedAnswer>;
  /** As rangeQuery, answered as the Prometheus API's encoded body, built in the worker. */
  rangeQueryEncoded(
    queryable: Queryable,
    expr: Expr,
    startMs: number,
    endMs: number,
    stepMs: number,
    encoding: AnswerEncoding,
    opts?: PoolQueryOptions,
  ): Promise<EncodedAnswer>;
  /**
   * Whether a query of `tenant` submitted now would start at once: a started worker is free, the
   * tenant is under its share, and none of its queries waits. (The Prometheus API evaluates a small
   * query inline when not: metrics/backend.ts.)
   */
  hasFreeWorker(tenant: string): boolean;
  /**
   * Starts `workers` of the pool's workers now (default: all; those already started count), and resolves
   * once every started worker can take queries. The others start when a query needs them.
   */
  warm(workers?: number): Promise<void>;
  stats(): QueryPoolStats;
  /** Terminates the workers; queued and running queries are rejected. */
  close(): Promise<void>;
}

/**
 * Workers one tenant's queries may hold at once in a pool of `size`: all but one when there are two or
 * more, so another tenant always finds one free of them (the fairness rule above).
 */
export function workersPerTenant(size: number): number {
  return size > 1 ? size - 1 : 1;
}

export function createQueryPool(overrides: Partial<QueryPoolOptions> = {}): QueryPool {
  const o = Object.freeze({ ...defaultQueryPoolOptions, ...overrides });
  for (const k of ["workers", "maxSamples", "maxQueueWaitMs", "retryAfterSeconds"] as const)
    if (!Number.isSafeInteger(o[k]) || o[k] < 1)
      throw new RangeError(`query pool option ${k} must be a positive integer, got ${o[k]}`);
  if (!(o.timeoutMs >= 0))
    throw new RangeError(`query pool option timeoutMs must be ≥ 0, got ${o.timeoutMs}`);
  return new QueryPoolImpl(o);
}

declare global {
  /** Set by the production build (scripts/build-server.mjs): the bundled worker, beside main.js. */
  var SVC_QUERY_WORKER_BUNDLE: string | undefined;
}

// The production bundle names its worker's file; from the sources, lifecycle/worker-script.ts bundles it.
const WORKER_SOURCE = new URL("./worker.ts", import.meta.url);

interface Job {
  readonly msg: JobMessage;
  readonly tenant: string;
  readonly queryable: Queryable;
  readonly resolve: (r: QueryResult | EncodedAnswer) => void;
  readonly reject: (e: unknown) => void;
  slot?: Slot;
  /** Samples handed to the worker so far. */
  loaded: number;
  /** CPU seconds spent on the query so far (the event loop's reads; the worker's comes at the end). */
  cpuSeconds: number;
  /** Whether its CPU is told to onCpu. */
  readonly charged: boolean;
  /** An error raised here (a failed read) that the worker's failure stands for. */
  failure?: unknown;
  /** Lets the store delete the blocks lent to the worker for this query (Querier.selectParts). */
  readonly releases: (() => void)[];
  done: boolean;
  timers: NodeJS.Timeout[];
  unlisten?: () => void;
}

interface Slot {
  readonly worker: Worker;
  /** Per store (the pool's number for it), the series keys whose labels this worker holds. */
  readonly knownLabels: Map<number, Set<number>>;
  readonly flag: Int32Array;
  readonly replies: MessagePort;
  ready: boolean;
  job?: Job;
}

class QueryPoolImpl implements QueryPool {
  readonly #o: QueryPoolOptions;

  get options(): QueryPoolOptions {
    return this.#o;
  }
  readonly #slots = new Set<Slot>();
  /** Waiting jobs per tenant, in the round-robin order of tenants. */
  readonly #queues = new Map<string, Job[]>();
  readonly #running = new Map<string, number>();
  #nextId = 1;
  #started = 0;
  #replaced = 0;
  #rejected = 0;
  #closed = false;
  #readyWaiters: (() => void)[] = [];
  /** A number per store queried, scoping its series keys in the workers' label caches. */
  readonly #stores = new WeakMap<Queryable, number>();
  #nextStore = 1;

  constructor(o: QueryPoolOptions) {
    this.#o = o;
  }

  instantQuery(queryable: Queryable, expr: Expr, timeMs: number, opts?: PoolQueryOptions) {
    return this.#submit(queryable, this.#instant(expr, timeMs, opts), opts) as Promise<QueryResult>;
  }

  rangeQuery(
    queryable: Queryable,
    expr: Expr,
    startMs: number,
    endMs: number,
    stepMs: number,
    opts?: PoolQueryOptions,
  ) {
    return this.#submit(
      queryable,
      this.#range(expr, startMs, endMs, stepMs, opts),
      opts,
    ) as Promise<QueryResult>;
  }

  instantQueryEncoded(
    queryable: Queryable,
    expr: Expr,
    timeMs: number,
    encode: AnswerEncoding,
    opts?: PoolQueryOptions,
  ) {
    const msg = { ...this.#instant(expr, timeMs, opts), encode };
    return this.#submit(queryable, msg, opts) as Promise<EncodedAnswer>;
  }

  rangeQueryEncoded(
    queryable: Queryable,
    expr: Expr,
    startMs: number,
    endMs: number,
    stepMs: number,
    encode: AnswerEncoding,
    opts?: PoolQueryOptions,
  ) {
    const msg = { ...this.#range(expr, startMs, endMs, stepMs, opts), encode };
    return this.#submit(queryable, msg, opts) as Promise<EncodedAnswer>;
  }

  #instant(expr: Expr, timeMs: number, opts?: PoolQueryOptions): JobMessage {
    return { kind: "instant", id: this.#nextId++, expr, timeMs, lookbackDeltaMs: opts?.lookbackDeltaMs };
  }

  #range(expr: Expr, startMs: number, endMs: number, stepMs: number, opts?: PoolQueryOptions): JobMessage {
    return {
      kind: "range",
      id: this.#nextId++,
      expr,
      startMs,
      endMs,
      stepMs,
      lookbackDeltaMs: opts?.lookbackDeltaMs,
    };
  }

  hasFreeWorker(tenant: string): boolean {
    if (this.#closed || this.#queues.has(tenant)) return false;
    if ((this.#running.get(tenant) ?? 0) >= this.#cap()) return false;
    for (const slot of this.#slots) if (slot.ready && !slot.job) return true;
    return false;
  }

  async warm(workers = this.#o.workers): Promise<void> {
    while (!this.#closed && this.#slots.size < Math.min(workers, this.#o.workers)) this.#spawn();
    if ([...this.#slots].every((s) => s.ready)) return;
    await new Promise<void>((resolve) => this.#readyWaiters.push(resolve));
  }

  stats(): QueryPoolStats {
    let running = 0;
    for (const n of this.#running.values()) running += n;
    let queued = 0;
    for (const q of this.#queues.values()) queued += q.length;
    return {
      size: this.#o.workers,
      workers: this.#slots.size,
      running,
      queued,
      started: this.#started,
      replaced: this.#replaced,
      rejected: this.#rejected,
    };
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const q of this.#queues.values())
      for (const job of [...q]) this.#settle(job, new Error("query pool closed"));
    const exits: Promise<number>[] = [];
    // As at a deadline: blocks lent to a running worker stay until it has stopped.
    const releases: (() => void)[] = [];
    for (const slot of [...this.#slots]) {
      if (slot.job) {
        releases.push(...slot.job.releases.splice(0));
        this.#settle(slot.job, new Error("query pool closed"));
      }
      exits.push(this.#retire(slot));
    }
    for (const w of this.#readyWaiters.splice(0)) w();
    await Promise.all(exits);
    for (const r of releases) r();
  }

  #submit(
    queryable: Queryable,
    msg: JobMessage,
    opts?: PoolQueryOptions,
  ): Promise<QueryResult | EncodedAnswer> {
    if (this.#closed) return Promise.reject(new Error("query pool closed"));
    if (opts?.signal?.aborted) return Promise.reject(new QueryTimeoutError("query aborted"));
    return new Promise<QueryResult | EncodedAnswer>((resolve, reject) => {
      const job: Job = {
        msg,
        tenant: opts?.tenant ?? "",
        queryable,
        resolve,
        reject,
        loaded: 0,
        cpuSeconds: 0,
        charged: opts?.charge !== false && opts?.tenant !== undefined,
        done: false,
        timers: [],
        releases: [],
      };
      const timeoutMs = opts?.timeoutMs ?? this.#o.timeoutMs;
      if (timeoutMs > 0)
        job.timers.push(setTimeout(() => this.#expire(job, new QueryTimeoutError()), timeoutMs));
      const signal = opts?.signal;
      if (signal) {
        const onAbort = () => this.#expire(job, new QueryTimeoutError("query aborted"));
        signal.addEventListener("abort", onAbort, { once: true });
        job.unlisten = () => signal.removeEventListener("abort", onAbort);
      }
      this.#armQueueWait(job);
      const q = this.#queues.get(job.tenant);
      if (q) q.push(job);
      else this.#queues.set(job.tenant, [job]);
      this.#pump();
    });
  }

  /** Refuses a job still waiting after maxQueueWaitMs, unless no worker has finished starting yet. */
  #armQueueWait(job: Job): void {
    const t = setTimeout(() => {
      if (job.done || job.slot) return;
      if (![...this.#slots].some((s) => s.ready)) return this.#armQueueWait(job);
      this.#rejected++;
      this.#settle(
        job,
        new QueryOverloadError(
          `every query worker this project may use is busy (waited ${this.#o.maxQueueWaitMs} ms); retry after ${this.#o.retryAfterSeconds} s`,
          this.#o.retryAfterSeconds,
        ),
      );
    }, this.#o.maxQueueWaitMs);
    job.timers.push(t);
  }

  /** The deadline (or an abort): a running job's worker is terminated, so nothing outlives the answer. */
  #expire(job: Job, err: Error): void {
    if (job.done) return;
    const slot = job.slot;
    // The worker may be in the middle of a read through a lent descriptor: the blocks stay until
    // it has stopped.
    const releases = job.releases.splice(0);
    this.#settle(job, err);
    if (slot) {
      this.#replaced++;
      void this.#retire(slot).finally(() => {
        for (const r of releases) r();
      });
      // The replacement starts now, so the pool is warm again for the next query.
      if (!this.#closed) this.#spawn();
      this.#pump();
    }
  }

  #settle(job: Job, err: unknown, result?: QueryResult | EncodedAnswer): void {
    if (job.done) return;
    job.done = true;
    for (const r of job.releases.splice(0)) r();
    for (const t of job.timers) clearTimeout(t);
    job.unlisten?.();
    if (job.slot) {
      job.slot.job = undefined;
      job.slot.worker.unref();
      const n = (this.#running.get(job.tenant) ?? 1) - 1;
      if (n > 0) this.#running.set(job.tenant, n);
      else this.#running.delete(job.tenant);
    } else {
      const q = this.#queues.get(job.tenant);
      const i = q ? q.indexOf(job) : -1;
      if (q && i >= 0) {
        q.splice(i, 1);
        if (q.length === 0) this.#queues.delete(job.tenant);
      }
    }
    // A worker terminated at the deadline reports nothing: only the event loop's part is charged.
    if (job.charged && job.cpuSeconds > 0) this.#o.onCpu?.(job.tenant, job.cpuSeconds);
    if (result) job.resolve(result);
    else job.reject(err);
  }

  /** With two workers or more, one tenant keeps at least one worker free for the others. */
  #cap(): number {
    return workersPerTenant(this.#o.workers);
  }

  /** The next job in round-robin order over tenants that are under their cap. */
  #take(): Job | undefined {
    for (const [tenant, q] of this.#queues) {
      if ((this.#running.get(tenant) ?? 0) >= this.#cap()) continue;
      const job = q.shift();
      // Move the tenant to the back of the rotation (Map keeps insertion order).
      this.#queues.delete(tenant);
      if (q.length > 0) this.#queues.set(tenant, q);
      return job;
    }
    return undefined;
  }

  #pump(): void {
    if (this.#closed) return;
    for (const slot of this.#slots) {
      if (!slot.ready || slot.job) continue;
      const job = this.#take();
      if (!job) break;
      this.#assign(slot, job);
    }
    let waiting = 0;
    for (const q of this.#queues.values()) waiting += q.length;
    let starting = 0;
    for (const s of this.#slots) if (!s.ready) starting++;
    while (waiting > starting && this.#slots.size < this.#o.workers) {
      this.#spawn();
      starting++;
    }
  }

  #assign(slot: Slot, job: Job): void {
    slot.job = job;
    job.slot = slot;
    this.#running.set(job.tenant, (this.#running.get(job.tenant) ?? 0) + 1);
    slot.worker.ref();
    slot.worker.postMessage(job.msg);
  }

  #spawn(): void {
    const flag = new SharedArrayBuffer(4);
    const { port1, port2 } = new MessageChannel();
    const init: WorkerInit = { flag, replies: port2, engine: this.#o.engine, maxSamples: this.#o.maxSamples };
    const worker = startWorker(globalThis.SVC_QUERY_WORKER_BUNDLE, WORKER_SOURCE, import.meta.url, {
      workerData: init,
      transferList: [port2],
    });
    worker.unref();
    const slot: Slot = {
      worker,
      knownLabels: new Map(),
      flag: new Int32Array(flag),
      replies: port1,
      ready: false,
    };
    this.#slots.add(slot);
    this.#started++;
    worker.on("message", (m: WorkerMessage) => this.#onMessage(slot, m));
    worker.on("error", (err) => this.#onDeath(slot, err));
    worker.on("exit", (code) => this.#onDeath(slot, new Error(`query worker exited with code ${code}`)));
  }

  #storeId(queryable: Queryable): number {
    const id = this.#stores.get(queryable);
    if (id !== undefined) return id;
    const added = this.#nextStore++;
    this.#stores.set(queryable, added);
    return added;
  }

  #retire(slot: Slot): Promise<number> {
    this.#slots.delete(slot);
    slot.replies.close();
    return slot.worker.terminate();
  }

  #onDeath(slot: Slot, err: Error): void {
    if (!this.#slots.has(slot)) return; // retired on purpose
    this.#slots.delete(slot);
    slot.replies.close();
    if (slot.job) this.#settle(slot.job, err);
    if (!slot.ready) {
      // A worker that cannot even start would fail every query the same way: say so to the waiters.
      for (const q of [...this.#queues.values()]) for (const job of [...q]) this.#settle(job, err);
      for (const w of this.#readyWaiters.splice(0)) w();
      return;
    }
    this.#pump();
  }

  #onMessage(slot: Slot, m: WorkerMessage): void {
    switch (m.type) {
      case "ready":
        slot.ready = true;
        if ([...this.#slots].every((s) => s.ready)) for (const w of this.#readyWaiters.splice(0)) w();
        this.#pump();
        return;
      case "select":
        this.#select(slot, m);
        return;
      case "done":
      case "encoded":
      case "error": {
        const job = slot.job;
        if (!job || job.msg.id !== m.id) return;
        job.cpuSeconds += m.cpuSeconds ?? 0;
        if (m.type === "done") this.#settle(job, undefined, unpackResult(m.result));
        else if (m.type === "encoded") this.#settle(job, undefined, m.answer);
        else this.#settle(job, job.failure ?? fromWire(m.error));
        this.#pump();
        return;
      }
    }
  }

  /**
   * Answers one select of the worker's query within its sample budget. From a store that can split
   * it (Querier.selectParts: the TSDB) only the in-memory head's part is read here: the worker reads
   * the blocks itself, through descriptors the store lends it and keeps open until the query ends.
   * Other stores are read here whole.
   */
  #select(slot: Slot, m: Extract<WorkerMessage, { type: "select" }>): void {
    const job = slot.job;
    const cpuFrom = this.#o.onCpu && job?.charged ? threadCpuSeconds() : undefined;
    let reply: SelectReply;
    let transfer: ArrayBuffer[] = [];
    try {
      if (!job || job.msg.id !== m.id) throw new Error("query worker: select for no running query");
      // A querier per select: the store's sources as they are now (a merge or retention may have
      // replaced blocks since the query's previous select).
      const q = job.queryable.querier();
      const parts = q.selectParts?.(m.matchers, m.mintMs, m.maxtMs, m.hints);
      if (parts) job.releases.push(parts.release);
      const data = parts ? parts.rest : columnsOf(q.select(m.matchers, m.mintMs, m.maxtMs, m.hints));
      // The worker counts the blocks' samples as it reads them, on top of these.
      job.loaded += data.offsets[data.length];
      if (job.loaded > this.#o.maxSamples) throw new TooManySamplesError(this.#o.maxSamples, job.loaded);
      // A split select's columns are keyed and in the store's order (the worker sorts them); the
      // series of a whole select come sorted and without keys.
      const store = parts ? this.#storeId(job.queryable) : undefined;
      let known = store === undefined ? undefined : slot.knownLabels.get(store);
      const forget = known !== undefined && known.size + data.length > LABELS_KEPT_PER_WORKER;
      if (store !== undefined && (!known || forget)) {
        known = new Set();
        slot.knownLabels.set(store, known);
      }
      const packed = packColumns(data, known);
      const tail =
        parts && parts.blocks.length > 0 ? { blocks: parts.blocks, liveBlockDirs: parts.liveBlockDirs } : {};
      reply = { ok: true, packed, store, forget, ...tail };
      transfer = packedTransfer(packed);
    } catch (err) {
      if (job) job.failure = err;
      reply = { ok: false, error: toWire(err) };
    }
    if (job && cpuFrom !== undefined) job.cpuSeconds += Math.max(0, threadCpuSeconds() - cpuFrom);
    if (job?.done) return;
    slot.replies.postMessage(reply, transfer);
    Atomics.store(slot.flag, 0, 1);
    Atomics.notify(slot.flag, 0);
  }
}
