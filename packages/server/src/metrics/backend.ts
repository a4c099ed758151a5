import {
  createEngine,
  type Engine,
  injectTenant,
  parse,
  type QueryOptions,
  type QueryResult,
  type QueryValue,
  TENANT_LABEL,
} from "../promql/index.ts";
import {
  isStaleMarker,
  type LabelMatcher,
  type Labels,
  type Queryable,
  type SeriesData,
} from "../storage/interface.ts";

export { TENANT_LABEL };

/**
 * Every reader of metrics (the RPCs, the Prometheus API, export, the evaluator) goes through this
 * interface, so the embedded store and a remote Prometheus-compatible engine are interchangeable and
 * tenancy is enforced in one place. All times are **milliseconds**, bounds inclusive. Results never
 * carry the tenant label and never include another project's series. Returned arrays belong to the
 * caller.
 */
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
  /** Raw samples of the project's series matching all matchers in [startMs, endMs]. */
  select(
    projectId: string,
    matchers: readonly LabelMatcher[],
    startMs: number,
    endMs: number,
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
}

export interface LatestSample {
  readonly labels: Labels;
  readonly timestampMs: number;
  readonly value: number;
}

function scoped(projectId: string, matchers: readonly LabelMatcher[]): LabelMatcher[] {
  // ANDed onto the user's matchers, never replacing them: a user matcher on project_id can only
  // narrow the result further.
  return [...matchers, { type: "=", name: TENANT_LABEL, value: projectId }];
}

function stripTenant(labels: Labels): Labels {
  return labels.filter((l) => l.name !== TENANT_LABEL);
}

function labelsKey(labels: Labels): string {
  return labels.map((l) => `${l.name}\u0000${l.value}`).join("\u0001");
}

function stripValue(v: QueryValue): QueryValue {
  switch (v.resultType) {
    case "vector":
      return { resultType: "vector", result: v.result.map((s) => ({ ...s, metric: stripTenant(s.metric) })) };
    case "matrix":
      return { resultType: "matrix", result: v.result.map((s) => ({ ...s, metric: stripTenant(s.metric) })) };
    default:
      return v;
  }
}

/** MetricsBackend over the embedded store (or any Queryable) and the embedded PromQL engine. */
export function createMetricsBackend(deps: { storage: Queryable; engine?: Engine }): MetricsBackend {
  const engine = deps.engine ?? createEngine();
  const sets = (ms: readonly (readonly LabelMatcher[])[]) => (ms.length === 0 ? [[]] : ms);
  return {
    async instantQuery(projectId, expr, timeMs, opts) {
      const r = engine.instantQuery(deps.storage, injectTenant(parse(expr), projectId), timeMs, opts);
      return { value: stripValue(r.value), annotations: r.annotations };
    },
    async rangeQuery(projectId, expr, startMs, endMs, stepMs, opts) {
      const r = engine.rangeQuery(
        deps.storage,
        injectTenant(parse(expr), projectId),
        startMs,
        endMs,
        stepMs,
        opts,
      );
      return { value: stripValue(r.value), annotations: r.annotations };
    },
    async select(projectId, matchers, startMs, endMs) {
      const q = deps.storage.querier();
      return q
        .select(scoped(projectId, matchers), startMs, endMs)
        .map((s) => ({ ...s, labels: stripTenant(s.labels) }));
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
      const q = deps.storage.querier();
      const out: LatestSample[] = [];
      for (const s of q.select(scoped(projectId, matchers), atMs - lookbackMs, atMs)) {
        const i = s.timestamps.length - 1;
        if (i < 0 || isStaleMarker(s.values, i)) continue;
        out.push({ labels: stripTenant(s.labels), timestampMs: s.timestamps[i], value: s.values[i] });
      }
      return out;
    },
  };
}
