import { counter, histogram, LATENCY_BUCKETS, type Registry } from "../instrument.ts";
import { UTILIZATION_REFUSALS } from "./derive.ts";
import type { LeaveOut } from "./guest-map.ts";
import type { IngestRefusal } from "./ingest.ts";

/** Every refusal reason, so each series exists (at 0) before the first refusal. */
const REASONS: readonly IngestRefusal[] = [
  "unknown_vm",
  "unknown_metric",
  "bad_labels",
  "not_permitted",
  "derived_series",
  "out_of_order",
  "out_of_bounds",
  "duplicate_sample_for_timestamp",
  "invalid_labels",
  "too_many_series",
];

/** Why series of a mapped sender (node_exporter, OpenTelemetry) were left out by rule (guest-map.ts). */
const LEFT_OUT: readonly LeaveOut[] = ["excluded_device", "excluded_filesystem", "late_part"];

const SOURCES = ["collector", "agent"] as const;

/** Remote-write ingestion: requests, samples and series kept and refused, batch sizes, latency. */
export function createIngestMetrics(registry: Registry) {
  return {
    requests: counter(
      registry,
      "svc_ingest_requests_total",
      "Remote-write and OTLP requests by writer kind and HTTP status code.",
      ["source", "code"],
    ),
    acceptedSamples: counter(
      registry,
      "svc_ingest_samples_accepted_total",
      "Samples written by clients and kept (derived series not included).",
      ["source"],
      SOURCES.map((source) => ({ source })),
    ),
    refusedSamples: counter(
      registry,
      "svc_ingest_samples_refused_total",
      "Samples refused by reason (unknown_vm, out_of_order, …); the rest of their batch is kept.",
      ["reason"],
      REASONS.map((reason) => ({ reason })),
    ),
    acceptedSeries: counter(
      registry,
      "svc_ingest_series_accepted_total",
      "Series of a write request that passed validation, counted once per request.",
      ["source"],
      SOURCES.map((source) => ({ source })),
    ),
    refusedSeries: counter(
      registry,
      "svc_ingest_series_refused_total",
      "Series of a write request refused whole, by reason, counted once per request.",
      ["reason"],
      REASONS.map((reason) => ({ reason })),
    ),
    leftOutSeries: counter(
      registry,
      "svc_ingest_series_left_out_total",
      "Series of node_exporter or OpenTelemetry senders left out by rule (lo, tmpfs, partitions, parts arriving after their group), not refused.",
      ["reason"],
      LEFT_OUT.map((reason) => ({ reason })),
    ),
    derivedSamples: counter(
      registry,
      "svc_ingest_derived_samples_total",
      "Samples of the series svc derives on ingest (CPU utilisation, memory used, last observation).",
    ),
    refusedUtilization: counter(
      registry,
      "svc_ingest_cpu_utilization_refused_total",
      "CPU utilizations derived on ingest and not stored because they cannot be real, by reason (over_capacity: above 100 % of the VM's vCPUs; counter_backwards: a counter that fell, two writers for one VM).",
      ["reason"],
      UTILIZATION_REFUSALS.map((reason) => ({ reason })),
    ),
    batchSamples: histogram(
      registry,
      "svc_ingest_batch_samples",
      "Samples per remote-write request.",
      [1, 10, 100, 1000, 10_000, 100_000, 1_000_000],
    ),
    duration: histogram(
      registry,
      "svc_ingest_request_duration_seconds",
      "Time from a decoded write request to its samples being durable in the WAL (or forwarded).",
      LATENCY_BUCKETS,
    ),
  };
}

export type IngestMetrics = ReturnType<typeof createIngestMetrics>;
