/**
 * Messages between the query pool (main thread) and its workers, and the packing that lets samples
 * and results cross threads as a few transferable buffers instead of thousands of cloned arrays.
 */
import type { MessagePort } from "node:worker_threads";
import type { Coding } from "../../net/codings.ts";
import type {
  LabelMatcher,
  Labels,
  SelectHints,
  SeriesColumns,
  SeriesData,
} from "../../storage/interface.ts";
import type { Expr } from "../ast.ts";
import type { QueryResult, QueryValue, RangeSeries } from "../engine/engine.ts";
import {
  PointBudgetError,
  PromQLParseError,
  QueryEvalError,
  QueryTimeoutError,
  ResponseTooLargeError,
  TooManySamplesError,
  UnsupportedNodeError,
} from "../errors.ts";

/** Engine options a worker is started with (numbers only: functions do not cross threads). */
export interface WorkerEngineOptions {
  readonly lookbackDeltaMs: number;
  readonly maxPointsPerSeries: number;
  readonly maxSamples: number;
  readonly defaultSubqueryStepMs: number;
}

/** What a worker is started with. */
export interface WorkerInit {
  /** Int32 flag the worker waits on while the main thread reads samples for it. */
  readonly flag: SharedArrayBuffer;
  /** The main thread answers selects on this port; the worker reads it synchronously. */
  readonly replies: MessagePort;
  readonly engine: WorkerEngineOptions;
  /** Raw samples one query may load (the pool's maxSamples), counted in the worker for what it reads. */
  readonly maxSamples: number;
}

/**
 * How a worker hands a query's answer back when asked for the Prometheus API's body instead of the
 * result: built (and compressed) in the worker, without the tenant label, so the event loop only
 * writes bytes.
 */
export interface AnswerEncoding {
  /** The body's JSON may not be longer (ResponseTooLargeError). */
  readonly maxBytes: number;
  /** The content coding to apply (bodies under MIN_COMPRESS_BYTES stay plain); absent: none. */
  readonly coding?: Coding;
}

/** The encoded answer: the Prometheus API's success body, and its content coding if compressed. */
export interface EncodedAnswer {
  readonly body: Uint8Array;
  readonly coding?: Coding;
}

/** Main → worker: evaluate one query (and with `encode`, answer its encoded body). */
export type JobMessage = (
  | {
      readonly kind: "instant";
      readonly id: number;
      readonly expr: Expr;
      readonly timeMs: number;
      readonly lookbackDeltaMs?: number;
    }
  | {
      readonly kind: "range";
      readonly id: number;
      readonly expr: Expr;
      readonly startMs: number;
      readonly endMs: number;
      readonly stepMs: number;
      readonly lookbackDeltaMs?: number;
    }
) & { readonly encode?: AnswerEncoding };

/** Worker → main. */
export type WorkerMessage =
  | { readonly type: "ready" }
  | {
      readonly type: "select";
      readonly id: number;
      readonly matchers: readonly LabelMatcher[];
      readonly mintMs: number;
      readonly maxtMs: number;
      readonly hints?: SelectHints;
    }
  | {
      readonly type: "done";
      readonly id: number;
      readonly result: PackedResult;
      readonly cpuSeconds?: number;
    }
  | {
      readonly type: "encoded";
      readonly id: number;
      readonly answer: EncodedAnswer;
      readonly cpuSeconds?: number;
    }
  | { readonly type: "error"; readonly id: number; readonly error: WireError; readonly cpuSeconds?: number };

/**
 * Main → worker on the reply port: the samples of one select, packed, or why there are none. With
 * `blocks`, `packed` is only the head's part: the worker reads the blocks itself (Querier.selectParts).
 * With `store` (the pool's number for the queryable), `packed` holds the columns of a split select:
 * in the store's order, not by labels, and keyed by the store's series keys, under which the worker
 * keeps the labels it was sent; `forget` tells it to drop those of `store` first (the pool bounds what
 * each worker keeps).
 */
