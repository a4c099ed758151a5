import type { Expr } from "../promql/ast.ts";
import { type CostRange, DEFAULT_INLINE_QUERY_COST, estimateCost } from "../promql/cost.ts";
import {
  type AnswerEncoding,
  chargingCpu,
  createEngine,
  type EncodedAnswer,
  type Engine,
  injectTenant,
  parse,
  type QueryOptions,
  type QueryPool,
  type QueryResult,
  QueryTimeoutError,
  type RangeSeries,
  TENANT_LABEL,
  withoutTenant,
} from "../promql/index.ts";
import { queryAnswerJson } from "../promql/json.ts";
import {
  isStaleMarker,
  type LabelMatcher,
  type Labels,
  labelValue,
  type Queryable,
  type RollupSeriesData,
  type SeriesData,
} from "../storage/interface.ts";
import { ALL_ROLLUP_COLUMNS } from "../storage/rollups.ts";
import { regexQuote } from "./latest.ts";
import {
  rollupColumnsFor,
  rollupStepAggregate,
  rollupsServe,
  stepAggregate,
  type WindowFunction,
  withoutStaleMarkers,
} from "./windows.ts";

export type { WindowFunction };
export { TENANT_LABEL };

/** One step aggregate of `windowAggregates`: `fn(<metric>{matchers}[windowMs])`. */
export interface WindowRequest {
  /** Stored metric name (`__name__`). */
  readonly metric: string;
  readonly fn: WindowFunction;
  /** Window range, ms: step t aggregates the samples with t − windowMs < ts ≤ t. */
  readonly windowMs: number;
}

/** What one WindowRequest produced: the matrix, or why it could not be read. */
export type WindowOutcome =
  | { readonly ok: true; readonly series: RangeSeries[] }
  | { readonly ok: false; readonly error: Error };

/**
 * Every reader of metrics (the RPCs, the Prometheus API, export, the evaluator) goes through this
 * interface, so the embedded store and a remote Prometheus-compatible engine are interchangeable and
 * tenancy is enforced in one place. All times are **milliseconds**, bounds inclusive. Results never
 * carry the tenant label and never include another project's series. Returned arrays belong to the
 * caller.
 */
/** When a query is evaluated: at one instant, or on a range's steps (ms, inclusive). */
export type QueryAt =
  | { readonly timeMs: number }
  | { readonly startMs: number; readonly endMs: number; readonly stepMs: number };

