import {
  type ColumnSeries,
  encodeLabelFields,
  encodeSeriesColumns,
  encodeSeriesRuns,
  snappyCompress,
} from "@svc/remotewrite";
import type { Logger } from "pino";
import type { Appender, AppendResult, Labels, Storage } from "../../storage/interface.ts";
import { MetricsEngineUnavailableError, RemoteWriteRefusedError, safeOrigin } from "./errors.ts";
import type { RemoteMetrics } from "./instrumentation.ts";
import { failureStatus } from "./instrumentation.ts";
import type { RemoteMetricsOptions } from "./options.ts";
import { type EngineResponse, engineRequest } from "./transport.ts";

type WriteOptions = Pick<
  RemoteMetricsOptions,
  | "remoteWriteUrl"
  | "headers"
  | "writeTimeoutMs"
  | "writeRetryBudgetMs"
  | "writeBackoffMs"
  | "writeBackoffMaxMs"
  | "maxSamplesPerWrite"
  | "writeConcurrency"
>;

/**
 * The write side of the remote backend, as the Storage the ingester appends to: `append` buffers,
 * `commit()` sends the batch with remote write 1.0 and resolves only once the engine answered 2xx to
 * every part of it. 5xx, 429 and no answer are retried with capped exponential backoff within
 * `writeRetryBudgetMs`, then the commit rejects with MetricsEngineUnavailableError (the ingest
 * client is not acknowledged and retries the batch; engines store a repeated sample once). A 4xx is
 * not retried: RemoteWriteRefusedError names the engine's answer. Reads never come here.
 */
