import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { type DecodeLimitName, RemoteWriteDecodeError } from "./errors.ts";
import { type DecodeLimits, resolveDecodeLimits } from "./options.ts";
import { scratchF64, scratchU8 } from "./scratch.ts";
import { snappyDecompress } from "./snappy.ts";
import type { Label, MetricMetadata, Sample, TimeSeries, WriteRequest } from "./types.ts";

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

function tooMany(
  what: string,
  limit: DecodeLimitName,
  actual: number,
  allowed: number,
): RemoteWriteDecodeError {
  return new RemoteWriteDecodeError(`remote write: ${what}`, { limit, actual, allowed });
}

/** BinaryReader plus the reads remote write needs without bigint or DataView, each bounds-checked. */
class Reader extends BinaryReader {
  /** Reads a length prefix and returns the end offset of the sub-message, checked against the buffer. */
  messageEnd(): number {
    const len = this.uint32();
    const end = this.pos + len;
    if (end > this.len)
      throw new RemoteWriteDecodeError("remote write: message length runs past end of input");
    return end;
  }

  int64Number(): number {
    const [lo, hi] = this.varint64();
    // hi is the signed upper word: the result is exact while |hi| < 2^21.
    if (hi >= 0x200000 || hi < -0x200000)
      throw new RemoteWriteDecodeError("remote write: timestamp out of range");
    return hi * 0x100000000 + (lo >>> 0);
  }

  doubleBits(): number {
    if (this.pos + 8 > this.len) throw new RemoteWriteDecodeError("remote write: truncated double");
    const b = this.buf;
    for (let i = 0; i < 8; i++) scratchU8[i] = b[this.pos + i];
    this.pos += 8;
    return scratchF64[0];
  }

  /** Reads a string, refusing it before decoding when longer than `max` bytes. */
  boundedString(max: number, limit: DecodeLimitName, what: string): string {
    const len = this.uint32();
    if (len > max) throw tooMany(`${what} too long`, limit, len, max);
    const start = this.pos;
    const end = start + len;
    if (end > this.len) throw new RemoteWriteDecodeError(`remote write: ${what} runs past end of input`);
    this.pos = end;
    const b = this.buf;
    if (len <= 32) {
      // Labels are short and nearly always ASCII; skip TextDecoder's call overhead for them.
      let ascii = true;
      for (let i = start; i < end; i++) {
        if (b[i] > 0x7f) {
          ascii = false;
          break;
        }
      }
      if (ascii) return String.fromCharCode.apply(null, b.subarray(start, end) as unknown as number[]);
    }
    try {
      return strictUtf8.decode(b.subarray(start, end));
    } catch {
      throw new RemoteWriteDecodeError(`remote write: ${what} is not valid UTF-8`);
    }
  }

  expect(actual: WireType, want: WireType, field: string): void {
    if (actual !== want)
      throw new RemoteWriteDecodeError(`remote write: ${field} has wire type ${actual}, want ${want}`);
  }

  skipField(wireType: WireType, fieldNo: number): void {
    // Group/end-group are proto2 relics no remote-write sender emits; refusing them bounds recursion.
    if (wireType === WireType.StartGroup || wireType === WireType.EndGroup) {
      throw new RemoteWriteDecodeError(`remote write: unexpected group field ${fieldNo}`);
    }
    this.skip(wireType, fieldNo);
  }
}

interface Counters {
  samples: number;
}

function readLabel(r: Reader, end: number, lim: DecodeLimits): Label {
  let name = "";
  let value = "";
  while (r.pos < end) {
    const [no, wt] = r.tag();
    if (no === 1) {
      r.expect(wt, WireType.LengthDelimited, "Label.name");
      name = r.boundedString(lim.maxLabelNameBytes, "maxLabelNameBytes", "label name");
    } else if (no === 2) {
      r.expect(wt, WireType.LengthDelimited, "Label.value");
      value = r.boundedString(lim.maxLabelValueBytes, "maxLabelValueBytes", "label value");
    } else r.skipField(wt, no);
  }
  return { name, value };
}

function readSample(r: Reader, end: number): Sample {
  let value = 0;
  let timestampMs = 0;
  while (r.pos < end) {
    const [no, wt] = r.tag();
    if (no === 1) {
      r.expect(wt, WireType.Bit64, "Sample.value");
      value = r.doubleBits();
    } else if (no === 2) {
      r.expect(wt, WireType.Varint, "Sample.timestamp");
      timestampMs = r.int64Number();
    } else r.skipField(wt, no);
  }
  return { value, timestampMs };
}