export type SelectReply =
  | {
      readonly ok: true;
      readonly packed: PackedSeries;
      readonly store?: number;
      readonly forget?: boolean;
      readonly blocks?: readonly { readonly dir: string; readonly fd: number }[];
      readonly liveBlockDirs?: readonly string[];
    }
  | { readonly ok: false; readonly error: WireError };

/**
 * Series i has labels[i] (the label sets as one JSON text: one string crosses a thread at the cost of a
 * copy, thousands of small objects at the cost of the structured-clone serializer, on the main thread)
 * and samples offsets[i] … offsets[i+1] − 1 of timestamps and values. With `keys`, labels[i] is null
 * for a series whose labels the worker already holds under keys[i] (sent by an earlier select).
 */
export interface PackedSeries {
  readonly labels: string;
  readonly keys?: Float64Array;
  readonly offsets: Uint32Array;
  readonly timestamps: Float64Array;
  readonly values: Float64Array;
}

/** Copies series into one pair of buffers (raw bits, so staleness markers survive). */
export function packSeries(
  data: readonly { labels: Labels; timestamps: Float64Array; values: Float64Array }[],
): PackedSeries {
  let total = 0;
  for (const s of data) total += s.values.length;
  const offsets = new Uint32Array(data.length + 1);
  const timestamps = new Float64Array(total);
  const values = new Float64Array(total);
  let k = 0;
  data.forEach((s, i) => {
    offsets[i] = k;
    timestamps.set(s.timestamps, k);
    // Same element type: a byte copy, NaN payloads (staleness markers) included.
    values.set(s.values, k);
    k += s.values.length;
  });
  offsets[data.length] = k;
  return { labels: JSON.stringify(data.map((s) => s.labels)), offsets, timestamps, values };
}

/**
 * Columns as they cross (their buffers are transferred, not copied): the labels of a keyed series are
 * left out when `known` (the keys this worker holds) has its key, and added to `known` otherwise.
 */
export function packColumns(c: SeriesColumns, known?: Set<number>): PackedSeries {
  const labels: (Labels | null)[] = new Array(c.length);
  const added: number[] = [];
  for (let i = 0; i < c.length; i++) {
    const key = c.keys[i];
    if (known && key >= 0) {
      if (known.has(key)) {
        labels[i] = null;
        continue;
      }
      added.push(key);
    }
    labels[i] = c.labelsOf(i);
  }
  const text = JSON.stringify(labels);
  // Only once nothing can fail any more: the worker will hold what `known` says it does.
  for (const key of added) known?.add(key);
  return {
    labels: text,
    keys: known ? c.keys : undefined,
    offsets: c.offsets,
    timestamps: c.timestamps,
    values: c.values,
  };
}

/**
 * Views into the packed buffers; the engine never writes into selected arrays. `cache` holds the
 * labels of keyed series (frozen: the same objects serve every later query that reads the series).
 */
export function unpackSeries(p: PackedSeries, cache?: Map<number, Labels>): SeriesData[] {
  const labels = JSON.parse(p.labels) as (Labels | null)[];
  const out: SeriesData[] = [];
  for (let i = 0; i < labels.length; i++) {
    const a = p.offsets[i];
    const b = p.offsets[i + 1];
    const key = p.keys ? p.keys[i] : -1;
    let l = labels[i];
    if (l === null) {
      l = cache?.get(key) ?? null;
      if (l === null) throw new Error(`query worker: the labels of series ${key} were never sent`);
    } else if (cache && key >= 0) {
      for (const x of l) Object.freeze(x);
      cache.set(key, Object.freeze(l));
    }
    out.push({ labels: l, timestamps: p.timestamps.subarray(a, b), values: p.values.subarray(a, b) });
  }
  return out;
}

export function packedTransfer(p: PackedSeries): ArrayBuffer[] {
  const buffers = [p.offsets.buffer, p.timestamps.buffer, p.values.buffer];
  if (p.keys) buffers.push(p.keys.buffer);
  return buffers as ArrayBuffer[];
}