export function createRemoteWriteStorage(
  o: WriteOptions & { log?: Logger; instruments?: RemoteMetrics },
): Storage {
  const origin = safeOrigin(o.remoteWriteUrl);
  const m = o.instruments;

  async function postOnce(body: Uint8Array): Promise<"ok" | { retry: string }> {
    const t0 = performance.now();
    const r = await postOnceUnmeasured(body).catch((err: unknown) => {
      if (err instanceof RemoteWriteRefusedError)
        m?.writeFailures.inc({ status: failureStatus(err.engineStatus) });
      throw err;
    });
    if (m) {
      m.writeDuration.observe((performance.now() - t0) / 1000);
      if (r !== "ok") m.writeFailures.inc({ status: r.status });
    }
    return r;
  }

  async function postOnceUnmeasured(body: Uint8Array): Promise<"ok" | { retry: string; status: string }> {
    let res: EngineResponse;
    try {
      res = await engineRequest(o.remoteWriteUrl, {
        method: "POST",
        headers: {
          ...o.headers,
          "Content-Encoding": "snappy",
          "Content-Type": "application/x-protobuf",
          "X-Prometheus-Remote-Write-Version": "0.1.0",
        },
        body,
        signal: AbortSignal.timeout(o.writeTimeoutMs),
      });
    } catch (err) {
      const e = err as Error & { cause?: { code?: string } };
      return {
        retry:
          e.name === "TimeoutError" ? `no answer within ${o.writeTimeoutMs} ms` : (e.cause?.code ?? e.name),
        status: failureStatus(undefined, e.name === "TimeoutError"),
      };
    }
    const text = await res.text().catch(() => "");
    if (res.status >= 200 && res.status < 300) return "ok";
    if (res.status >= 500 || res.status === 429)
      return { retry: `HTTP ${res.status}`, status: failureStatus(res.status) };
    throw new RemoteWriteRefusedError(origin, res.status, text);
  }

  async function post(body: Uint8Array): Promise<void> {
    const until = Date.now() + o.writeRetryBudgetMs;
    let delay = o.writeBackoffMs;
    for (let attempt = 1; ; attempt++) {
      const r = await postOnce(body);
      if (r === "ok") return;
      if (Date.now() + delay > until) {
        throw new MetricsEngineUnavailableError(
          `the metrics engine at ${origin} did not take the samples (${r.retry}, ${attempt} attempts); retry later`,
        );
      }
      o.log?.warn({ engine: origin, attempt, why: r.retry }, "remote write failed; retrying");
      m?.writeRetries.inc();
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, o.writeBackoffMaxMs);
    }
  }

  // Each series' labels encoded once, in a slot the ingester's Labels object finds again (by the
  // ref appendRef returns, else through the WeakMap): the same Labels object comes in every batch,
  // and encoding ~7 label pairs per sample was most of svc's forwarding CPU.
  const slotOf = new WeakMap<Labels, Slot>();
  let slots: Slot[] = [];
  const slotFor = (ref: number, labels: Labels): Slot => {
    const held = slots[ref];
    if (held !== undefined && held.labels === labels) return held;
    let s = slotOf.get(labels);
    if (s === undefined) {
      s = { labels, fields: encodeLabelFields(labels), id: -1, mark: 0 };
      slotOf.set(labels, s);
    }
    if (slots[s.id] !== s) {
      // The table holds its series strongly; churned ones go when it is started afresh.
      if (slots.length >= MAX_SLOTS) slots = [];
      s.id = slots.length;
      slots.push(s);
    }
    return s;
  };

  // Bodies are encoded uncompressed per commit and compressed when they are posted (group commit
  // below), through this buffer, which grows to the largest group (maxSamplesPerWrite bounds it).
  let scratch = new Uint8Array(0);
  const compressGroup = (units: readonly Unit[]): Uint8Array => {
    if (units.length === 1) return snappyCompress(units[0].pb);
    let size = 0;
    for (const u of units) size += u.pb.length;
    if (scratch.length < size) scratch = new Uint8Array(Math.ceil(size * 1.25));
    let p = 0;
    // Protobuf concatenation is a merge: two WriteRequests one after another are one WriteRequest
    // with both lists of series.
    for (const u of units) {
      scratch.set(u.pb, p);
      p += u.pb.length;
    }
    return snappyCompress(scratch.subarray(0, size));
  };

  /**
   * Group commit: a commit's bodies are queued; while a round of POSTs is under way, the commits
   * made meanwhile wait, and the next round posts all of them merged, as few POSTs of at most
   * maxSamplesPerWrite samples (at setImmediate, so the requests Node read in one poll go together
   * too). Each commit still resolves only once every one of its bodies was taken by the engine, and
   * a commit that fails (a refusal, or no answer within the retry budget) is the whole batch's
   * failure for its writer, as before. Before, each ingest request was its own POST: with 4 senders
   * the bench's 1,200 requests are now ~660 POSTs (docs/performance.md "Remote forwarder, second
   * pass"). The cost: a commit made during a retry's backoff waits for that round.
   */
  let queued: Unit[] = [];
  let scheduled = false;
  let rounds = 0; // flushes whose POSTs are under way
  const schedule = () => {
    if (scheduled || rounds >= MAX_ROUNDS || queued.length === 0) return;
    scheduled = true;
    setImmediate(flush);
  };
  const enqueue = (units: Unit[]): void => {
    for (const u of units) queued.push(u);
    schedule();
  };
  function flush(): void {
    scheduled = false;
    const units = queued;
    queued = [];
    const groups: Unit[][] = [];
    let group: Unit[] = [];
    let n = 0;
    for (const u of units) {
      if (group.length > 0 && n + u.samples > o.maxSamplesPerWrite) {
        groups.push(group);
        group = [];
        n = 0;
      }
      group.push(u);
      n += u.samples;
    }
    if (group.length > 0) groups.push(group);
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < groups.length; i = next++) await postGroup(groups[i]);
    };
    rounds++;
    void Promise.all(Array.from({ length: Math.min(o.writeConcurrency, groups.length) }, worker)).finally(
      () => {
        rounds--;
        schedule();
      },
    );
  }

  async function postGroup(units: readonly Unit[]): Promise<void> {
    try {
      await post(compressGroup(units));
      for (const u of units) u.done(undefined);
    } catch (err) {
      if (units.length > 1 && err instanceof RemoteWriteRefusedError) {
        // A refusal names what one commit sent: each is posted alone, so it lands only on its own.
        for (const u of units) await postGroup([u]);
        return;
      }
      for (const u of units) u.done(err);
    }
  }

  let serial = 0;

  /**
   * Splits the batch into bodies (uncompressed protobuf) of at most maxSamplesPerWrite samples (a big
   * series is cut too).
   * The ingester appends a series' samples one after another, so a batch is one run per series,
   * each ascending, sent as it lies; a series in two runs, or a run out of time order, goes through
   * the general path, which groups and sorts.
   */
  function bodies(batch: Batch): Uint8Array[] {
    const mark = ++serial; // bodies() is synchronous: no other batch marks slots meanwhile
    const { runs, starts, timestamps: t } = batch;
    starts.push(batch.count);
    for (let k = 0; k < runs.length; k++) {
      const s = runs[k];
      if (s.mark === mark || !ascendingRun(t, starts[k], starts[k + 1])) return groupedBodies(batch);
      s.mark = mark;
    }
    const out: Uint8Array[] = [];
    let fields: Uint8Array[] = [];
    let from: number[] = [];
    let to: number[] = [];
    let n = 0;
    const flush = () => {
      if (fields.length > 0) out.push(encodeSeriesRuns(fields, from, to, t, batch.values));
      fields = [];
      from = [];
      to = [];
      n = 0;
    };
    for (let k = 0; k < runs.length; k++) {
      for (let i = starts[k]; i < starts[k + 1]; ) {
        const take = Math.min(starts[k + 1] - i, o.maxSamplesPerWrite - n);
        fields.push(runs[k].fields);
        from.push(i);
        to.push(i + take);
        n += take;
        i += take;
        if (n >= o.maxSamplesPerWrite) flush();
      }
    }
    flush();
    return out;
  }

  /** bodies() for any batch: each series' samples gathered from all its runs and sorted by time. */
  function groupedBodies(batch: Batch): Uint8Array[] {
    const bySlot = new Map<Slot, number[]>();
    const { runs, starts } = batch;
    for (let k = 0; k < runs.length; k++) {
      let list = bySlot.get(runs[k]);
      if (!list) {
        list = [];
        bySlot.set(runs[k], list);
      }
      for (let i = starts[k]; i < starts[k + 1]; i++) list.push(i);
    }
    const out: Uint8Array[] = [];
    let part: ColumnSeries[] = [];
    let n = 0;
    const flush = () => {
      if (part.length > 0) out.push(encodeSeriesColumns(part, batch.timestamps, batch.values));
      part = [];
      n = 0;
    };
    const t = batch.timestamps;
    for (const [slot, samples] of bySlot) {
      // Remote write wants each series' samples ascending; a client may send them in any order.
      if (!ascending(samples, t)) samples.sort((a, b) => t[a] - t[b]);
      for (let i = 0; i < samples.length; ) {
        const take = Math.min(samples.length - i, o.maxSamplesPerWrite - n);
        part.push({
          labelFields: slot.fields,
          samples: take === samples.length ? samples : samples.slice(i, i + take),
        });
        n += take;
        i += take;
        if (n >= o.maxSamplesPerWrite) flush();
      }
    }
    flush();
    return out;
  }

  return {
    appender(): Appender {
      let batch = newBatch();
      const appendRef = (ref: number, labels: Labels, timestampMs: number, value: number): number => {
        if (!Number.isSafeInteger(timestampMs)) return -1;
        const b = batch;
        const s = slotFor(ref, labels);
        if (s !== b.last) {
          b.runs.push(s);
          b.starts.push(b.count);
          b.last = s;
        }
        if (b.count === b.values.length) {
          b.values = grown(b.values);
          b.timestamps = grown(b.timestamps);
        }
        // A Float64Array keeps a staleness marker's NaN payload; a plain number array would not.
        b.values[b.count] = value;
        b.timestamps[b.count++] = timestampMs;
        return s.id;
      };
      return {
        append: (labels, timestampMs, value) => appendRef(-1, labels, timestampMs, value) >= 0,
        appendRef,
        async commit(): Promise<AppendResult> {
          const done = batch;
          batch = newBatch();
          const accepted = done.count;
          if (accepted === 0) return { accepted, refused: {} };
          const parts = bodies(done);
          await new Promise<void>((resolve, reject) => {
            let left = parts.length;
            let failed = false;
            const settle = (err: unknown) => {
              if (failed) return;
              if (err !== undefined) {
                failed = true; // the whole batch is retried by its writer
                reject(err);
              } else if (--left === 0) resolve();
            };
            // Each body's samples: the parts are cut at maxSamplesPerWrite, the last holds the rest.
            let rest = accepted;
            enqueue(
              parts.map((pb, i) => {
                const samples = i < parts.length - 1 ? o.maxSamplesPerWrite : rest;
                rest -= samples;
                return { pb, samples, done: settle };
              }),
            );
          });
          m?.samples.inc(accepted);
          return { accepted, refused: {} };
        },
        rollback() {
          batch = newBatch();
        },
      };
    },
    querier() {
      throw new Error("the remote metrics backend reads through the engine's API, not this store");
    },
    async close() {},
  };
}

