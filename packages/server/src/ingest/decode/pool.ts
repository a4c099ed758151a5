/**
 * Remote-write bodies decoded off the event loop (docs/decisions.md "Ingest on both cores"): snappy,
 * protobuf and the decoder's checks run in worker threads, the event loop keeps HTTP, the series
 * lookup by number, validation against the inventory, the append and the WAL. A decoded request
 * comes back as moved buffers (protocol.ts), so the hand-off costs a message, not a copy.
 *
 * A body below `inlineBytes` is decoded inline by the caller (`wants`): for a small body the message
 * round trip costs more than the decode it moves. Jobs wait in one queue per tenant, taken round-robin,
 * and at most `depth` are given to a worker at once, so a tenant sending many large bodies cannot
 * queue ahead of another's next request by more than that. A worker that dies (an error, an exit)
 * fails the jobs it held with DecodeWorkerLostError (the request answers 503: nothing of it was
 * stored, so the sender's retry is safe) and is replaced; queued jobs go to its replacement.
 */
import type { Worker } from "node:worker_threads";
import {
  type CompactWriteRequest,
  compactWriteRequest,
  type DecodeLimits,
  RemoteWriteDecodeError,
  resolveDecodeLimits,
} from "@svc/remotewrite";
import { startWorker } from "../../lifecycle/worker-script.ts";
import { DEFAULT_DECODE_WORKERS, DEFAULT_INLINE_BYTES } from "./defaults.ts";
import { type DecodeJob, type DecodeReply, type DecodeWorkerInit, ownBuffer } from "./protocol.ts";

export interface DecodePoolOptions {
  /** Worker threads (started at once). */
  readonly workers: number;
  /** Bodies (compressed bytes) below this are decoded inline by the caller. */
  readonly inlineBytes: number;
  /** Jobs one worker holds at once (one decoding, the next ready). */
  readonly depth: number;
  /** Label keys a worker numbers before it starts over (about 120 bytes each in its heap). */
  readonly maxKeys: number;
  readonly limits?: Partial<DecodeLimits>;
}

export const defaultDecodePoolOptions: DecodePoolOptions = Object.freeze({
  workers: Math.max(1, DEFAULT_DECODE_WORKERS),
  inlineBytes: DEFAULT_INLINE_BYTES,
  depth: 2,
  maxKeys: 2_000_000,
});

/**
 * The numbering of a request's label keys by one worker: `ids[i]` is series i's. Equal numbers in the
 * same `space` mean equal keys; a space is dropped when its worker starts over or is replaced.
 */
export interface KeyNumbers {
  readonly space: object;
  readonly ids: Uint32Array;
}

export interface DecodedBody {
  readonly req: CompactWriteRequest;
  readonly keys?: KeyNumbers;
}

/** The worker decoding a body died before answering: nothing of the body was stored; retry it. */
export class DecodeWorkerLostError extends Error {
  override readonly name = "DecodeWorkerLostError";
}

export interface DecodePoolStats {
  readonly workers: number;
  readonly running: number;
  readonly queued: number;
  /** Workers started, and replaced after dying, since the pool was made. */
  readonly started: number;
  readonly replaced: number;
  /** Bodies decoded in a worker. */
  readonly decoded: number;
}

export interface DecodePool {
  readonly options: DecodePoolOptions;
  /** Whether a body of `bytes` (compressed) goes to a worker; otherwise decode it inline. */
  wants(bytes: number): boolean;
  /**
   * Decodes a remote-write body in a worker. Rejects with RemoteWriteDecodeError for a bad body (as
   * decodeRemoteWriteBodyCompact throws it), DecodeWorkerLostError when the worker died. `body` is
   * moved to the worker when it owns its buffer: do not use it afterwards.
   */
  decode(body: Uint8Array, tenant: string): Promise<DecodedBody>;
  /** Starts the workers and resolves once each has (tests, benches; decode() starts them and queues). */
  ready(): Promise<void>;
  stats(): DecodePoolStats;
  /** Terminates the workers; pending decodes are rejected. */
  close(): Promise<void>;
  /** Tests only: the worker that takes the next job exits on receiving it, as a crash would. */
  crashNextForTest(): void;
}

declare global {
  /** Set by the production build (scripts/build-server.mjs): the bundled decode worker, beside main.js. */
  var SVC_INGEST_WORKER_BUNDLE: string | undefined;
}

// The production bundle names its worker's file; from the sources, lifecycle/worker-script.ts bundles it.
const WORKER_SOURCE = new URL("./worker.ts", import.meta.url);

interface Job {
  readonly msg: DecodeJob;
  readonly transfer: ArrayBuffer[];
  readonly tenant: string;
  readonly resolve: (d: DecodedBody) => void;
  readonly reject: (e: unknown) => void;
}

interface Slot {
  readonly worker: Worker;
  readonly jobs: Map<number, Job>;
  ready: boolean;
  dead: boolean;
  epoch: number;
  space: object;
}

