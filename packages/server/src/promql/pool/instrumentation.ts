import { observed, perScrape, type Registry } from "../../instrument.ts";
import type { QueryPool } from "./pool.ts";

/** The query worker pool's figures, read from the pool at scrape time (nothing on the query path). */
export function registerQueryPoolMetrics(registry: Registry, pool: QueryPool): void {
  const s = perScrape(() => pool.stats());
  observed(
    registry,
    "gauge",
    "svc_query_pool_workers",
    "Worker threads configured for PromQL queries.",
    () => s().size,
  );
  observed(
    registry,
    "gauge",
    "svc_query_pool_workers_busy",
    "Worker threads evaluating a query now.",
    () => s().running,
  );
  observed(
    registry,
    "gauge",
    "svc_query_pool_queue_depth",
    "Queries waiting for a worker thread.",
    () => s().queued,
  );
  observed(
    registry,
    "counter",
    "svc_query_pool_rejections_total",
    "Queries refused (HTTP 429) after waiting the longest allowed time for a worker.",
    () => s().rejected,
  );
  observed(
    registry,
    "counter",
    "svc_query_pool_workers_replaced_total",
    "Workers terminated at a query's deadline and replaced.",
    () => s().replaced,
  );
}