function readSeries(r: Reader, end: number, lim: DecodeLimits, count: Counters): TimeSeries {
  const labels: Label[] = [];
  const samples: Sample[] = [];
  while (r.pos < end) {
    const [no, wt] = r.tag();
    if (no === 1) {
      r.expect(wt, WireType.LengthDelimited, "TimeSeries.labels");
      if (labels.length >= lim.maxLabelsPerSeries) {
        throw tooMany(
          "too many labels in a series",
          "maxLabelsPerSeries",
          labels.length + 1,
          lim.maxLabelsPerSeries,
        );
      }
      const e = r.messageEnd();
      labels.push(readLabel(r, e, lim));
      finish(r, e, "Label");
    } else if (no === 2) {
      r.expect(wt, WireType.LengthDelimited, "TimeSeries.samples");
      if (count.samples >= lim.maxSamples) {
        throw tooMany("too many samples", "maxSamples", count.samples + 1, lim.maxSamples);
      }
      count.samples++;
      const e = r.messageEnd();
      samples.push(readSample(r, e));
      finish(r, e, "Sample");
    } else r.skipField(wt, no);
  }
  return { labels, samples };
}

function readMetadata(r: Reader, end: number, lim: DecodeLimits): MetricMetadata {
  let type = 0;
  let metricFamilyName = "";
  let help = "";
  let unit = "";
  const max = lim.maxMetadataTextBytes;
  while (r.pos < end) {
    const [no, wt] = r.tag();
    if (no === 1) {
      r.expect(wt, WireType.Varint, "MetricMetadata.type");
      type = r.int32();
    } else if (no === 2) {
      r.expect(wt, WireType.LengthDelimited, "MetricMetadata.metric_family_name");
      metricFamilyName = r.boundedString(max, "maxMetadataTextBytes", "metric family name");
    } else if (no === 4) {
      r.expect(wt, WireType.LengthDelimited, "MetricMetadata.help");
      help = r.boundedString(max, "maxMetadataTextBytes", "metadata help");
    } else if (no === 5) {
      r.expect(wt, WireType.LengthDelimited, "MetricMetadata.unit");
      unit = r.boundedString(max, "maxMetadataTextBytes", "metadata unit");
    } else r.skipField(wt, no);
  }
  return { type, metricFamilyName, help, unit };
}

function finish(r: Reader, end: number, what: string): void {
  if (r.pos !== end) throw new RemoteWriteDecodeError(`remote write: ${what} overruns its length`);
}

/**
 * Decodes a protobuf WriteRequest (already decompressed) from untrusted bytes. Counts and string
 * sizes are checked against `limits` before each element is kept; unknown fields are skipped.
 * Sample values are copied bit for bit (a staleness-marker NaN stays one). The returned objects are
 * new and owned by the caller. Throws RemoteWriteDecodeError, never anything else, on bad input.
 */
export function decodeWriteRequest(bytes: Uint8Array, limits?: Partial<DecodeLimits>): WriteRequest {
  const lim = resolveDecodeLimits(limits);
  if (bytes.length > lim.maxDecompressedBytes) {
    throw tooMany("protobuf body too large", "maxDecompressedBytes", bytes.length, lim.maxDecompressedBytes);
  }
  const r = new Reader(bytes);
  const timeseries: TimeSeries[] = [];
  const metadata: MetricMetadata[] = [];
  const count: Counters = { samples: 0 };
  try {
    while (r.pos < r.len) {
      const [no, wt] = r.tag();
      if (no === 1) {
        r.expect(wt, WireType.LengthDelimited, "WriteRequest.timeseries");
        if (timeseries.length >= lim.maxSeries) {
          throw tooMany("too many series", "maxSeries", timeseries.length + 1, lim.maxSeries);
        }
        const e = r.messageEnd();
        timeseries.push(readSeries(r, e, lim, count));
        finish(r, e, "TimeSeries");
      } else if (no === 3) {
        r.expect(wt, WireType.LengthDelimited, "WriteRequest.metadata");
        if (metadata.length >= lim.maxMetadata) {
          throw tooMany("too many metadata entries", "maxMetadata", metadata.length + 1, lim.maxMetadata);
        }
        const e = r.messageEnd();
        metadata.push(readMetadata(r, e, lim));
        finish(r, e, "MetricMetadata");
      } else r.skipField(wt, no);
    }
  } catch (err) {
    if (err instanceof RemoteWriteDecodeError) throw err;
    throw new RemoteWriteDecodeError(`remote write: malformed protobuf (${(err as Error).message})`);
  }
  return metadata.length > 0 ? { timeseries, metadata } : { timeseries };
}

/**
 * Decodes an untrusted remote-write HTTP body (snappy block + protobuf). The compressed size and the
 * declared decompressed size are checked before anything is allocated. Throws RemoteWriteDecodeError.
 */
export function decodeRemoteWriteBody(body: Uint8Array, limits?: Partial<DecodeLimits>): WriteRequest {
  const lim = resolveDecodeLimits(limits);
  if (body.length > lim.maxCompressedBytes) {
    throw tooMany("compressed body too large", "maxCompressedBytes", body.length, lim.maxCompressedBytes);
  }
  return decodeWriteRequest(snappyDecompress(body, lim.maxDecompressedBytes), lim);
}