export function createDecodePool(overrides: Partial<DecodePoolOptions> = {}): DecodePool {
  const o: DecodePoolOptions = Object.freeze({ ...defaultDecodePoolOptions, ...overrides });
  for (const k of ["workers", "depth", "maxKeys"] as const)
    if (!Number.isSafeInteger(o[k]) || o[k] < 1)
      throw new RangeError(`decode pool option ${k} must be a positive integer, got ${o[k]}`);
  const init: DecodeWorkerInit = { limits: resolveDecodeLimits(o.limits), maxKeys: o.maxKeys };
  const slots: Slot[] = [];
  /** Waiting jobs per tenant, in round-robin order (Map keeps insertion order). */
  const queues = new Map<string, Job[]>();
  let nextId = 1;
  let started = 0;
  let replaced = 0;
  let decoded = 0;
  let closed = false;
  let readyWaiters: (() => void)[] = [];
  let crashNext = false;

  function spawn(at: number): void {
    const worker = startWorker(globalThis.SVC_INGEST_WORKER_BUNDLE, WORKER_SOURCE, import.meta.url, {
      workerData: init,
    });
    // Never what keeps the process alive: an idle pool must not hold a stopping server open.
    worker.unref();
    const slot: Slot = { worker, jobs: new Map(), ready: false, dead: false, epoch: 0, space: {} };
    slots[at] = slot;
    started++;
    worker.on("online", () => {
      slot.ready = true;
      if (slots.every((s) => s.ready)) for (const w of readyWaiters.splice(0)) w();
      pump();
    });
    worker.on("message", (m: DecodeReply) => onReply(slot, m));
    worker.on("error", (err) => onDeath(slot, err));
    worker.on("exit", (code) => onDeath(slot, new Error(`ingest decode worker exited with code ${code}`)));
  }

  function onDeath(slot: Slot, err: Error): void {
    if (slot.dead) return;
    slot.dead = true;
    const at = slots.indexOf(slot);
    const lost = [...slot.jobs.values()];
    slot.jobs.clear();
    for (const j of lost)
      j.reject(
        new DecodeWorkerLostError(`the ingest decode worker stopped (${err.message}); retry the request`),
      );
    if (closed || at < 0) return;
    replaced++;
    spawn(at);
  }

  function onReply(slot: Slot, m: DecodeReply): void {
    const job = slot.jobs.get(m.id);
    if (!job) return;
    slot.jobs.delete(m.id);
    if (slot.jobs.size === 0) slot.worker.unref();
    pump();
    if (!m.ok) {
      if (!m.decode) {
        job.reject(new Error(`ingest decode worker: ${m.message}`));
        return;
      }
      const e = new RemoteWriteDecodeError(m.message);
      // The message already names the limit; the fields are kept for callers that read them.
      Object.assign(e, { limit: m.limit, actual: m.actual, allowed: m.allowed });
      job.reject(e);
      return;
    }
    decoded++;
    if (m.epoch !== slot.epoch) {
      slot.epoch = m.epoch;
      slot.space = {};
    }
    job.resolve({
      req: compactWriteRequest({
        ...m,
        labelBytes: Buffer.from(m.labelBytes.buffer, m.labelBytes.byteOffset, m.labelBytes.byteLength),
      }),
      keys: { space: slot.space, ids: m.keyIds },
    });
  }

  /** The next job in round-robin order over tenants. */
  function take(): Job | undefined {
    for (const [tenant, q] of queues) {
      const job = q.shift();
      queues.delete(tenant);
      if (q.length > 0) queues.set(tenant, q);
      if (job) return job;
    }
    return undefined;
  }

  function pump(): void {
    if (closed) return;
    for (;;) {
      let best: Slot | undefined;
      for (const s of slots)
        if (s.ready && !s.dead && s.jobs.size < o.depth && (!best || s.jobs.size < best.jobs.size)) best = s;
      if (!best) return;
      const job = take();
      if (!job) return;
      best.jobs.set(job.msg.id, job);
      best.worker.ref();
      best.worker.postMessage(job.msg, job.transfer);
    }
  }

  /**
   * Workers start with the first body that needs one, not with the server: a start-up spends no CPU on
   * threads an ingest-less process never uses (docs/performance.md "Start-up"); the first large body
   * waits for the start (tens of ms from the bundle).
   */
  function start(): void {
    if (slots.length > 0 || closed) return;
    for (let i = 0; i < o.workers; i++) spawn(i);
  }

  return {
    options: o,
    wants: (bytes) => !closed && bytes >= o.inlineBytes,
    decode(body, tenant) {
      if (closed) return Promise.reject(new DecodeWorkerLostError("ingest decode pool closed"));
      start();
      return new Promise<DecodedBody>((resolve, reject) => {
        // Moved when the body owns its buffer (Fastify's concatenation of a large body does); else
        // copied once, so a pooled slab is never detached from under its other users.
        const own = ownBuffer(body);
        const moved = own ? body : new Uint8Array(body);
        const crash = crashNext ? ({ crash: true } as const) : undefined;
        crashNext = false;
        const job: Job = {
          msg: { id: nextId++, body: moved, ...crash },
          transfer: [own ?? (moved.buffer as ArrayBuffer)],
          tenant,
          resolve,
          reject,
        };
        const q = queues.get(tenant);
        if (q) q.push(job);
        else queues.set(tenant, [job]);
        pump();
      });
    },
    async ready() {
      start();
      if (closed || slots.every((s) => s.ready)) return;
      await new Promise<void>((r) => readyWaiters.push(r));
    },
    stats() {
      let running = 0;
      for (const s of slots) running += s.jobs.size;
      let queued = 0;
      for (const q of queues.values()) queued += q.length;
      return { workers: slots.length, running, queued, started, replaced, decoded };
    },
    async close() {
      closed = true;
      for (const q of queues.values())
        for (const j of q) j.reject(new DecodeWorkerLostError("ingest decode pool closed"));
      queues.clear();
      for (const w of readyWaiters.splice(0)) w();
      readyWaiters = [];
      await Promise.all(
        slots.map(async (s) => {
          for (const j of s.jobs.values()) j.reject(new DecodeWorkerLostError("ingest decode pool closed"));
          s.jobs.clear();
          s.dead = true;
          await s.worker.terminate();
        }),
      );
    },
    crashNextForTest() {
      crashNext = true;
    },
  };
}