/** One body of a commit, waiting for its group's POST; `done` settles it (an error, or undefined). */
interface Unit {
  readonly pb: Uint8Array;
  readonly samples: number;
  readonly done: (err: unknown) => void;
}

/** A forwarded series: its labels (the ingester's object) and their encoded fields. */
interface Slot {
  readonly labels: Labels;
  readonly fields: Uint8Array;
  /** Its index in the forwarder's table (the ref appendRef returns), -1 before it has one. */
  id: number;
  /** The bodies() call that last saw it in a batch (duplicate runs). */
  mark: number;
}

/** Group commits whose POSTs may be under way at once; commits made meanwhile wait and are merged. */
const MAX_ROUNDS = 1;

/** Series the forwarder's table holds before it starts afresh (ingest caches as many). */
const MAX_SLOTS = 1_000_000;

/**
 * One commit's samples in two columns, as runs: run k is series `runs[k]` at positions
 * `starts[k]` up to `starts[k + 1]` (or `count`).
 */
interface Batch {
  readonly runs: Slot[];
  readonly starts: number[];
  last: Slot | undefined;
  timestamps: Float64Array;
  values: Float64Array;
  count: number;
}

function ascending(samples: readonly number[], t: ArrayLike<number>): boolean {
  for (let i = 1; i < samples.length; i++) if (t[samples[i - 1]] > t[samples[i]]) return false;
  return true;
}

function ascendingRun(t: Float64Array, from: number, to: number): boolean {
  for (let i = from + 1; i < to; i++) if (t[i - 1] > t[i]) return false;
  return true;
}

function grown(a: Float64Array): Float64Array {
  const g = new Float64Array(a.length * 2);
  g.set(a);
  return g;
}

function newBatch(): Batch {
  return {
    runs: [],
    starts: [],
    last: undefined,
    timestamps: new Float64Array(1024),
    values: new Float64Array(1024),
    count: 0,
  };
}
