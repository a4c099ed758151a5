/**
 * A query worker: the unchanged, synchronous engine over a Queryable whose `select` asks the main
 * thread for the samples and blocks (Atomics.wait) until they arrive. The main thread owns the
 * store, counts what it hands out, and terminates this thread at the query's deadline.
 */
import { type MessagePort, parentPort, receiveMessageOnPort, workerData } from "node:worker_threads";
import { compressSync, MIN_COMPRESS_BYTES } from "../../net/codings.ts";
import type { Labels, Querier, Queryable, SeriesData } from "../../storage/interface.ts";
import { BlockSet } from "../../tsdb/block-set.ts";
import { compareLabels } from "../../tsdb/labels.ts";
import { createEngine, type QueryResult } from "../engine/engine.ts";
import { TooManySamplesError } from "../errors.ts";
import { queryAnswerJson } from "../json.ts";
import { withoutTenant } from "../tenant.ts";
import {
  type AnswerEncoding,
  type EncodedAnswer,
  fromWire,
  type JobMessage,
  packResult,
  type SelectReply,
  toWire,
  unpackSeries,
  type WorkerInit,
  type WorkerMessage,
} from "./protocol.ts";
import { keepWorkerSchedstat, threadCpuSeconds } from "./thread-cpu.ts";
import { lowerThreadPriority } from "./thread-priority.ts";

const init = workerData as WorkerInit;
// Below the event loop's thread: see thread-priority.ts (SVC_QUERY_WORKER_NICE=0 keeps it equal).
lowerThreadPriority(Number(process.env.SVC_QUERY_WORKER_NICE ?? 10));
const flag = new Int32Array(init.flag);
const replies: MessagePort = init.replies;
// The deadline is the main thread's: it terminates this worker, so the engine needs none of its own.
const engine = createEngine({ ...init.engine, timeoutMs: 0 });
const port = parentPort;
if (!port) throw new Error("promql/pool/worker.ts runs only as a worker thread");

let current = 0;
/** Samples the current query has loaded (the head's part and the blocks'). */
let loaded = 0;
const blocks = new BlockSet();

const querier: Querier = {
  select(matchers, mintMs, maxtMs, hints) {
    Atomics.store(flag, 0, 0);
    const msg: WorkerMessage = { type: "select", id: current, matchers, mintMs, maxtMs, hints };
    port.postMessage(msg);
    for (;;) {
      Atomics.wait(flag, 0, 0);
      const got = receiveMessageOnPort(replies);
      if (!got) continue;
      const reply = got.message as SelectReply;
      if (!reply.ok) throw fromWire(reply.error);
      const rest = unpackSeries(reply.packed, labelCache(reply.store, reply.forget));
      if (!reply.blocks || reply.blocks.length === 0) {
        for (const s of rest) loaded += s.values.length;
        // A split select's columns come in the store's order; a select answers in label order.
        return reply.store === undefined ? rest : rest.sort((a, b) => compareLabels(a.labels, b.labels));
      }
      // The blocks are read here, off the event loop; the budget is checked as samples come.
      const parts = { blocks: reply.blocks, liveBlockDirs: reply.liveBlockDirs ?? [], rest };
      const out: SeriesData[] = [];
      for (const s of blocks.select(parts, matchers, mintMs, maxtMs)) {
        loaded += s.values.length;
        if (loaded > init.maxSamples) throw new TooManySamplesError(init.maxSamples, loaded);
        out.push(s);
      }
      return out;
    }
  },
  labelNames() {
    throw new Error("labelNames is not read by the engine");
  },
  labelValues() {
    throw new Error("labelValues is not read by the engine");
  },
};
const queryable: Queryable = { querier: () => querier };

/** Labels of the series this worker was sent, per store, by series key (see SelectReply). */
const labelsByStore = new Map<number, Map<number, Labels>>();

function labelCache(store: number | undefined, forget: boolean | undefined): Map<number, Labels> | undefined {
  if (store === undefined) return undefined;
  const m = labelsByStore.get(store);
  if (m && !forget) return m;
  const fresh = new Map<number, Labels>();
  labelsByStore.set(store, fresh);
  return fresh;
}

port.on("message", (job: JobMessage) => {
  current = job.id;
  loaded = 0;
  const opts = { timeoutMs: 0, lookbackDeltaMs: job.lookbackDeltaMs };
  // This thread's CPU for the query (evaluation, block reads, encoding), charged to its project.
  const cpuFrom = threadCpuSeconds();
  const cpu = () => Math.max(0, threadCpuSeconds() - cpuFrom);
  try {
    const r =
      job.kind === "instant"
        ? engine.instantQuery(queryable, job.expr, job.timeMs, opts)
        : engine.rangeQuery(queryable, job.expr, job.startMs, job.endMs, job.stepMs, opts);
    if (job.encode) {
      const answer = encodeAnswer(r, job.encode);
      const encoded: WorkerMessage = { type: "encoded", id: job.id, answer, cpuSeconds: cpu() };
      port.postMessage(encoded, [answer.body.buffer as ArrayBuffer]);
    } else {
      const { packed, transfer } = packResult(r);
      const done: WorkerMessage = { type: "done", id: job.id, result: packed, cpuSeconds: cpu() };
      port.postMessage(done, transfer);
    }
  } catch (err) {
    const failed: WorkerMessage = { type: "error", id: job.id, error: toWire(err), cpuSeconds: cpu() };
    port.postMessage(failed);
  } finally {
    blocks.endQuery();
  }
});
/** The Prometheus API's body of a result, without the tenant label, compressed as asked. */
function encodeAnswer(r: QueryResult, enc: AnswerEncoding): EncodedAnswer {
  const value = withoutTenant(r.value);
  const text = Buffer.from(queryAnswerJson({ value, annotations: r.annotations }, enc.maxBytes));
  // A Buffer from the pool may share its ArrayBuffer: copy into one of its own to transfer it.
  const own = (b: Buffer) => new Uint8Array(b);
  if (!enc.coding || text.byteLength < MIN_COMPRESS_BYTES) return { body: own(text) };
  return { body: own(compressSync(text, enc.coding)), coding: enc.coding };
}

// This thread's schedstat, opened once for every query's two CPU reads (thread-cpu.ts); Node closes
// it when this thread exits.
keepWorkerSchedstat();
const ready: WorkerMessage = { type: "ready" };
port.postMessage(ready);
