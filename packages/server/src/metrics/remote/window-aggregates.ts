import { extrapolate } from "../../promql/engine/rangefuncs.ts";
import { QueryTimeoutError, type RangeSeries } from "../../promql/index.ts";
import { type LabelMatcher, labelValue, type SeriesData } from "../../storage/interface.ts";
import { labelsKey, stripTenant, type WindowOutcome, type WindowRequest } from "../backend.ts";
import { type StepGrid, stepAggregate, withoutStaleMarkers } from "../windows.ts";
import { type PromApiClient, selectorOf } from "./api-client.ts";
import type { RawSampleReader, SampleBudget } from "./raw-read.ts";

/**
 * How the engine bounds a range window `[w]` at t: Prometheus before 3.0 includes a sample at exactly
 * t − w ([t − w, t]); Prometheus 3, VictoriaMetrics and svc do not ((t − w, t]).
 */
export type WindowBounds = "left-closed" | "left-open";

/**
 * Asks the engine itself: `count_over_time(vector(1)[2s:1s])` at a whole second counts the subquery
 * points at t − 2 s, t − 1 s, t (3, left-closed) or only the last two (2, left-open). Subqueries and
 * range selectors share their bounds in every Prometheus version.
 */
export async function probeWindowBounds(client: PromApiClient, signal?: AbortSignal): Promise<WindowBounds> {
  const data = (await client.json(
    "/api/v1/query",
    [
      ["query", "count_over_time(vector(1)[2s:1s])"],
      ["time", "1700000000"],
      ["nocache", "1"],
    ],
    { signal },
  )) as { result?: { value?: [number, string] }[] };
  return data?.result?.[0]?.value?.[1] === "3" ? "left-closed" : "left-open";
}

/**
 * windowAggregates against a remote engine. `max_over_time`, `avg_over_time` and `last_over_time`
 * are pushed down, because they mean the same in PromQL and MetricsQL once the window's left bound
 * is made the same (a left-closed engine is asked for `[w − 1ms]`: timestamps are whole
 * milliseconds). `rate` itself is not: MetricsQL's rate neither extrapolates nor stays inside the
 * window, and Prometheus 2's left-closed window changes its extrapolation. On VictoriaMetrics svc
 * computes it from exact per-window pieces (ratePiecesQuery) and every request goes in one query;
 * where a window may hold a counter reset, and on other engines, svc reads the raw samples and
 * computes it with the embedded backend's own sweep (windows.ts), one read per metric for all its
 * rate requests; other engines get one range query per pushed-down request, `concurrency` at a time.
 */
