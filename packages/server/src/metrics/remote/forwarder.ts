import { type ColumnSeries, encodeLabelFields, encodeSeriesColumns, snappyCompress } from "@svc/remotewrite";
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

  // Each series' labels encoded once: the ingester hands the same Labels object for a series in
  // every batch, and encoding ~7 label pairs per sample was most of svc's forwarding CPU.
  const labelFieldsOf = new WeakMap<Labels, Uint8Array>();
  const labelFields = (labels: Labels): Uint8Array => {
    let f = labelFieldsOf.get(labels);
    if (f === undefined) {
      f = encodeLabelFields(labels);
      labelFieldsOf.set(labels, f);
    }
    return f;
  };

  // Each body is encoded into this buffer and compressed at once (bodies() never awaits), so encoding
  // allocates nothing per body; it grows to the largest body seen (maxSamplesPerWrite bounds it).
  let scratch = new Uint8Array(0);

  /** Splits the batch into bodies of at most maxSamplesPerWrite samples (a big series is cut too). */
  function bodies(batch: Batch): Uint8Array[] {
    const out: Uint8Array[] = [];
    let part: ColumnSeries[] = [];
    let n = 0;
    const flush = () => {
      if (part.length > 0) {
        const pb = encodeSeriesColumns(part, batch.timestamps, batch.values, scratch);
        if (pb.buffer !== scratch.buffer) scratch = new Uint8Array(Math.ceil(pb.length * 1.25));
        out.push(snappyCompress(pb));
      }
      part = [];
      n = 0;
    };
    const t = batch.timestamps;
    for (const [labels, samples] of batch.series) {
      // Remote write wants each series' samples ascending; a client may send them in any order.
      if (!ascending(samples, t)) samples.sort((a, b) => t[a] - t[b]);
      const fields = labelFields(labels);
      for (let i = 0; i < samples.length; ) {
        const take = Math.min(samples.length - i, o.maxSamplesPerWrite - n);
        part.push({
          labelFields: fields,
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
      return {
        append(labels, timestampMs, value) {
          if (!Number.isSafeInteger(timestampMs)) return false;
          const b = batch;
          let s = b.series.get(labels);
          if (!s) {
            s = [];
            b.series.set(labels, s);
          }
          if (b.count === b.values.length) {
            const grown = new Float64Array(b.values.length * 2);
            grown.set(b.values);
            b.values = grown;
          }
          // A Float64Array keeps a staleness marker's NaN payload; a plain number array would not.
          b.values[b.count] = value;
          b.timestamps.push(timestampMs);
          s.push(b.count++);
          return true;
        },
        async commit(): Promise<AppendResult> {
          const done = batch;
          batch = newBatch();
          const accepted = done.count;
          const parts = bodies(done);
          let next = 0;
          let failed = false;
          const worker = async () => {
            for (let i = next++; i < parts.length && !failed; i = next++) {
              try {
                await post(parts[i]);
              } catch (err) {
                failed = true; // the other parts stop: the whole batch is retried by its writer
                throw err;
              }
            }
          };
          await Promise.all(Array.from({ length: Math.min(o.writeConcurrency, parts.length) }, worker));
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

/** One commit's samples: positions per series (by the ingester's Labels object) into two columns. */
interface Batch {
  readonly series: Map<Labels, number[]>;
  readonly timestamps: number[];
  values: Float64Array;
  count: number;
}

function ascending(samples: readonly number[], t: readonly number[]): boolean {
  for (let i = 1; i < samples.length; i++) if (t[samples[i - 1]] > t[samples[i]]) return false;
  return true;
}

function newBatch(): Batch {
  return { series: new Map(), timestamps: [], values: new Float64Array(1024), count: 0 };
}
