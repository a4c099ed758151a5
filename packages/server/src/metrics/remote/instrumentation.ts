import { counter, histogram, LATENCY_BUCKETS, type Registry } from "../../instrument.ts";

/** A failure's status label: the HTTP code class, or what stopped the request (few values). */
export function failureStatus(httpStatus: number | undefined, timedOut = false): string {
  if (timedOut) return "timeout";
  if (httpStatus === undefined || httpStatus === 0) return "network";
  if (httpStatus === 429) return "429";
  return `${Math.floor(httpStatus / 100)}xx`;
}

const STATUSES = ["network", "timeout", "429", "4xx", "5xx"];

/** The remote backend: what was forwarded to the engine, how long writes and reads took, failures. */
export function createRemoteMetrics(registry: Registry) {
  return {
    samples: counter(
      registry,
      "svc_remote_write_samples_total",
      "Samples forwarded to the remote engine and accepted by it.",
    ),
    writeDuration: histogram(
      registry,
      "svc_remote_write_duration_seconds",
      "Duration of one remote-write request to the engine.",
      LATENCY_BUCKETS,
    ),
    writeFailures: counter(
      registry,
      "svc_remote_write_failures_total",
      "Remote-write requests the engine did not take, by status (network, timeout, 429, 4xx, 5xx).",
      ["status"],
      STATUSES.map((status) => ({ status })),
    ),
    writeRetries: counter(
      registry,
      "svc_remote_write_retries_total",
      "Remote-write requests sent again after a retryable failure.",
    ),
    readDuration: histogram(
      registry,
      "svc_remote_read_duration_seconds",
      "Duration of one request to the engine's query API (until its headers).",
      LATENCY_BUCKETS,
    ),
    readFailures: counter(
      registry,
      "svc_remote_read_failures_total",
      "Requests to the engine's query API that failed, by status (network, timeout, 429, 5xx).",
      ["status"],
      STATUSES.map((status) => ({ status })),
    ),
  };
}

export type RemoteMetrics = ReturnType<typeof createRemoteMetrics>;