export async function remoteWindowAggregates(
  deps: {
    client: PromApiClient;
    reader: RawSampleReader;
    bounds: WindowBounds;
    concurrency: number;
    maxSamples: number;
  },
  scopedMatchers: LabelMatcher[],
  requests: readonly WindowRequest[],
  startMs: number,
  endMs: number,
  stepMs: number,
  signal: AbortSignal | undefined,
): Promise<WindowOutcome[]> {
  const grid: StepGrid = {
    startMs,
    stepMs,
    points: endMs >= startMs ? Math.floor((endMs - startMs) / stepMs) + 1 : 0,
  };
  const lastStep = startMs + (grid.points - 1) * stepMs;
  const out: WindowOutcome[] = new Array(requests.length);
  if (grid.points === 0) return requests.map(() => ({ ok: true, series: [] }));

  const jobs: (() => Promise<void>)[] = [];
  const owners = new Map<() => Promise<void>, number[]>();
  // rate swept in svc over raw samples: one read per metric, as wide as its widest rate window,
  // shared by that metric's rate requests (started on first use).
  const rawReads = new Map<string, Promise<SeriesData[]>>();
  const rawRate = (metric: string, windowMs: number): Promise<RangeSeries[]> => {
    let read = rawReads.get(metric);
    if (!read) {
      const widest = Math.max(
        ...requests.filter((r) => r.fn === "rate" && r.metric === metric).map((r) => r.windowMs),
      );
      const budget: SampleBudget = { remaining: deps.maxSamples, limit: deps.maxSamples };
      read = deps.reader.select(
        [...scopedMatchers, { type: "=", name: "__name__", value: metric }],
        startMs - widest + 1,
        lastStep,
        budget,
        { signal },
      );
      rawReads.set(metric, read);
    }
    return read.then((data) => {
      const series: RangeSeries[] = [];
      for (const s of data) {
        const { t, v } = withoutStaleMarkers(s.timestamps, s.values);
        const steps = stepAggregate(t, v, grid, windowMs, "rate");
        if (steps.timestamps.length === 0) continue;
        const metricLabels = stripTenant(s.labels).filter((l) => l.name !== "__name__");
        series.push({ metric: metricLabels, timestamps: steps.timestamps, values: steps.values });
      }
      return series;
    });
  };
  const selector = (metric: string) =>
    selectorOf([...scopedMatchers, { type: "=", name: "__name__", value: metric }]);
  const pushedDown = (r: WindowRequest) =>
    `${r.fn}(${selector(r.metric)}[${deps.bounds === "left-closed" ? r.windowMs - 1 : r.windowMs}ms])`;
  // The answer of pushedDown(r) as svc's series.
  const fromEngine = (r: WindowRequest, got: readonly RangeSeries[]): RangeSeries[] => {
    const keepName = r.fn === "last_over_time";
    const series: RangeSeries[] = [];
    for (const s of got) {
      if (s.timestamps.length === 0) continue;
      let metric = stripTenant(s.metric);
      // VictoriaMetrics keeps the name on max_over_time and avg_over_time; PromQL drops it.
      if (!keepName) metric = metric.filter((l) => l.name !== "__name__");
      else if (labelValue(metric, "__name__") === "")
        metric = [{ name: "__name__", value: r.metric }, ...metric];
      series.push({ metric, timestamps: s.timestamps, values: s.values });
    }
    return byLabels(series);
  };

  if (deps.reader.kind === "export") {
    // VictoriaMetrics: every request in one MetricsQL query (one round trip), told apart by a label;
    // rate from its per-window pieces (ratePiecesQuery), or from the raw samples of a metric where a
    // window may hold a counter reset.
    try {
      if (signal?.aborted) throw new QueryTimeoutError("query timed out before the aggregates were read");
      const got = (
        await Promise.all(
          victoriaMetricsQueries(requests, selector).map((expr) =>
            deps.client.queryRange(expr, startMs, lastStep, stepMs, { signal }),
          ),
        )
      ).flat();
      const parts: RangeSeries[][] = requests.map(() => []);
      for (const s of got) {
        const i = Number(labelValue(s.metric, REQUEST));
        parts[i]?.push({ ...s, metric: s.metric.filter((l) => l.name !== REQUEST) });
      }
      await Promise.all(
        requests.map(async (r, i) => {
          try {
            const pieces = r.fn === "rate" ? rateFromPieces(parts[i], r.windowMs) : undefined;
            const series =
              r.fn !== "rate" ? fromEngine(r, parts[i]) : (pieces ?? (await rawRate(r.metric, r.windowMs)));
            out[i] = { ok: true, series };
          } catch (err) {
            out[i] = { ok: false, error: err instanceof Error ? err : new Error(String(err)) };
          }
        }),
      );
    } catch (err) {
      const error = err instanceof Error ? err : new Error(String(err));
      return requests.map(() => ({ ok: false, error }));
    }
    return out;
  }

  // Other engines: one range query per pushed-down request, rate from the raw samples.
  requests.forEach((r, i) => {
    const job = async () => {
      if (r.fn === "rate") {
        out[i] = { ok: true, series: await rawRate(r.metric, r.windowMs) };
        return;
      }
      const got = await deps.client.queryRange(pushedDown(r), startMs, lastStep, stepMs, { signal });
      out[i] = { ok: true, series: fromEngine(r, got) };
    };
    jobs.push(job);
    owners.set(job, [i]);
  });

  // Served `concurrency` at a time; a failure is the outcome of the request that job served.
  let next = 0;
  const worker = async () => {
    for (let k = next++; k < jobs.length; k = next++) {
      const job = jobs[k];
      try {
        if (signal?.aborted) throw new QueryTimeoutError("query timed out before this aggregate was read");
        await job();
      } catch (err) {
        const error = err instanceof Error ? err : new Error(String(err));
        for (const i of owners.get(job) ?? []) out[i] = { ok: false, error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(deps.concurrency, jobs.length) }, worker));
  return out;
}

function byLabels(series: RangeSeries[]): RangeSeries[] {
  const keyed = series.map((s) => ({ s, k: labelsKey(s.metric) }));
  keyed.sort((a, b) => (a.k < b.k ? -1 : a.k > b.k ? 1 : 0));
  return keyed.map((x) => x.s);
}

/**
 * VictoriaMetrics' queries for all of a windowAggregates call's requests (its windows are left-open):
 * each request's expression, `rate` as its pieces, tagged with its index, as few `union`s as keep
 * each query under MAX_QUERY_BYTES (usually one).
 */
export function victoriaMetricsQueries(
  requests: readonly WindowRequest[],
  selector: (metric: string) => string,
): string[] {
  const queries: string[] = [];
  let parts: string[] = [];
  let bytes = 0;
  requests.forEach((r, i) => {
    const sel = selector(r.metric);
    const e = r.fn === "rate" ? ratePiecesQuery(sel, r.windowMs) : `${r.fn}(${sel}[${r.windowMs}ms])`;
    const part = `label_set(${e},"${REQUEST}","${i}")`;
    const n = Buffer.byteLength(part) + 1;
    if (parts.length > 0 && bytes + n > MAX_QUERY_BYTES) {
      queries.push(`union(${parts.join(",")})`);
      parts = [];
      bytes = 0;
    }
    parts.push(part);
    bytes += n;
  });
  if (parts.length > 0) queries.push(`union(${parts.join(",")})`);
  return queries;
}

/**
 * VictoriaMetrics refuses a query longer than `-search.maxQueryLen` (16 KiB by default); all twenty
 * metrics of QueryVMMonitoring with long names come to ~17 KB, so the requests are split below it.
 */
const MAX_QUERY_BYTES = 8000;

/** The label that tells the requests of VictoriaMetrics' one query apart (removed from what svc returns). */
const REQUEST = "svc_request";

/** The label that tells the pieces of ratePiecesQuery apart (removed from what svc returns). */
const PIECE = "svc_rate_piece";

/**
 * The pieces Prometheus' extrapolated `rate(m[w])` is computed from, per window (t − w, t], as one
 * MetricsQL range query: sample count, first and last value, first and last sample time (s), and
 * `resets`. Each is exact on VictoriaMetrics (1.79; tested against svc's sweep in remote.test.ts):
 * they read the window's own samples, staleness markers excluded. `resets` alone also looks at the
 * sample before the window, so it may count a drop into the window: it is only used as a guard
 * (0 = no reset inside). Not used: `increase_prometheus`, whose counter-reset correction treats a
 * drop of less than 1/8 as jitter (100 → 95 is no reset there, a reset in PromQL).
 */
export function ratePiecesQuery(selector: string, windowMs: number): string {
  const piece = (fn: string, tag: string) =>
    `label_set(${fn}(${selector}[${windowMs}ms]),"${PIECE}","${tag}")`;
  return `union(${[
    piece("count_over_time", "n"),
    piece("first_over_time", "fv"),
    piece("last_over_time", "lv"),
    piece("tfirst_over_time", "ft"),
    piece("tlast_over_time", "lt"),
    piece("resets", "r"),
  ].join(",")})`;
}

/**
 * `rate` per series and step from ratePiecesQuery's answer, with the engine's own extrapolation
 * (promql extrapolate, as windows.ts stepAggregate): a window with fewer than 2 samples has no
 * value. Undefined when a window may hold a counter reset (its correction is not among the pieces):
 * the caller then reads the raw samples.
 */
export function rateFromPieces(got: readonly RangeSeries[], windowMs: number): RangeSeries[] | undefined {
  const bySeries = new Map<string, { metric: RangeSeries["metric"]; pieces: Map<string, RangeSeries> }>();
  for (const s of got) {
    const tag = labelValue(s.metric, PIECE);
    const metric = stripTenant(s.metric).filter((l) => l.name !== "__name__" && l.name !== PIECE);
    const k = labelsKey(metric);
    const entry = bySeries.get(k) ?? { metric, pieces: new Map<string, RangeSeries>() };
    bySeries.set(k, entry);
    entry.pieces.set(tag, s);
  }
  const series: RangeSeries[] = [];
  for (const { metric, pieces } of bySeries.values()) {
    const n = pieces.get("n");
    if (!n) continue;
    // A piece's value at step t; steps are asked in ascending order, as a matrix lists them, so a
    // cursor finds them without a Map per piece (~2,000 entries per 7-day call).
    const at = (tag: string) => {
      const p = pieces.get(tag);
      let j = 0;
      return {
        get(t: number): number | undefined {
          if (!p) return undefined;
          const ts = p.timestamps;
          while (j < ts.length && ts[j] < t) j++;
          return j < ts.length && ts[j] === t ? p.values[j] : undefined;
        },
      };
    };
    const fv = at("fv");
    const lv = at("lv");
    const ft = at("ft");
    const lt = at("lt");
    const resets = at("r");
    const outT: number[] = [];
    const outV: number[] = [];
    for (let i = 0; i < n.timestamps.length; i++) {
      const end = n.timestamps[i];
      const cnt = n.values[i];
      if (!(cnt >= 2)) continue;
      const r = resets.get(end);
      if (r === undefined || r !== 0) return undefined;
      const firstV = fv.get(end);
      const lastV = lv.get(end);
      const firstS = ft.get(end);
      const lastS = lt.get(end);
      if (firstV === undefined || lastV === undefined || firstS === undefined || lastS === undefined)
        return undefined;
      outT.push(end);
      outV.push(
        extrapolate(
          lastV - firstV,
          Math.round(firstS * 1000),
          firstV,
          Math.round(lastS * 1000),
          cnt,
          end - windowMs,
          end,
          true,
          true,
          windowMs,
        ),
      );
    }
    if (outT.length > 0)
      series.push({ metric, timestamps: Float64Array.from(outT), values: Float64Array.from(outV) });
  }
  return byLabels(series);
}
