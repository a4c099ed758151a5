/**
 * Limits the decoder enforces on untrusted bodies, checked before the memory they guard is allocated.
 * Byte limits are in bytes; counts are per request unless named per series. All bounds are inclusive
 * (a value equal to the limit is accepted).
 */
export interface DecodeLimits {
  /** Snappy-compressed body size. */
  readonly maxCompressedBytes: number;
  /** Size declared by the snappy preamble (the protobuf size). */
  readonly maxDecompressedBytes: number;
  /** TimeSeries messages in one WriteRequest. */
  readonly maxSeries: number;
  /** Labels in one TimeSeries. */
  readonly maxLabelsPerSeries: number;
  /** Samples across all series of one WriteRequest. */
  readonly maxSamples: number;
  /** UTF-8 bytes of one label name. */
  readonly maxLabelNameBytes: number;
  /** UTF-8 bytes of one label value. */
  readonly maxLabelValueBytes: number;
  /** MetricMetadata messages in one WriteRequest. */
  readonly maxMetadata: number;
  /** UTF-8 bytes of one metadata string (family name, help, unit). */
  readonly maxMetadataTextBytes: number;
}

const MiB = 1024 * 1024;

export const defaultDecodeLimits: DecodeLimits = Object.freeze({
  maxCompressedBytes: 16 * MiB,
  maxDecompressedBytes: 32 * MiB,
  maxSeries: 100_000,
  maxLabelsPerSeries: 64,
  maxSamples: 1_000_000,
  maxLabelNameBytes: 1024,
  maxLabelValueBytes: 4096,
  maxMetadata: 10_000,
  maxMetadataTextBytes: 4096,
});

/** Merges overrides onto the defaults, validates once and freezes. Throws RangeError on a bad limit. */
export function resolveDecodeLimits(overrides?: Partial<DecodeLimits>): DecodeLimits {
  if (overrides === undefined) return defaultDecodeLimits;
  const merged: DecodeLimits = { ...defaultDecodeLimits, ...overrides };
  for (const [k, v] of Object.entries(merged)) {
    if (!Number.isSafeInteger(v) || v < 0)
      throw new RangeError(`decode limit ${k} must be a non-negative integer`);
  }
  // The snappy length preamble is a uint32; a larger limit could never be reached anyway.
  if (merged.maxDecompressedBytes > 0xffffffff)
    throw new RangeError("maxDecompressedBytes must fit in uint32");
  return Object.freeze(merged);
}