export interface MetricsBackend {
  /**
   * Evaluates PromQL at `timeMs` over the project's series only: the expression is parsed, the tenant
   * matcher is ANDed onto every selector, and the tenant label is removed from the result. Throws the
   * promql errors (parse, timeout, point budget, evaluation).
   */
  instantQuery(projectId: string, expr: string, timeMs: number, opts?: QueryOptions): Promise<QueryResult>;
  /** As instantQuery, at start, start+step, … ≤ end (ms, inclusive); the result is a matrix. */
  rangeQuery(
    projectId: string,
    expr: string,
    startMs: number,
    endMs: number,
    stepMs: number,
    opts?: QueryOptions,
  ): Promise<QueryResult>;
  /**
   * Optional: instantQuery (`at.timeMs`) or rangeQuery (`at.startMs` … `at.endMs` by `at.stepMs`)
   * answered as the Prometheus API's success body (the tenant label removed), built and compressed
   * where the query ran — a query worker — so the event loop only writes bytes; or, for a query
   * cheap enough to evaluate inline (promql/cost.ts), the body as text, to be compressed by the
   * caller. Absent where the answer would be built on the event loop anyway (no worker pool, the
   * remote backend).
   */
  queryEncoded?(
    projectId: string,
    expr: string,
    at: QueryAt,
    encoding: AnswerEncoding,
    opts?: QueryOptions,
  ): Promise<EncodedAnswer | string>;
  /**
   * Raw samples of the project's series matching all matchers in [startMs, endMs]. `opts.charge`
   * false: not charged to the project's query CPU (svc's own reads, such as ingest's). `opts.labels`:
   * the caller looks at these label names only, and the backend may return only those (the embedded
   * store then builds no others; SelectHints.labels).
   */
  select(
    projectId: string,
    matchers: readonly LabelMatcher[],
    startMs: number,
    endMs: number,
    opts?: Pick<QueryOptions, "charge"> & { readonly labels?: readonly string[] },
  ): Promise<SeriesData[]>;
  /** Label sets of the project's series matching any matcher set, sorted, de-duplicated. */
  series(
    projectId: string,
    matcherSets: readonly (readonly LabelMatcher[])[],
    startMs: number,
    endMs: number,
  ): Promise<Labels[]>;
  /** Label names in use by the project's series (matching any set, or all when empty), sorted. */
  labelNames(
    projectId: string,
    matcherSets: readonly (readonly LabelMatcher[])[],
    startMs: number,
    endMs: number,
  ): Promise<string[]>;
  /** Values of one label on the project's series, sorted. The tenant label has none. */
  labelValues(
    projectId: string,
    name: string,
    matcherSets: readonly (readonly LabelMatcher[])[],
    startMs: number,
    endMs: number,
  ): Promise<string[]>;
  /**
   * The newest sample of each matching series in [atMs − lookbackMs, atMs]. A series whose newest
   * sample is a staleness marker is absent (it ended), never reported as a value.
   */
  latest(
    projectId: string,
    matchers: readonly LabelMatcher[],
    atMs: number,
    lookbackMs: number,
  ): Promise<LatestSample[]>;
  /**
   * Step aggregates of several stored metrics over the same series selection and step grid, in one
   * call: outcome i is exactly the matrix of the PromQL range query
   * `<fn>({__name__="<metric>", <matchers>…}[<windowMs>ms])` at startMs, startMs + stepMs, … ≤ endMs
   * (ms, inclusive), with the result labels that query has (the name dropped except by
   * last_over_time). A remote backend implements it with one `rangeQuery` per request; the embedded
   * one reads each stored metric once for all requests naming it and sweeps each series' samples
   * once per request instead of evaluating PromQL (see windows.ts).
   *
   * One deadline (`opts.timeoutMs`, from the call) covers the read and the requests, served in
   * order: a request not started before it is a QueryTimeoutError outcome, and so are the ones after
   * it, while earlier outcomes stand (the embedded store reads all requests' samples at once, so a
   * read that overruns the deadline times every request out). Any other failure is an outcome too:
   * a failed read fails every request, a failed computation only its own; the call itself only
   * rejects when the backend is unusable.
   */
  windowAggregates(
    projectId: string,
    matchers: readonly LabelMatcher[],
    requests: readonly WindowRequest[],
    startMs: number,
    endMs: number,
    stepMs: number,
    opts?: QueryOptions,
  ): Promise<WindowOutcome[]>;
}

export interface LatestSample {
  readonly labels: Labels;
  readonly timestampMs: number;
  readonly value: number;
}

/** The project's matchers: the tenant matcher ANDed onto the user's. */
export function scoped(projectId: string, matchers: readonly LabelMatcher[]): LabelMatcher[] {
  // ANDed onto the user's matchers, never replacing them: a user matcher on project_id can only
  // narrow the result further.
  return [...matchers, { type: "=", name: TENANT_LABEL, value: projectId }];
}

/** A label set without the tenant label. */
export function stripTenant(labels: Labels): Labels {
  return labels.filter((l) => l.name !== TENANT_LABEL);
}

/** A label set as one string that orders and compares as the set does. */
export function labelsKey(labels: Labels): string {
  return labels.map((l) => `${l.name}\u0000${l.value}`).join("\u0001");
}

/**
 * MetricsBackend over the embedded store (or any Queryable) and the embedded PromQL engine. `now`
 * (ms) times the deadline of windowAggregates; tests inject it.
 */
