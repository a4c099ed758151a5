import { StringDecoder } from "node:string_decoder";
import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import {
  decodeWriteRequestCompact,
  labelsOfKey,
  RemoteWriteDecodeError,
  snappyCompress,
  snappyDecompress,
} from "@svc/remotewrite";
import { QueryEvalError, TooManySamplesError } from "../../promql/index.ts";
import {
  type LabelMatcher,
  type Labels,
  type SeriesData,
  writeStaleMarker,
} from "../../storage/interface.ts";
import { labelsKey } from "../backend.ts";
import { labelsOf, type PromApiClient, type RequestOpts, seconds, selectorOf } from "./api-client.ts";
import { MetricsEngineUnavailableError } from "./errors.ts";

/**
 * Raw samples from the engine, staleness markers included (svc's engine needs them to end a series
 * the way the embedded store does). `budget.remaining` is what the query may still load; a read
 * that would pass it throws TooManySamplesError, before its samples are all in memory where the
 * engine's answer allows (VictoriaMetrics' export is counted line by line as it streams; a
 * Prometheus remote-read answer is one message, refused while decoding, before its sample arrays
 * are allocated).
 */
export interface RawSampleReader {
  /** Which endpoint it reads: `remote-read` (Prometheus, Mimir, Thanos) or `export` (VictoriaMetrics). */
  readonly kind: "remote-read" | "export";
  /** Series matching all matchers with their samples in [mintMs, maxtMs] (inclusive), sorted by labels. */
  select(
    matchers: readonly LabelMatcher[],
    mintMs: number,
    maxtMs: number,
    budget: SampleBudget,
    req?: RequestOpts,
  ): Promise<SeriesData[]>;
}

/** What one query may still load from the engine, samples; `limit` is the whole budget. */
export interface SampleBudget {
  remaining: number;
  readonly limit: number;
}

/** Prometheus' remote read (`/api/v1/read`, SAMPLES response): protobuf, exact raw samples. */
export function remoteReadReader(client: PromApiClient): RawSampleReader {
  return {
    kind: "remote-read",
    async select(matchers, mintMs, maxtMs, budget, req) {
      const res = await client.post(
        "/api/v1/read",
        snappyCompress(encodeReadRequest(matchers, mintMs, maxtMs)),
        {
          "Content-Encoding": "snappy",
          "Content-Type": "application/x-protobuf",
          "X-Prometheus-Remote-Read-Version": "0.1.0",
        },
        req,
      );
      const body = new Uint8Array(await res.bytes());
      if (!res.ok) {
        const text = new TextDecoder().decode(body.subarray(0, 300)).trim();
        throw new QueryEvalError(`the metrics engine refused a remote read: HTTP ${res.status}: ${text}`);
      }
      let raw: Uint8Array;
      try {
        raw = snappyDecompress(body, 2 ** 31 - 1);
      } catch {
        throw new MetricsEngineUnavailableError(
          "the metrics engine sent a remote-read answer that does not decode",
        );
      }
      return decodeReadResponse(raw, budget);
    },
  };
}

/** VictoriaMetrics' `/api/v1/export` (JSON lines; a staleness marker is `null`). */
export function exportReader(client: PromApiClient): RawSampleReader {
  return {
    kind: "export",
    async select(matchers, mintMs, maxtMs, budget, req) {
      const res = await client.stream(
        "/api/v1/export",
        [
          ["match[]", selectorOf(matchers)],
          ["start", seconds(mintMs)],
          ["end", seconds(maxtMs)],
        ],
        req,
      );
      if (!res.ok) {
        const text = (await res.text()).trim().slice(0, 300);
        throw new QueryEvalError(`the metrics engine refused an export: HTTP ${res.status}: ${text}`);
      }
      const out: SeriesData[] = [];
      const decoder = new StringDecoder("utf8");
      let rest = "";
      const line = (l: string) => {
        if (l.trim() === "") return;
        const s = JSON.parse(l) as {
          metric: Record<string, string>;
          values: (number | null)[];
          timestamps: number[];
        };
        budget.remaining -= s.values.length;
        if (budget.remaining < 0)
          throw new TooManySamplesError(budget.limit, budget.limit - budget.remaining);
        out.push(exportSeries(labelsOf(s.metric), s.timestamps, s.values, mintMs, maxtMs));
      };
      try {
        for await (const chunk of res.body as AsyncIterable<Buffer>) {
          rest += decoder.write(chunk);
          let nl = rest.indexOf("\n");
          while (nl >= 0) {
            line(rest.slice(0, nl));
            rest = rest.slice(nl + 1);
            nl = rest.indexOf("\n");
          }
        }
        line(rest + decoder.end());
      } catch (err) {
        res.body.destroy();
        if (err instanceof SyntaxError)
          throw new MetricsEngineUnavailableError("the metrics engine sent an export line that is not JSON");
        throw err;
      }
      return sortByLabels(out);
    },
  };
}

