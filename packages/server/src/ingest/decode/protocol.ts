/**
 * Messages between the ingest decode pool (pool.ts, on the event loop) and its worker threads
 * (worker.ts). A decoded request crosses as transferable buffers only (docs/decisions.md "Ingest on
 * both cores"): the decompressed body (its label keys are byte ranges of it) and the typed arrays the
 * decoder made, moved, not copied; never an object per series.
 */
import type { DecodeLimitName, DecodeLimits, MetricMetadata } from "@svc/remotewrite";

export interface DecodeWorkerInit {
  readonly limits: DecodeLimits;
  /** Label keys a worker numbers before it starts over under a new epoch (bounds its memory). */
  readonly maxKeys: number;
}

/** main → worker: one compressed remote-write body (its buffer transferred when it owns it). */
export interface DecodeJob {
  readonly id: number;
  readonly body: Uint8Array;
  /** Tests only: the worker exits on receiving this job, as a crash would (pool.crashNextForTest). */
  readonly crash?: true;
}

/** worker → main: the decoded request, or why the body is refused. */
export type DecodeReply =
  | {
      readonly id: number;
      readonly ok: true;
      /** Numbering of `keyIds`: a new epoch means the worker forgot its earlier numbers. */
      readonly epoch: number;
      readonly seriesCount: number;
      readonly sampleCount: number;
      readonly labelBytes: Uint8Array;
      readonly labelKeyStart: Uint32Array;
      readonly labelKeyEnd: Uint32Array;
      readonly labelHashes: Uint32Array;
      readonly sampleStart: Uint32Array;
      readonly timestampsMs: Float64Array;
      readonly values: Float64Array;
      /** Per series, the worker's number for its label key (equal keys, equal numbers, within an epoch). */
      readonly keyIds: Uint32Array;
      readonly metadata: readonly MetricMetadata[];
    }
  | {
      readonly id: number;
      readonly ok: false;
      /** A RemoteWriteDecodeError's message and limit (a 400 naming the field); else an internal error. */
      readonly decode: boolean;
      readonly message: string;
      readonly limit?: DecodeLimitName;
      readonly actual?: number;
      readonly allowed?: number;
    };

/** The ArrayBuffer of `a` when `a` spans all of it (it can be moved), else undefined (copy it). */
export function ownBuffer(a: Uint8Array | Uint32Array | Float64Array): ArrayBuffer | undefined {
  const b = a.buffer;
  return b instanceof ArrayBuffer && a.byteOffset === 0 && a.byteLength === b.byteLength ? b : undefined;
}
