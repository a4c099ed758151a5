import type { Logger } from "pino";
import {
  chargingCpu,
  createEngine,
  type Engine,
  injectTenant,
  parse,
  type QueryOptions,
  type QueryPool,
  type QueryResult,
  TENANT_LABEL,
  withoutTenant,
} from "../../promql/index.ts";
import { isStaleMarker, type LabelMatcher, type Labels, type SeriesData } from "../../storage/interface.ts";
import { type LatestSample, labelsKey, type MetricsBackend, scoped, stripTenant } from "../backend.ts";
import { createPromApiClient, labelsOf, seconds, selectorOf } from "./api-client.ts";
import { MetricsEngineUnavailableError, safeOrigin } from "./errors.ts";
import type { RemoteMetrics } from "./instrumentation.ts";
import type { RemoteMetricsOptions } from "./options.ts";
import { evaluatePrefetched } from "./prefetch.ts";
import type { RawSampleReader, SampleBudget } from "./raw-read.ts";
import { probeWindowBounds, remoteWindowAggregates, type WindowBounds } from "./window-aggregates.ts";

/** The remote backend: every MetricsBackend read, plus the engine's readiness for /readyz. */
export interface RemoteMetricsBackend extends MetricsBackend {
  /** Resolves when the engine answers its readiness endpoint; rejects with why not. */
  ready(): Promise<void>;
  /** What svc learnt about the engine (after the first read): its raw-sample endpoint and windows. */
  engineTraits(): Promise<{ raw: RawSampleReader["kind"]; windows: WindowBounds }>;
}

/**
 * MetricsBackend over a remote Prometheus-compatible engine (docs/decisions.md, "Remote metrics
 * backend"). Tenant PromQL (instantQuery, rangeQuery) is evaluated by svc's own engine over raw
 * samples fetched per selector, so answers and limits are svc's on every engine; windowAggregates
 * pushes down the functions PromQL and MetricsQL agree on; series and label reads are the engine's
 * index lookups. Every selector sent carries `project_id="<project>"`, added here, and the label is
 * removed from what comes back.
 */