/**
 * Which raw reader the engine at `client` takes: VictoriaMetrics (whose buildinfo carries no
 * Prometheus version) exports, everything else (Prometheus, Mimir, Thanos) answers remote read.
 */
export async function detectRawReader(client: PromApiClient, req?: RequestOpts): Promise<RawSampleReader> {
  const data = (await client.json("/api/v1/status/buildinfo", [], req).catch((err) => {
    // An engine without the endpoint is no Prometheus; an unreachable one must be retried later.
    if (err instanceof MetricsEngineUnavailableError) throw err;
    return {};
  })) as { version?: unknown } | undefined;
  return typeof data?.version === "string" && data.version !== ""
    ? remoteReadReader(client)
    : exportReader(client);
}

function exportSeries(
  labels: Labels,
  ts: readonly number[],
  vs: readonly (number | null)[],
  mintMs: number,
  maxtMs: number,
): SeriesData {
  // Ascending, one sample per timestamp (a retried batch the engine stored twice counts once).
  const order = ts.map((_, i) => i);
  if (!ts.every((t, i) => i === 0 || ts[i - 1] <= t)) order.sort((a, b) => ts[a] - ts[b]);
  const timestamps = new Float64Array(order.length);
  const values = new Float64Array(order.length);
  let k = 0;
  for (const i of order) {
    const t = ts[i];
    if (t < mintMs || t > maxtMs || (k > 0 && timestamps[k - 1] === t)) continue;
    timestamps[k] = t;
    const v = vs[i];
    if (v === null) writeStaleMarker(values, k);
    else values[k] = v;
    k++;
  }
  return { labels, timestamps: timestamps.subarray(0, k), values: values.subarray(0, k) };
}

const MATCH_TYPE = { "=": 0, "!=": 1, "=~": 2, "!~": 3 } as const;

/** `ReadRequest { repeated Query queries = 1; }` with one Query (prompb/remote.proto). */
function encodeReadRequest(matchers: readonly LabelMatcher[], mintMs: number, maxtMs: number): Uint8Array {
  const w = new BinaryWriter();
  w.tag(1, WireType.LengthDelimited).fork();
  w.tag(1, WireType.Varint).int64(mintMs);
  w.tag(2, WireType.Varint).int64(maxtMs);
  for (const m of matchers) {
    w.tag(3, WireType.LengthDelimited).fork();
    if (MATCH_TYPE[m.type] !== 0) w.tag(1, WireType.Varint).int32(MATCH_TYPE[m.type]);
    w.tag(2, WireType.LengthDelimited).string(m.name);
    w.tag(3, WireType.LengthDelimited).string(m.value);
    w.join();
  }
  w.join();
  return w.finish();
}

/**
 * `ReadResponse { repeated QueryResult results = 1; }`, where `QueryResult { repeated TimeSeries
 * timeseries = 1; }` is a WriteRequest on the wire: remote write's decoder reads it, with the budget
 * as its sample limit.
 */
function decodeReadResponse(bytes: Uint8Array, budget: SampleBudget): SeriesData[] {
  const r = new BinaryReader(bytes);
  const out: SeriesData[] = [];
  while (r.pos < r.len) {
    const [field, wt] = r.tag();
    if (field !== 1 || wt !== WireType.LengthDelimited) {
      r.skip(wt);
      continue;
    }
    let qr: ReturnType<typeof decodeWriteRequestCompact>;
    try {
      qr = decodeWriteRequestCompact(r.bytes(), {
        maxDecompressedBytes: 2 ** 31 - 1,
        maxSeries: 10_000_000,
        maxLabelsPerSeries: 256,
        maxSamples: Math.max(0, budget.remaining),
        maxLabelValueBytes: 65_536,
      });
    } catch (err) {
      if (err instanceof RemoteWriteDecodeError && err.limit === "maxSamples")
        throw new TooManySamplesError(budget.limit);
      throw new MetricsEngineUnavailableError(
        "the metrics engine sent a remote-read answer that does not decode",
      );
    }
    budget.remaining -= qr.sampleCount;
    for (let i = 0; i < qr.seriesCount; i++) {
      const a = qr.sampleStart[i];
      const b = qr.sampleStart[i + 1];
      const labels = labelsOf(Object.fromEntries(labelsOfKey(qr.labelKeys[i]).map((l) => [l.name, l.value])));
      // slice: each series owns its arrays (values copied bit for bit, markers included).
      out.push({ labels, timestamps: qr.timestampsMs.slice(a, b), values: qr.values.slice(a, b) });
    }
  }
  return sortByLabels(out);
}

function sortByLabels(series: SeriesData[]): SeriesData[] {
  const keyed = series.map((s) => [labelsKey(s.labels), s] as const);
  keyed.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return keyed.map(([, s]) => s);
}
