import { counter, histogram, LATENCY_BUCKETS, type Registry } from "../instrument.ts";
import type { ApiError } from "./errors.ts";

const APIS = ["query", "query_range"] as const;
/** The Prometheus-API endpoints that evaluate PromQL. */
export type QueryApi = (typeof APIS)[number];
const OUTCOMES = ["ok", "timeout", "too_many_samples", "rate_limited", "bad_request", "error"] as const;

/** PromQL queries of the Prometheus API (Grafana's path): how many, how they ended, how long. */
export function createQueryMetrics(registry: Registry) {
  return {
    queries: counter(
      registry,
      "svc_promql_queries_total",
      "PromQL queries of the Prometheus API by endpoint and outcome (rate_limited: answered 429).",
      ["api", "outcome"],
      APIS.flatMap((api) => OUTCOMES.map((outcome) => ({ api, outcome }))),
    ),
    duration: histogram(
      registry,
      "svc_promql_query_duration_seconds",
      "Duration of a Prometheus-API PromQL query, the wait for a query slot included.",
      LATENCY_BUCKETS,
      ["api"],
    ),
  };
}

export type QueryMetrics = ReturnType<typeof createQueryMetrics>;

/** The outcome label of a refused query. */
export function queryOutcome(e: ApiError): (typeof OUTCOMES)[number] {
  if (e.errorType === "timeout") return "timeout";
  if (e.errorType === "too_many_requests") return "rate_limited";
  if (e.message.includes("[TOO_MANY_SAMPLES]")) return "too_many_samples";
  if (e.errorType === "bad_data") return "bad_request";
  return "error";
}