export function createRemoteMetricsBackend(deps: {
  options: RemoteMetricsOptions;
  /** Evaluates instantQuery and rangeQuery in worker threads; absent: inline. */
  queryPool?: QueryPool;
  /** The inline engine (and the dry run's); its options must be the pool workers'. */
  engine?: Engine;
  /** Warns once about an engine configured in a way svc cannot answer consistently over. */
  log?: Logger;
  instruments?: RemoteMetrics;
  /** Told the CPU seconds of each query evaluated inline with its project (the pool tells its own). */
  chargeCpu?: (projectId: string, seconds: number) => void;
}): RemoteMetricsBackend {
  const o = deps.options;
  const engine = deps.engine ?? createEngine({ maxSamples: o.maxSamples });
  const client = createPromApiClient({
    baseUrl: o.queryUrl,
    headers: o.headers,
    timeoutMs: o.readTimeoutMs,
    instruments: deps.instruments,
  });
  const origin = safeOrigin(o.queryUrl);
  const charge = (projectId: string, opts: QueryOptions | undefined) =>
    deps.chargeCpu && opts?.charge !== false ? (s: number) => deps.chargeCpu?.(projectId, s) : undefined;

  // Learnt on first use and kept; a failed probe (engine down) is retried by the next read.
  let traits: Promise<{ reader: RawSampleReader; bounds: WindowBounds }> | undefined;
  const learn = () => {
    traits ??= (async () => {
      // raw-read.ts loads protobuf's runtime: on first use, not at start (docs/performance.md, "Start-up").
      const { detectRawReader } = await import("./raw-read.ts");
      const [reader, bounds] = await Promise.all([detectRawReader(client), probeWindowBounds(client)]);
      if (reader.kind === "export") void warnOnLatencyOffset();
      return { reader, bounds };
    })();
    traits.catch(() => {
      traits = undefined;
    });
    return traits;
  };
  /**
   * VictoriaMetrics hides samples newer than now − `-search.latencyOffset` (30 s by default) from
   * queries and repeats the last older value in their place, so pushed-down aggregates of the last
   * half-minute would be wrong. Its /metrics names the flag's value; svc says so once.
   */
  async function warnOnLatencyOffset(): Promise<void> {
    try {
      const res = await fetch(`${new URL(o.queryUrl).origin}/metrics`, {
        headers: { ...o.headers },
        signal: AbortSignal.timeout(o.readTimeoutMs),
      });
      const text = await res.text();
      const value = /^flag\{name="search\.latencyOffset", value="([^"]*)"/m.exec(text)?.[1];
      if (value !== undefined && !/^0[a-z]*$/.test(value))
        deps.log?.warn(
          { engine: origin, latencyOffset: value },
          "VictoriaMetrics runs with -search.latencyOffset above 0: the newest window aggregates repeat older values; start it with -search.latencyOffset=0s (docs/deploy.md)",
        );
    } catch {
      // Best effort: a cluster's vmselect may not serve /metrics under the query URL's origin.
    }
  }
  // The query's own deadline covers the fetches too (the pool's starts when evaluation does).
  const deadline = (opts?: { signal?: AbortSignal; timeoutMs?: number }) => {
    const t = opts?.timeoutMs ? AbortSignal.timeout(opts.timeoutMs) : undefined;
    return t && opts?.signal ? AbortSignal.any([t, opts.signal]) : (t ?? opts?.signal);
  };
  const budget = (): SampleBudget => ({ remaining: o.maxSamples, limit: o.maxSamples });
  const sets = (ms: readonly (readonly LabelMatcher[])[]) => (ms.length === 0 ? [[]] : ms);

  async function selectRaw(
    projectId: string,
    matchers: readonly LabelMatcher[],
    mintMs: number,
    maxtMs: number,
    b: SampleBudget,
    signal?: AbortSignal,
  ): Promise<SeriesData[]> {
    const { reader } = await learn();
    return reader.select(scoped(projectId, matchers), mintMs, maxtMs, b, { signal });
  }

  async function evaluate(
    projectId: string,
    dryRun: (e: Engine, q: Parameters<Engine["instantQuery"]>[0]) => unknown,
    run: (q: Parameters<Engine["instantQuery"]>[0]) => Promise<QueryResult>,
    signal?: AbortSignal,
  ): Promise<QueryResult> {
    const b = budget();
    const r = await evaluatePrefetched({
      dryRun: (q) => dryRun(engine, q),
      run,
      // The tenant matcher is already in the tree (injectTenant); scoped() adds it again on the
      // selector actually sent, so nothing leaves svc without it.
      fetch: (m, mint, maxt) => selectRaw(projectId, m, mint, maxt, b, signal),
    });
    return { value: withoutTenant(r.value), annotations: r.annotations, stats: r.stats };
  }

  const labelParams = (
    projectId: string,
    matcherSets: readonly (readonly LabelMatcher[])[],
    s: number,
    e: number,
  ) => [
    ...sets(matcherSets).map((m) => ["match[]", selectorOf(scoped(projectId, m))] as const),
    ["start", seconds(s)] as const,
    ["end", seconds(e)] as const,
  ];

  return {
    async instantQuery(projectId, expr, timeMs, opts) {
      const ast = injectTenant(parse(expr), projectId);
      const pool = deps.queryPool;
      return evaluate(
        projectId,
        (e, q) => e.instantQuery(q, ast, timeMs, { lookbackDeltaMs: opts?.lookbackDeltaMs, timeoutMs: 0 }),
        async (q) =>
          pool
            ? pool.instantQuery(q, ast, timeMs, { ...opts, tenant: projectId })
            : chargingCpu(charge(projectId, opts), () => engine.instantQuery(q, ast, timeMs, opts)),
        deadline(opts),
      );
    },
    async rangeQuery(projectId, expr, startMs, endMs, stepMs, opts) {
      const ast = injectTenant(parse(expr), projectId);
      const pool = deps.queryPool;
      return evaluate(
        projectId,
        (e, q) =>
          e.rangeQuery(q, ast, startMs, endMs, stepMs, {
            lookbackDeltaMs: opts?.lookbackDeltaMs,
            timeoutMs: 0,
          }),
        async (q) =>
          pool
            ? pool.rangeQuery(q, ast, startMs, endMs, stepMs, { ...opts, tenant: projectId })
            : chargingCpu(charge(projectId, opts), () =>
                engine.rangeQuery(q, ast, startMs, endMs, stepMs, opts),
              ),
        deadline(opts),
      );
    },
    async select(projectId, matchers, startMs, endMs) {
      const data = await selectRaw(projectId, matchers, startMs, endMs, budget());
      return data.map((s) => ({ ...s, labels: stripTenant(s.labels) }));
    },
    async series(projectId, matcherSets, startMs, endMs) {
      if (matcherSets.length === 0) return [];
      const data = (await client.json(
        "/api/v1/series",
        labelParams(projectId, matcherSets, startMs, endMs),
      )) as Record<string, string>[];
      const seen = new Map<string, Labels>();
      for (const m of data ?? []) {
        const labels = stripTenant(labelsOf(m));
        seen.set(labelsKey(labels), labels);
      }
      return [...seen.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, l]) => l);
    },
    async labelNames(projectId, matcherSets, startMs, endMs) {
      const data = (await client.json(
        "/api/v1/labels",
        labelParams(projectId, matcherSets, startMs, endMs),
      )) as string[];
      return [...new Set(data ?? [])].filter((n) => n !== TENANT_LABEL).sort();
    },
    async labelValues(projectId, name, matcherSets, startMs, endMs) {
      if (name === TENANT_LABEL) return [];
      const data = (await client.json(
        `/api/v1/label/${encodeURIComponent(name)}/values`,
        labelParams(projectId, matcherSets, startMs, endMs),
      )) as string[];
      return [...new Set(data ?? [])].filter((v) => v !== "").sort();
    },
    async latest(projectId, matchers, atMs, lookbackMs) {
      // Raw samples, markers included: a series whose newest sample is a staleness marker ended.
      const data = await selectRaw(projectId, matchers, atMs - lookbackMs, atMs, budget());
      const out: LatestSample[] = [];
      for (const s of data) {
        const i = s.timestamps.length - 1;
        if (i < 0 || isStaleMarker(s.values, i)) continue;
        out.push({ labels: stripTenant(s.labels), timestampMs: s.timestamps[i], value: s.values[i] });
      }
      return out;
    },
    async windowAggregates(projectId, matchers, requests, startMs, endMs, stepMs, opts) {
      const signal = opts?.timeoutMs === undefined ? undefined : AbortSignal.timeout(opts.timeoutMs);
      let t: { reader: RawSampleReader; bounds: WindowBounds };
      try {
        t = await learn();
      } catch (err) {
        // An engine that cannot be reached fails every request, as a failed read does.
        const error = err instanceof Error ? err : new Error(String(err));
        return requests.map(() => ({ ok: false, error }));
      }
      return remoteWindowAggregates(
        {
          client,
          reader: t.reader,
          bounds: t.bounds,
          concurrency: o.readConcurrency,
          maxSamples: o.maxSamples,
        },
        scoped(projectId, matchers),
        requests,
        startMs,
        endMs,
        stepMs,
        signal,
      );
    },
    async ready() {
      const kind = await learn().then(
        (x) => x.reader.kind,
        () => undefined,
      );
      // VictoriaMetrics answers /health; Prometheus, Mimir and Thanos /-/ready.
      const paths =
        kind === "export" ? ["/health"] : kind === "remote-read" ? ["/-/ready"] : ["/-/ready", "/health"];
      let last = "";
      for (const p of paths) {
        const res = await fetch(`${client.baseUrl}${p}`, {
          headers: { ...o.headers },
          signal: AbortSignal.timeout(1000),
        }).catch((err: { cause?: { code?: string } }) => {
          throw new MetricsEngineUnavailableError(
            `the metrics engine at ${origin} is unavailable: ${err.cause?.code ?? "no answer"}`,
          );
        });
        await res.arrayBuffer().catch(() => {});
        if (res.ok) return;
        last = `HTTP ${res.status} on ${p}`;
      }
      throw new MetricsEngineUnavailableError(`the metrics engine at ${origin} is not ready: ${last}`);
    },
    async engineTraits() {
      const t = await learn();
      return { raw: t.reader.kind, windows: t.bounds };
    },
  };
}