/** A QueryResult as it crosses back: vectors and matrices packed like selected series. */
export type PackedResult =
  | {
      readonly kind: "matrix";
      readonly packed: PackedSeries;
      readonly annotations: QueryResult["annotations"];
      readonly stats?: QueryResult["stats"];
    }
  | {
      readonly kind: "vector";
      readonly packed: PackedSeries;
      readonly annotations: QueryResult["annotations"];
      readonly stats?: QueryResult["stats"];
    }
  | { readonly kind: "plain"; readonly result: QueryResult };

export function packResult(r: QueryResult): { packed: PackedResult; transfer: ArrayBuffer[] } {
  const v = r.value;
  if (v.resultType === "matrix") {
    const packed = packSeries(
      v.result.map((s) => ({ labels: s.metric, timestamps: s.timestamps, values: s.values })),
    );
    return {
      packed: { kind: "matrix", packed, annotations: r.annotations, stats: r.stats },
      transfer: packedTransfer(packed),
    };
  }
  if (v.resultType === "vector") {
    const packed = packSeries(
      v.result.map((s) => ({
        labels: s.metric,
        timestamps: Float64Array.of(s.t),
        values: Float64Array.of(s.v),
      })),
    );
    return {
      packed: { kind: "vector", packed, annotations: r.annotations, stats: r.stats },
      transfer: packedTransfer(packed),
    };
  }
  return { packed: { kind: "plain", result: r }, transfer: [] };
}

/** The result again; a matrix's arrays are views into two shared buffers, owned by the caller. */
export function unpackResult(p: PackedResult): QueryResult {
  if (p.kind === "plain") return p.result;
  const series = unpackSeries(p.packed);
  const value: QueryValue =
    p.kind === "matrix"
      ? {
          resultType: "matrix",
          result: series.map(
            (s): RangeSeries => ({ metric: s.labels, timestamps: s.timestamps, values: s.values }),
          ),
        }
      : {
          resultType: "vector",
          result: series.map((s) => ({ metric: s.labels, t: s.timestamps[0], v: s.values[0] })),
        };
  return { value, annotations: p.annotations, stats: p.stats };
}

/** An error as it crosses threads: its class name and the fields its constructor needs. */
export interface WireError {
  readonly name: string;
  readonly message: string;
  readonly limit?: number;
  readonly loaded?: number;
  readonly requestedPoints?: number;
  readonly maxPoints?: number;
  readonly position?: { readonly start: number; readonly end: number };
  readonly nodeKind?: string;
  readonly bytes?: number;
}

export function toWire(err: unknown): WireError {
  if (!(err instanceof Error)) return { name: "Error", message: String(err) };
  const e = err as Error & Partial<WireError>;
  return {
    name: e.name,
    message: e.message,
    limit: e.limit,
    loaded: e.loaded,
    requestedPoints: e.requestedPoints,
    maxPoints: e.maxPoints,
    position: e.position,
    nodeKind: e.nodeKind,
    bytes: e.bytes,
  };
}

/** The typed PromQL error again, so the one edge that maps errors sees the same classes. */
export function fromWire(w: WireError): Error {
  switch (w.name) {
    case "QueryEvalError":
      return new QueryEvalError(w.message);
    case "QueryTimeoutError":
      return new QueryTimeoutError(w.message);
    case "TooManySamplesError":
      return new TooManySamplesError(w.limit ?? 0, w.loaded);
    case "PointBudgetError":
      return new PointBudgetError(w.requestedPoints ?? 0, w.maxPoints ?? 0);
    case "PromQLParseError":
      return new PromQLParseError(w.message, w.position ?? { start: 0, end: 0 });
    case "UnsupportedNodeError":
      return new UnsupportedNodeError(w.nodeKind ?? "?");
    case "ResponseTooLargeError":
      return new ResponseTooLargeError(w.bytes ?? 0, w.limit ?? 0);
    default:
      return new Error(`query worker: ${w.name}: ${w.message}`);
  }
}
