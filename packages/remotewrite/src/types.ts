/**
 * Prometheus remote-write 1.0 messages (prometheus/prompb/remote.proto + types.proto), as plain objects.
 * Only the fields remote-write 1.0 defines are modelled; others (exemplars, native histograms) are
 * skipped by the decoder and never written by the encoder.
 */

/** `Label { string name = 1; string value = 2; }` */
export interface Label {
  readonly name: string;
  readonly value: string;
}

/**
 * `Sample { double value = 1; int64 timestamp = 2; }`.
 * `value` may carry the Prometheus staleness marker (a NaN with payload 2); the codec copies its bits
 * verbatim and never does arithmetic on values. Keep such values in objects or Float64Arrays: V8 quiets
 * NaNs stored in plain JS number arrays (`[v]`), which turns the marker into an ordinary NaN.
 */
export interface Sample {
  readonly value: number;
  /** Milliseconds since the Unix epoch; a safe integer. */
  readonly timestampMs: number;
}

/** `TimeSeries { repeated Label labels = 1; repeated Sample samples = 2; }` */
export interface TimeSeries {
  readonly labels: readonly Label[];
  readonly samples: readonly Sample[];
}

/** `MetricMetadata.MetricType` wire values. */
export const MetricType = {
  UNKNOWN: 0,
  COUNTER: 1,
  GAUGE: 2,
  HISTOGRAM: 3,
  GAUGEHISTOGRAM: 4,
  SUMMARY: 5,
  INFO: 6,
  STATESET: 7,
} as const;
export type MetricType = (typeof MetricType)[keyof typeof MetricType];

/** `MetricMetadata { MetricType type = 1; string metric_family_name = 2; string help = 4; string unit = 5; }` */
export interface MetricMetadata {
  /** A MetricType value; the decoder passes unknown enum numbers through unchanged. */
  readonly type: number;
  readonly metricFamilyName: string;
  readonly help: string;
  readonly unit: string;
}

/** `WriteRequest { repeated TimeSeries timeseries = 1; repeated MetricMetadata metadata = 3; }` */
export interface WriteRequest {
  readonly timeseries: readonly TimeSeries[];
  readonly metadata?: readonly MetricMetadata[];
}
