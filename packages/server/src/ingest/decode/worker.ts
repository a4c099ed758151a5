/**
 * An ingest decode worker: snappy and protobuf decoding of remote-write bodies, with every check the
 * decoder makes (limits, wire types, UTF-8), off the event loop. Each series' label key is numbered
 * here as it is decoded (key-numbers.ts: mostly one byte comparison against the key that followed the
 * series before it last time), so the event loop finds a known series by an array index. Nothing here touches the
 * store: the WAL, the head and the inventory stay on the event loop (docs/decisions.md "Ingest on both
 * cores").
 */
import { parentPort, workerData } from "node:worker_threads";
import { decodeRemoteWriteBodyCompact, RemoteWriteDecodeError } from "@svc/remotewrite";
import { KeyNumbers } from "./key-numbers.ts";
import { type DecodeJob, type DecodeReply, type DecodeWorkerInit, ownBuffer } from "./protocol.ts";

const init = workerData as DecodeWorkerInit;
const port = parentPort;
if (!port) throw new Error("ingest/decode/worker.ts runs only as a worker thread");

const keys = new KeyNumbers();
let epoch = 1;

port.on("message", (job: DecodeJob) => {
  // Ends this thread only (process.exit in a worker), holding the job: the pool's crash path.
  if (job.crash) process.exit(70);
  let reply: DecodeReply;
  const transfer: ArrayBuffer[] = [];
  try {
    keys.begin();
    const req = decodeRemoteWriteBodyCompact(job.body, init.limits, keys);
    const n = req.seriesCount;
    const { labelBytes, labelKeyStart, labelKeyEnd, labelHashes } = req;
    let keyIds: Uint32Array;
    if (keys.size <= init.maxKeys) keyIds = keys.ids(n);
    else {
      // Numbered past the bound: start over, this request the first of a new epoch.
      keys.clear();
      epoch++;
      keyIds = new Uint32Array(n);
      keys.number(labelBytes, labelKeyStart, labelKeyEnd, labelHashes, n, keyIds);
    }
    // The decompressed body is moved when it has a buffer of its own (the native snappy's copy does);
    // else (a pooled slice) copied once.
    const bytes = ownBuffer(labelBytes) ? labelBytes : copyOf(labelBytes);
    reply = {
      id: job.id,
      ok: true,
      epoch,
      seriesCount: n,
      sampleCount: req.sampleCount,
      labelBytes: bytes,
      labelKeyStart,
      labelKeyEnd,
      labelHashes,
      sampleStart: req.sampleStart,
      timestampsMs: req.timestampsMs,
      values: req.values,
      keyIds,
      metadata: req.metadata,
    };
    for (const a of [
      bytes,
      labelKeyStart,
      labelKeyEnd,
      labelHashes,
      req.sampleStart,
      req.timestampsMs,
      req.values,
      keyIds,
    ]) {
      const b = ownBuffer(a);
      if (b && !transfer.includes(b)) transfer.push(b);
    }
  } catch (err) {
    reply =
      err instanceof RemoteWriteDecodeError
        ? {
            id: job.id,
            ok: false,
            decode: true,
            message: err.message,
            limit: err.limit,
            actual: err.actual,
            allowed: err.allowed,
          }
        : { id: job.id, ok: false, decode: false, message: (err as Error)?.message ?? String(err) };
  }
  port.postMessage(reply, transfer);
});

function copyOf(b: Uint8Array): Uint8Array {
  const c = new Uint8Array(b.length);
  c.set(b);
  return c;
}
