import { encodeRemoteWriteBody, type Sample, type TimeSeries } from "@svc/remotewrite";
import type { Logger } from "pino";
import type { Appender, AppendResult, Labels, Storage } from "../../storage/interface.ts";
import { MetricsEngineUnavailableError, RemoteWriteRefusedError, safeOrigin } from "./errors.ts";
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
export function createRemoteWriteStorage(o: WriteOptions & { log?: Logger }): Storage {
  const origin = safeOrigin(o.remoteWriteUrl);

  async function postOnce(body: Uint8Array): Promise<"ok" | { retry: string }> {
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
      };
    }
    const text = await res.text().catch(() => "");
    if (res.status >= 200 && res.status < 300) return "ok";
    if (res.status >= 500 || res.status === 429) return { retry: `HTTP ${res.status}` };
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
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, o.writeBackoffMaxMs);
    }
  }

  /** Splits the batch into bodies of at most maxSamplesPerWrite samples (a big series is cut too). */
  function bodies(series: ReadonlyMap<Labels, Sample[]>): Uint8Array[] {
    const out: Uint8Array[] = [];
    let part: TimeSeries[] = [];
    let n = 0;
    const flush = () => {
      if (part.length > 0) out.push(encodeRemoteWriteBody({ timeseries: part }));
      part = [];
      n = 0;
    };
    for (const [labels, samples] of series) {
      // Remote write wants each series' samples ascending; a client may send them in any order.
      if (!samples.every((s, i) => i === 0 || samples[i - 1].timestampMs <= s.timestampMs))
        samples.sort((a, b) => a.timestampMs - b.timestampMs);
      for (let i = 0; i < samples.length; ) {
        const take = Math.min(samples.length - i, o.maxSamplesPerWrite - n);
        part.push({ labels, samples: samples.slice(i, i + take) });
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
      // By label set: the ingester hands the same Labels object for every sample of a series.
      let series = new Map<Labels, Sample[]>();
      let count = 0;
      return {
        append(labels, timestampMs, value) {
          if (!Number.isSafeInteger(timestampMs)) return false;
          let s = series.get(labels);
          if (!s) {
            s = [];
            series.set(labels, s);
          }
          // An object keeps a staleness marker's NaN payload; a plain number array would not.
          s.push({ timestampMs, value });
          count++;
          return true;
        },
        async commit(): Promise<AppendResult> {
          const batch = series;
          const accepted = count;
          series = new Map();
          count = 0;
          const parts = bodies(batch);
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
          return { accepted, refused: {} };
        },
        rollback() {
          series = new Map();
          count = 0;
        },
      };
    },
    querier() {
      throw new Error("the remote metrics backend reads through the engine's API, not this store");
    },
    async close() {},
  };
}
