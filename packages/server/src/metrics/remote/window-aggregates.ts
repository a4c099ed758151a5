import { QueryTimeoutError, type RangeSeries } from "../../promql/index.ts";
import { type LabelMatcher, labelValue } from "../../storage/interface.ts";
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
 * are pushed down, one range query each, because they mean the same in PromQL and MetricsQL once the
 * window's left bound is made the same (a left-closed engine is asked for `[w − 1ms]`: timestamps
 * are whole milliseconds). `rate` is not: MetricsQL's rate neither extrapolates nor stays inside
 * the window, so svc reads the raw samples and computes it with the embedded backend's own sweep
 * (windows.ts), one read per metric for all its rate requests.
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
  // rate: one raw read per metric, as wide as its widest window.
  const rateByMetric = new Map<string, number[]>();
  requests.forEach((r, i) => {
    if (r.fn === "rate") rateByMetric.set(r.metric, [...(rateByMetric.get(r.metric) ?? []), i]);
  });
  for (const [metric, idx] of rateByMetric) {
    jobs.push(async () => {
      const widest = Math.max(...idx.map((i) => requests[i].windowMs));
      const budget: SampleBudget = { remaining: deps.maxSamples, limit: deps.maxSamples };
      const data = await deps.reader.select(
        [...scopedMatchers, { type: "=", name: "__name__", value: metric }],
        startMs - widest + 1,
        lastStep,
        budget,
        { signal },
      );
      for (const i of idx) {
        const series: RangeSeries[] = [];
        for (const s of data) {
          const { t, v } = withoutStaleMarkers(s.timestamps, s.values);
          const steps = stepAggregate(t, v, grid, requests[i].windowMs, "rate");
          if (steps.timestamps.length === 0) continue;
          const metricLabels = stripTenant(s.labels).filter((l) => l.name !== "__name__");
          series.push({ metric: metricLabels, timestamps: steps.timestamps, values: steps.values });
        }
        out[i] = { ok: true, series };
      }
    });
  }
  requests.forEach((r, i) => {
    if (r.fn === "rate") return;
    jobs.push(async () => {
      const w = deps.bounds === "left-closed" ? r.windowMs - 1 : r.windowMs;
      const sel = selectorOf([...scopedMatchers, { type: "=", name: "__name__", value: r.metric }]);
      const got = await deps.client.queryRange(`${r.fn}(${sel}[${w}ms])`, startMs, lastStep, stepMs, {
        signal,
      });
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
      series.sort((a, b) => {
        const ka = labelsKey(a.metric);
        const kb = labelsKey(b.metric);
        return ka < kb ? -1 : ka > kb ? 1 : 0;
      });
      out[i] = { ok: true, series };
    });
  });

  // Served `concurrency` at a time; a failure is the outcome of the requests that job served.
  const owners = new Map<() => Promise<void>, number[]>();
  let j = 0;
  for (const [, idx] of rateByMetric) owners.set(jobs[j++], idx);
  requests.forEach((r, i) => {
    if (r.fn !== "rate") owners.set(jobs[j++], [i]);
  });
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
