/**
 * The one place svc's own metrics are registered through: each domain builds its metrics object
 * beside its code (ingest/instrumentation.ts, tsdb/instrumentation.ts, …) with these helpers, so
 * every family follows Prometheus' naming guide (one `svc_` prefix, base units, `_total` on
 * counters, a HELP line) and lands in the registry /metrics serves. Label values must come from a
 * small known set (outcome, reason, kind): never a project id, VM name, key or URL.
 */
import {
  type CollectFunction,
  Counter,
  collectDefaultMetrics,
  Gauge,
  Histogram,
  Registry,
} from "prom-client";

export type { Counter, Gauge, Histogram, Registry };

const NAME = /^svc_[a-z][a-z0-9_]*[a-z0-9]$/;

/** Thrown at start-up when a family breaks the naming rules: caught by any test that builds the app. */
export class MetricNameError extends Error {
  constructor(name: string, why: string) {
    super(`metric ${name}: ${why}`);
    this.name = "MetricNameError";
  }
}

function check(name: string, help: string, kind: "counter" | "gauge" | "histogram"): void {
  if (!NAME.test(name)) throw new MetricNameError(name, "must match svc_[a-z0-9_]+");
  if (!help.trim()) throw new MetricNameError(name, "needs a HELP text");
  if (kind === "counter" && !name.endsWith("_total"))
    throw new MetricNameError(name, "a counter ends in _total");
  if (kind !== "counter" && name.endsWith("_total"))
    throw new MetricNameError(name, "only counters end in _total");
  if (/_(ms|milliseconds|kb|mb|percent)(_|$)/.test(name))
    throw new MetricNameError(name, "use base units (seconds, bytes, ratio)");
}

/**
 * A counter; `zero` lists label sets created at 0 up front, so a rate() over a reason that has not
 * happened yet reads 0 rather than nothing.
 */
export function counter<L extends string = never>(
  registry: Registry,
  name: string,
  help: string,
  labelNames: readonly L[] = [],
  zero: readonly Partial<Record<L, string>>[] = [],
): Counter<L> {
  check(name, help, "counter");
  const c = new Counter<L>({ name, help, labelNames, registers: [registry] });
  if (labelNames.length === 0) c.inc(0);
  for (const labels of zero) c.inc(labels as Partial<Record<L, string | number>>, 0);
  return c;
}

/** A gauge; with `collect`, its value is read at scrape time (nothing on the hot path). */
export function gauge<L extends string = never>(
  registry: Registry,
  name: string,
  help: string,
  labelNames: readonly L[] = [],
  collect?: CollectFunction<Gauge<L>>,
): Gauge<L> {
  check(name, help, "gauge");
  return new Gauge<L>({ name, help, labelNames, registers: [registry], ...(collect ? { collect } : {}) });
}

/** One sample of a family read at scrape time. */
export interface ReadSample {
  readonly labels?: Readonly<Record<string, string>>;
  readonly value: number;
}

/** What a scrape-time family reads: one value, several labelled ones, or nothing (absent, not zero). */
export type ReadValue = number | undefined | readonly ReadSample[];

/**
 * A family whose values are read when /metrics is scraped, from figures the domain keeps anyway
 * (head series, queue depth, the outbox backlog): nothing is updated on the hot path. `read`
 * returning undefined leaves the family without a sample, since missing data is not zero.
 */
export function observed(
  registry: Registry,
  type: "gauge" | "counter",
  name: string,
  help: string,
  read: () => ReadValue | Promise<ReadValue>,
): void {
  check(name, help, type);
  const metric = {
    name,
    help,
    type,
    aggregator: "sum" as const,
    async get() {
      const v = await read();
      const values =
        v === undefined
          ? []
          : typeof v === "number"
            ? [{ value: v, labels: {} }]
            : v.map((s) => ({ value: s.value, labels: s.labels ?? {} }));
      return { name, help, type, aggregator: "sum" as const, values };
    },
    reset() {},
  };
  registry.registerMetric(metric as unknown as Parameters<Registry["registerMetric"]>[0]);
}

/**
 * `read` once per scrape, however many families use its result: the first call computes it, and the
 * calls within the same turn of the event loop (one scrape collects every family at once) reuse it.
 */
export function perScrape<T>(read: () => T): () => T {
  let cached: { value: T } | undefined;
  return () => {
    if (!cached) {
      cached = { value: read() };
      setImmediate(() => {
        cached = undefined;
      });
    }
    return cached.value;
  };
}

/** A histogram; buckets in the unit of the name (seconds, bytes, count). */
export function histogram<L extends string = never>(
  registry: Registry,
  name: string,
  help: string,
  buckets: readonly number[],
  labelNames: readonly L[] = [],
): Histogram<L> {
  check(name, help, "histogram");
  return new Histogram<L>({ name, help, labelNames, buckets: [...buckets], registers: [registry] });
}

/** Latency buckets for work that takes from a millisecond to a minute, seconds. */
export const LATENCY_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
];

/** The process's registry: Node's and the process's default families, then each domain's. */
export function createRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  // Gauges named like counters, which `promtool check metrics` rejects; the per-type families
  // (nodejs_active_handles, nodejs_active_resources, nodejs_active_requests) carry the same figures.
  for (const name of [
    "nodejs_active_handles_total",
    "nodejs_active_requests_total",
    "nodejs_active_resources_total",
  ])
    registry.removeSingleMetric(name);
  return registry;
}

/** Exception-safe elapsed seconds since `t0` (performance.now() ms). */
export function secondsSince(t0: number): number {
  return (performance.now() - t0) / 1000;
}