export function createMetricsBackend(deps: {
  storage: Queryable;
  engine?: Engine;
  now?: () => number;
  /**
   * Resolution of the store's rollups (ms; 0 or absent: none). windowAggregates reads rollups
   * instead of raw samples when the step, window and start are multiples of it.
   */
  rollupResolutionMs?: number;
  /**
   * Evaluates instantQuery and rangeQuery in worker threads (promql/pool) instead of on the event
   * loop; absent: the engine runs inline (tests, tools).
   */
  queryPool?: QueryPool;
  /**
   * With a pool: queries estimated at no more than this many sample visits (promql/cost.ts) are
   * evaluated inline, where a worker's hand-off would cost more than the evaluation; 0: every
   * query goes to the pool. Default DEFAULT_INLINE_QUERY_COST. A function is read per query (a bench
   * switches it between rows: bench/vm-query/small-ab.ts).
   */
  inlineQueryCost?: number | (() => number);
  /**
   * Told the CPU seconds of each read evaluated on this thread (an inline query, windowAggregates,
   * select, latest) with its project; the pool tells its own queries' (QueryPoolOptions.onCpu).
   */
  chargeCpu?: (projectId: string, seconds: number) => void;
}): MetricsBackend {
  const rollupMs = deps.rollupResolutionMs ?? 0;
  // Every read below is synchronous, so the thread's CPU around it is the read's own.
  const charged = <T>(projectId: string, opts: QueryOptions | undefined, fn: () => T): T =>
    chargingCpu(
      deps.chargeCpu && opts?.charge !== false ? (s) => deps.chargeCpu?.(projectId, s) : undefined,
      fn,
    );
  const pool = deps.queryPool;
  // Beside a pool, queries evaluated inline keep the workers' limits.
  const engine =
    deps.engine ?? createEngine(pool ? { ...pool.options.engine, maxSamples: pool.options.maxSamples } : {});
  const now = deps.now ?? (() => performance.now());
  const costOption = deps.inlineQueryCost ?? DEFAULT_INLINE_QUERY_COST;
  const inlineCostNow = typeof costOption === "function" ? costOption : () => costOption;
  // Inline only when the project has no worker it may take now (each of its others busy, or it is at
  // its share): the burst's queries then run on two threads, the loop and the worker, instead of
  // queueing for the one worker, and a query evaluated inline is bounded by the estimate.
  const inline = (projectId: string, ast: Expr, range: CostRange): boolean => {
    const max = inlineCostNow();
    return (
      max > 0 &&
      pool !== undefined &&
      !pool.hasFreeWorker(projectId) &&
      estimateCost(ast, deps.storage.querier(), range, max) <= max
    );
  };
  const sets = (ms: readonly (readonly LabelMatcher[])[]) => (ms.length === 0 ? [[]] : ms);
  return {
    async instantQuery(projectId, expr, timeMs, opts) {
      const ast = injectTenant(parse(expr), projectId);
      const r = pool
        ? await pool.instantQuery(deps.storage, ast, timeMs, { ...opts, tenant: projectId })
        : charged(projectId, opts, () => engine.instantQuery(deps.storage, ast, timeMs, opts));
      return { value: withoutTenant(r.value), annotations: r.annotations, stats: r.stats };
    },
    async rangeQuery(projectId, expr, startMs, endMs, stepMs, opts) {
      const ast = injectTenant(parse(expr), projectId);
      const r = pool
        ? await pool.rangeQuery(deps.storage, ast, startMs, endMs, stepMs, { ...opts, tenant: projectId })
        : charged(projectId, opts, () => engine.rangeQuery(deps.storage, ast, startMs, endMs, stepMs, opts));
      return { value: withoutTenant(r.value), annotations: r.annotations, stats: r.stats };
    },
    ...(pool && {
      async queryEncoded(projectId, expr, at, encoding, opts) {
        const ast = injectTenant(parse(expr), projectId);
        const range = "timeMs" in at ? { startMs: at.timeMs, endMs: at.timeMs, stepMs: 0 } : at;
        if (inline(projectId, ast, range)) {
          const r = charged(projectId, opts, () =>
            "timeMs" in at
              ? engine.instantQuery(deps.storage, ast, at.timeMs, opts)
              : engine.rangeQuery(deps.storage, ast, at.startMs, at.endMs, at.stepMs, opts),
          );
          return queryAnswerJson(
            { value: withoutTenant(r.value), annotations: r.annotations },
            encoding.maxBytes,
          );
        }
        const o = { ...opts, tenant: projectId };
        return "timeMs" in at
          ? pool.instantQueryEncoded(deps.storage, ast, at.timeMs, encoding, o)
          : pool.rangeQueryEncoded(deps.storage, ast, at.startMs, at.endMs, at.stepMs, encoding, o);
      },
    }),
    async select(projectId, matchers, startMs, endMs, opts) {
      const pick = opts?.labels;
      return charged(projectId, opts, () => {
        const data = deps.storage
          .querier()
          .select(scoped(projectId, matchers), startMs, endMs, pick && { labels: pick });
        // Labels picked without the tenant's have nothing to strip.
        return pick && !pick.includes(TENANT_LABEL)
          ? data
          : data.map((s) => ({ ...s, labels: stripTenant(s.labels) }));
      });
    },
    async series(projectId, matcherSets, startMs, endMs) {
      const q = deps.storage.querier();
      const seen = new Map<string, Labels>();
      for (const m of matcherSets) {
        for (const s of q.select(scoped(projectId, m), startMs, endMs, { labelsOnly: true })) {
          const labels = stripTenant(s.labels);
          seen.set(labelsKey(labels), labels);
        }
      }
      return [...seen.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, l]) => l);
    },
    async labelNames(projectId, matcherSets, startMs, endMs) {
      const q = deps.storage.querier();
      const names = new Set<string>();
      for (const m of sets(matcherSets))
        for (const n of q.labelNames(scoped(projectId, m), startMs, endMs)) names.add(n);
      names.delete(TENANT_LABEL);
      return [...names].sort();
    },
    async labelValues(projectId, name, matcherSets, startMs, endMs) {
      if (name === TENANT_LABEL) return [];
      const q = deps.storage.querier();
      const values = new Set<string>();
      for (const m of sets(matcherSets))
        for (const v of q.labelValues(name, scoped(projectId, m), startMs, endMs)) values.add(v);
      return [...values].sort();
    },
    async latest(projectId, matchers, atMs, lookbackMs) {
      return charged(projectId, undefined, () => latestOf(projectId, matchers, atMs, lookbackMs));
    },
    async windowAggregates(projectId, matchers, requests, startMs, endMs, stepMs, opts) {
      return charged(projectId, opts, () =>
        windowAggregatesOf(projectId, matchers, requests, startMs, endMs, stepMs, opts),
      );
    },
  };

  function latestOf(
    projectId: string,
    matchers: readonly LabelMatcher[],
    atMs: number,
    lookbackMs: number,
  ): LatestSample[] {
    const q = deps.storage.querier();
    const out: LatestSample[] = [];
    const sel = scoped(projectId, matchers);
    if (q.selectLatest) {
      const l = q.selectLatest(sel, atMs - lookbackMs, atMs);
      for (let i = 0; i < l.labels.length; i++) {
        if (isStaleMarker(l.values, i)) continue;
        out.push({ labels: stripTenant(l.labels[i]), timestampMs: l.timestamps[i], value: l.values[i] });
      }
      return out;
    }
    for (const s of q.select(sel, atMs - lookbackMs, atMs)) {
      const i = s.timestamps.length - 1;
      if (i < 0 || isStaleMarker(s.values, i)) continue;
      out.push({ labels: stripTenant(s.labels), timestampMs: s.timestamps[i], value: s.values[i] });
    }
    return out;
  }

  function windowAggregatesOf(
    projectId: string,
    matchers: readonly LabelMatcher[],
    requests: readonly WindowRequest[],
    startMs: number,
    endMs: number,
    stepMs: number,
    opts: QueryOptions | undefined,
  ): WindowOutcome[] {
    const deadline = opts?.timeoutMs === undefined ? Number.POSITIVE_INFINITY : now() + opts.timeoutMs;
    const grid = {
      startMs,
      stepMs,
      points: endMs >= startMs ? Math.floor((endMs - startMs) / stepMs) + 1 : 0,
    };
    const lastStep = startMs + (grid.points - 1) * stepMs;
    // One select for every requested metric (the store tests the name alternation against the
    // VM's few series per block), from the earliest sample any window needs.
    let widest = 0;
    for (const r of requests) widest = Math.max(widest, r.windowMs);
    const names = [...new Set(requests.map((r) => r.metric))];
    const byName = new Map<string, RollupSeriesData[]>(names.map((n) => [n, []]));
    let readError: Error | undefined;
    if (requests.length > 0 && now() > deadline)
      readError = new QueryTimeoutError(`query timed out after ${opts?.timeoutMs} ms`);
    else if (requests.length > 0) {
      try {
        const q = deps.storage.querier();
        const sel = scoped(projectId, [
          ...matchers,
          { type: "=~", name: "__name__", value: names.map(regexQuote).join("|") },
        ]);
        // Rollups stand for the raw samples when every window is a union of whole buckets.
        const viaRollups =
          q.selectRollups !== undefined && requests.every((r) => rollupsServe(grid, r.windowMs, rollupMs));
        // Each metric's series are decoded only in the bucket columns its functions read.
        const columns = new Map<string, number>();
        for (const r of requests)
          columns.set(r.metric, (columns.get(r.metric) ?? 0) | rollupColumnsFor(r.fn));
        const columnsOf = (labels: Labels) =>
          columns.get(labelValue(labels, "__name__")) ?? ALL_ROLLUP_COLUMNS;
        const data: RollupSeriesData[] = viaRollups
          ? (q.selectRollups?.(sel, startMs - widest, lastStep, rollupMs, columnsOf) ?? [])
          : q.select(sel, startMs - widest + 1, lastStep);
        for (const s of data) {
          const labels = stripTenant(s.labels);
          const entry = byName.get(labelValue(s.labels, "__name__"));
          if (s.rollups)
            entry?.push({ labels, timestamps: s.timestamps, values: s.values, rollups: s.rollups });
          else {
            const { t, v } = withoutStaleMarkers(s.timestamps, s.values);
            entry?.push({ labels, timestamps: t, values: v });
          }
        }
      } catch (err) {
        readError = err instanceof Error ? err : new Error(String(err));
      }
    }
    const out: WindowOutcome[] = [];
    for (const r of requests) {
      // Past the deadline (during the read or the sweeps before), the rest is stopped and said so.
      if (!readError && now() > deadline)
        readError = new QueryTimeoutError(`query timed out after ${opts?.timeoutMs} ms`);
      if (readError) {
        out.push({ ok: false, error: readError });
        continue;
      }
      try {
        const data = byName.get(r.metric) ?? [];
        const keepName = r.fn === "last_over_time";
        const series: RangeSeries[] = [];
        for (const s of data) {
          // The cursors skip samples older than this request's own (possibly narrower) window.
          const steps = s.rollups
            ? rollupStepAggregate(s.rollups, grid, r.windowMs, r.fn)
            : stepAggregate(s.timestamps, s.values, grid, r.windowMs, r.fn);
          if (steps.timestamps.length === 0) continue;
          const metric = keepName ? s.labels : s.labels.filter((l) => l.name !== "__name__");
          series.push({ metric, timestamps: steps.timestamps, values: steps.values });
        }
        out.push({ ok: true, series });
      } catch (err) {
        out.push({ ok: false, error: err instanceof Error ? err : new Error(String(err)) });
      }
    }
    return out;
  }
}
