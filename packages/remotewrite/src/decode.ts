import { type CompactWriteRequest, decodeCompact, type LabelKeyNumbering, labelsOfKey } from "./compact.ts";
import { RemoteWriteDecodeError } from "./errors.ts";
import { type DecodeLimits, resolveDecodeLimits } from "./options.ts";
import { snappyDecompress } from "./snappy.ts";
import type { Sample, TimeSeries, WriteRequest } from "./types.ts";

function tooLarge(
  what: string,
  limit: "maxCompressedBytes" | "maxDecompressedBytes",
  actual: number,
  allowed: number,
) {
  return new RemoteWriteDecodeError(`remote write: ${what}`, { limit, actual, allowed });
}

/**
 * Decodes a protobuf WriteRequest (already decompressed) from untrusted bytes into the compact form
 * (typed arrays, labels as keys; see compact.ts). Throws RemoteWriteDecodeError on bad input.
 */
export function decodeWriteRequestCompact(
  bytes: Uint8Array,
  limits?: Partial<DecodeLimits>,
  numbering?: LabelKeyNumbering,
): CompactWriteRequest {
  const lim = resolveDecodeLimits(limits);
  if (bytes.length > lim.maxDecompressedBytes) {
    throw tooLarge("protobuf body too large", "maxDecompressedBytes", bytes.length, lim.maxDecompressedBytes);
  }
  return decodeCompact(bytes, lim, numbering);
}

/**
 * Decodes a protobuf WriteRequest (already decompressed) from untrusted bytes. Counts and string
 * sizes are checked against `limits` before each element is kept; unknown fields are skipped.
 * Sample values are copied bit for bit (a staleness-marker NaN stays one). The returned objects are
 * new and owned by the caller. Throws RemoteWriteDecodeError, never anything else, on bad input.
 */
export function decodeWriteRequest(bytes: Uint8Array, limits?: Partial<DecodeLimits>): WriteRequest {
  return expand(decodeWriteRequestCompact(bytes, limits));
}

/** The object form of a compact request. */
function expand(c: CompactWriteRequest): WriteRequest {
  const timeseries: TimeSeries[] = new Array(c.seriesCount);
  for (let i = 0; i < c.seriesCount; i++) {
    const samples: Sample[] = [];
    for (let k = c.sampleStart[i]; k < c.sampleStart[i + 1]; k++) {
      // A Float64Array element read into an object field keeps its NaN payload.
      samples.push({ value: c.values[k], timestampMs: c.timestampsMs[k] });
    }
    timeseries[i] = { labels: labelsOfKey(c.labelKeys[i]), samples };
  }
  return c.metadata.length > 0 ? { timeseries, metadata: c.metadata } : { timeseries };
}

function decompress(body: Uint8Array, lim: DecodeLimits): Uint8Array {
  if (body.length > lim.maxCompressedBytes) {
    throw tooLarge("compressed body too large", "maxCompressedBytes", body.length, lim.maxCompressedBytes);
  }
  return snappyDecompress(body, lim.maxDecompressedBytes);
}

/**
 * Decodes an untrusted remote-write HTTP body (snappy block + protobuf). The compressed size and the
 * declared decompressed size are checked before anything is allocated. Throws RemoteWriteDecodeError.
 */
export function decodeRemoteWriteBody(body: Uint8Array, limits?: Partial<DecodeLimits>): WriteRequest {
  const lim = resolveDecodeLimits(limits);
  return decodeWriteRequest(decompress(body, lim), lim);
}

/**
 * `decodeRemoteWriteBody` into the compact form, for receivers: no object per series or sample.
 * Throws RemoteWriteDecodeError. `numbering` numbers each series' label key as it is read (compact.ts).
 */
export function decodeRemoteWriteBodyCompact(
  body: Uint8Array,
  limits?: Partial<DecodeLimits>,
  numbering?: LabelKeyNumbering,
): CompactWriteRequest {
  const lim = resolveDecodeLimits(limits);
  return decodeWriteRequestCompact(decompress(body, lim), lim, numbering);
}
