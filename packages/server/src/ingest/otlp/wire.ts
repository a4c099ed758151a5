/**
 * A hand-written decoder of OTLP's ExportMetricsServiceRequest protobuf (opentelemetry-proto v1.11.0)
 * that keeps only what the mapping (otlp.ts) reads: each metric's name, its data's case, a sum's
 * aggregation temporality, its data-point count and, of gauge and sum points, the time, value, flags and
 * the attributes whose keys are in ATTR_KEYS (docs/ingest.md, "How svc decodes OTLP protobuf").
 *
 * It reads what protobuf-es' `fromBinary` would (the last of a repeated scalar wins, a repeated message
 * field merges, a oneof's new case replaces the old) and refuses, with OtlpWireError, what is not a
 * protobuf message: a truncated varint or fixed-width value, a length past its message's end, a known
 * field with the wrong wire type, an end-group without its start, groups nested deeper than
 * MAX_DEPTH, invalid UTF-8 in a string it reads. Messages the mapping does not read (resource, scope,
 * exemplars, histogram points, array and key-value-list attribute values) are skipped by their length,
 * not parsed.
 */

/** The attribute keys the mapping reads, in the order of OtlpPoint.attrs. */
export const ATTR_KEYS = [
  "cpu.mode",
  "system.cpu.state",
  "state",
  "cpu.logical_number",
  "system.cpu.logical_number",
  "cpu",
  "system.memory.state",
  "system.filesystem.state",
  "system.filesystem.mountpoint",
  "mountpoint",
  "system.device",
  "device",
  "system.filesystem.type",
  "type",
  "system.filesystem.mode",
  "mode",
  "disk.io.direction",
  "direction",
  "network.interface.name",
  "network.io.direction",
] as const;

export type AttrKey = (typeof ATTR_KEYS)[number];
/** ATTR_KEYS' index of each key. */
export const ATTR = Object.fromEntries(ATTR_KEYS.map((k, i) => [k, i])) as Record<AttrKey, number>;

export type MetricKind = "gauge" | "sum" | "histogram" | "exponentialHistogram" | "summary";

/** A gauge's or sum's data point. */
export interface OtlpPoint {
  /**
   * By ATTR_KEYS' index: the value of the first attribute with that key, as text (string; int, double
   * and bool as `String()` writes them); undefined when there is none or its value is of another kind.
   */
  readonly attrs: (string | undefined)[];
  /** time_unix_nano in ms, rounded down. */
  readonly t: number;
  /** flags has NO_RECORDED_VALUE. */
  readonly stale: boolean;
  /** as_double or as_int; undefined when neither is set. */
  readonly v: number | undefined;
}

export interface OtlpMetric {
  readonly name: string;
  /** The data oneof's case; undefined when none is set. */
  readonly kind: MetricKind | undefined;
  /** A sum's aggregation_temporality (0 for the other kinds). */
  readonly temporality: number;
  /** Data points of any kind. */
  readonly count: number;
  /** A gauge's or sum's points (empty for the other kinds). */
  readonly points: readonly OtlpPoint[];
}

/** The bytes are not an ExportMetricsServiceRequest; the message says where. */
export class OtlpWireError extends Error {}

/** Deepest group nesting skipped (protobuf-es' recursion limit). */
const MAX_DEPTH = 100;

const VARINT = 0;
const I64 = 1;
const LEN = 2;
const SGROUP = 3;
const EGROUP = 4;
const I32 = 5;

// The decoder's state: one request at a time (decoding is synchronous).
let buf: Buffer = Buffer.alloc(0);
let pos = 0;
/** The high 32 bits of the last varint read. */
let hi = 0;
/** Non-ASCII strings: protobuf-es' strict decoder (a BOM is text). */
const strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Keys by length, as bytes. */
const KEYS_BY_LENGTH: { bytes: Buffer; index: number }[][] = [];
for (const [index, key] of ATTR_KEYS.entries()) {
  const same = KEYS_BY_LENGTH[key.length] ?? [];
  same.push({ bytes: Buffer.from(key, "latin1"), index });
  KEYS_BY_LENGTH[key.length] = same;
}

function fail(why: string): never {
  throw new OtlpWireError(why);
}

/** A varint ending before `end`: its low 32 bits (unsigned) returned, its high ones in `hi`. */
function varint(end: number): number {
  let lo = 0;
  let b = 0;
  for (let shift = 0; shift < 28; shift += 7) {
    if (pos >= end) fail(`truncated varint at byte ${pos}`);
    b = buf[pos++]!;
    lo |= (b & 0x7f) << shift;
    if (b < 0x80) {
      hi = 0;
      return lo >>> 0;
    }
  }
  if (pos >= end) fail(`truncated varint at byte ${pos}`);
  b = buf[pos++]!;
  lo |= (b & 0x0f) << 28;
  let h = (b & 0x7f) >> 4;
  if (b < 0x80) {
    hi = h;
    return lo >>> 0;
  }
  for (let shift = 3; shift <= 31; shift += 7) {
    if (pos >= end) fail(`truncated varint at byte ${pos}`);
    b = buf[pos++]!;
    h |= (b & 0x7f) << shift;
    if (b < 0x80) {
      hi = h >>> 0;
      return lo >>> 0;
    }
  }
  return fail(`varint longer than 10 bytes at byte ${pos}`);
}

/** A field's tag: field number × 8 + wire type. */
function tag(end: number): number {
  const at = pos;
  const t = varint(end);
  if (hi !== 0 || pos - at > 5) fail(`tag overflows 32 bits at byte ${at}`);
  if (t >>> 3 === 0 || (t & 7) > 5) fail(`illegal tag: field ${t >>> 3}, wire type ${t & 7} at byte ${at}`);
  return t;
}

/** A length-delimited field's end, after its length. */
function delimited(end: number): number {
  const len = varint(end);
  if (hi !== 0 || len > end - pos) fail(`length ${len} past the end of its message at byte ${pos}`);
  return pos + len;
}

function fixed(n: number, end: number): void {
  if (end - pos < n) fail(`truncated ${n * 8}-bit value at byte ${pos}`);
  pos += n;
}

/** Skips a field of wire type `wt` (its tag read). */
function skip(wt: number, field: number, end: number, depth: number): void {
  switch (wt) {
    case VARINT:
      varint(end);
      return;
    case I64:
      fixed(8, end);
      return;
    case LEN:
      pos = delimited(end);
      return;
    case I32:
      fixed(4, end);
      return;
    case SGROUP:
      if (depth >= MAX_DEPTH) fail(`groups nested deeper than ${MAX_DEPTH}`);
      for (;;) {
        if (pos >= end) fail(`group ${field} without its end`);
        const t = tag(end);
        if ((t & 7) === EGROUP) {
          if (t >>> 3 !== field) fail(`group ${field} ended by field ${t >>> 3}`);
          return;
        }
        skip(t & 7, t >>> 3, end, depth + 1);
      }
    default:
      fail(`end-group tag of field ${field} without its start`);
  }
}

function expect(wt: number, want: number, message: string, field: number): void {
  if (wt !== want) fail(`${message} field ${field} has wire type ${wt}, not ${want}`);
}

/** Recent ASCII strings by a hash of their bytes: the same names and values come in every request. */
const TEXT_CACHE_SIZE = 1024;
const textCache: (string | undefined)[] = new Array(TEXT_CACHE_SIZE);

function text(start: number, end: number): string {
  let h = end - start;
  for (let i = start; i < end; i++) {
    const b = buf[i]!;
    if (b > 0x7f) {
      try {
        return strict.decode(buf.subarray(start, end));
      } catch {
        return fail(`invalid UTF-8 in a string at byte ${start}`);
      }
    }
    h = (Math.imul(h, 31) + b) | 0;
  }
  const slot = h & (TEXT_CACHE_SIZE - 1);
  const hit = textCache[slot];
  if (hit !== undefined && hit.length === end - start) {
    let i = 0;
    while (i < hit.length && hit.charCodeAt(i) === buf[start + i]) i++;
    if (i === hit.length) return hit;
  }
  const s = (buf as unknown as { latin1Slice(start: number, end: number): string }).latin1Slice(start, end);
  if (end - start <= 64) textCache[slot] = s;
  return s;
}

/** A little-endian 64-bit two's complement integer at `at`, as the nearest double. */
function int64At(at: number): number {
  return buf.readInt32LE(at + 4) * 4294967296 + buf.readUInt32LE(at);
}

/**
 * Decodes an ExportMetricsServiceRequest (already inflated) into its metrics, in order over every
 * resource and scope. Throws OtlpWireError, never anything else, on bytes that are not one.
 */
export function decodeMetricsRequest(bytes: Uint8Array): OtlpMetric[] {
  buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  pos = 0;
  const metrics: OtlpMetric[] = [];
  try {
    const end = buf.length;
    while (pos < end) {
      const t = tag(end);
      if (t >>> 3 === 1) {
        expect(t & 7, LEN, "ExportMetricsServiceRequest", 1);
        resourceMetrics(delimited(end), metrics);
      } else skip(t & 7, t >>> 3, end, 0);
    }
  } finally {
    buf = Buffer.alloc(0);
  }
  return metrics;
}

function resourceMetrics(end: number, metrics: OtlpMetric[]): void {
  while (pos < end) {
    const t = tag(end);
    const f = t >>> 3;
    if (f === 2) {
      expect(t & 7, LEN, "ResourceMetrics", 2);
      scopeMetrics(delimited(end), metrics);
    } else {
      if (f === 1 || f === 3) expect(t & 7, LEN, "ResourceMetrics", f); // resource, schema_url
      skip(t & 7, f, end, 0);
    }
  }
}

function scopeMetrics(end: number, metrics: OtlpMetric[]): void {
  while (pos < end) {
    const t = tag(end);
    const f = t >>> 3;
    if (f === 2) {
      expect(t & 7, LEN, "ScopeMetrics", 2);
      metrics.push(metric(delimited(end)));
    } else {
      if (f === 1 || f === 3) expect(t & 7, LEN, "ScopeMetrics", f); // scope, schema_url
      skip(t & 7, f, end, 0);
    }
  }
}

/** Metric's data oneof by field number. */
const DATA_KIND: (MetricKind | undefined)[] = [];
DATA_KIND[5] = "gauge";
DATA_KIND[7] = "sum";
DATA_KIND[9] = "histogram";
DATA_KIND[10] = "exponentialHistogram";
DATA_KIND[11] = "summary";

function metric(end: number): OtlpMetric {
  let nameStart = 0;
  let nameEnd = 0;
  let kind: MetricKind | undefined;
  let temporality = 0;
  let count = 0;
  let points: OtlpPoint[] = [];
  while (pos < end) {
    const t = tag(end);
    const f = t >>> 3;
    const k = DATA_KIND[f];
    if (f === 1) {
      expect(t & 7, LEN, "Metric", 1);
      const e = delimited(end);
      nameStart = pos;
      nameEnd = e;
      pos = e;
    } else if (k !== undefined) {
      expect(t & 7, LEN, "Metric", f);
      if (k !== kind) {
        // Another case of the oneof replaces the last; the same case merges into it.
        kind = k;
        temporality = 0;
        count = 0;
        points = [];
      }
      const e = delimited(end);
      while (pos < e) {
        const d = tag(e);
        const df = d >>> 3;
        if (df === 1) {
          expect(d & 7, LEN, k, 1);
          count++;
          if (k === "gauge" || k === "sum") points.push(numberDataPoint(delimited(e)));
          else pos = delimited(e);
        } else if (df === 2 && k !== "gauge" && k !== "summary") {
          expect(d & 7, VARINT, k, 2);
          const v = varint(e) | 0;
          if (k === "sum") temporality = v;
        } else if (df === 3 && k === "sum") {
          expect(d & 7, VARINT, k, 3); // is_monotonic
          varint(e);
        } else skip(d & 7, df, e, 0);
      }
    } else {
      if (f === 2 || f === 3 || f === 12) expect(t & 7, LEN, "Metric", f); // description, unit, metadata
      skip(t & 7, f, end, 0);
    }
  }
  return { name: text(nameStart, nameEnd), kind, temporality, count, points };
}

function numberDataPoint(end: number): OtlpPoint {
  const attrs = new Array<string | undefined>(ATTR_KEYS.length);
  /** Which ATTR_KEYS have been seen (bit i: key i): the first of a key counts. */
  let seen = 0;
  let time = -1;
  let flags = 0;
  let valueAt = -1;
  let isInt = false;
  while (pos < end) {
    const t = tag(end);
    const f = t >>> 3;
    const wt = t & 7;
    switch (f) {
      case 7: {
        expect(wt, LEN, "NumberDataPoint", 7);
        const e = delimited(end);
        const index = keyValue(e);
        if (index >= 0 && (seen & (1 << index)) === 0) {
          seen |= 1 << index;
          attrs[index] = attrValue;
        }
        break;
      }
      case 3:
        expect(wt, I64, "NumberDataPoint", 3);
        fixed(8, end);
        time = pos - 8;
        break;
      case 4:
      case 6:
        expect(wt, I64, "NumberDataPoint", f);
        fixed(8, end);
        valueAt = pos - 8;
        isInt = f === 6;
        break;
      case 8:
        expect(wt, VARINT, "NumberDataPoint", 8);
        flags = varint(end);
        break;
      case 2: // start_time_unix_nano
        expect(wt, I64, "NumberDataPoint", 2);
        skip(wt, f, end, 0);
        break;
      case 5: // exemplars
        expect(wt, LEN, "NumberDataPoint", 5);
        skip(wt, f, end, 0);
        break;
      default:
        skip(wt, f, end, 0);
    }
  }
  return {
    attrs,
    t: time < 0 ? 0 : msOfNanos(buf.readUInt32LE(time + 4), buf.readUInt32LE(time)),
    stale: (flags & 1) !== 0,
    v: valueAt < 0 ? undefined : isInt ? int64At(valueAt) : buf.readDoubleLE(valueAt),
  };
}

/** ⌊(h × 2³² + l) / 10⁶⌋ exactly, for an unsigned 64-bit count of ns (2³² = 4294 × 10⁶ + 967296). */
function msOfNanos(h: number, l: number): number {
  const x = h * 967296 + l; // < 2⁵³: exact
  const r = x % 1e6;
  return h * 4294 + (x - r) / 1e6;
}

/** The last KeyValue's value as text (attrs' rule), set by keyValue. */
let attrValue: string | undefined;

/** Reads a KeyValue up to `end`; returns the index of its key in ATTR_KEYS (-1: another key). */
function keyValue(end: number): number {
  let keyStart = 0;
  let keyEnd = 0;
  // The AnyValue's case, as the last field read sets it (a repeated `value` merges).
  let kind = 0; // 0 none, 1 string, 2 bool, 3 int, 4 double, 5 another
  let at = 0;
  let lo = 0;
  let h = 0;
  while (pos < end) {
    const t = tag(end);
    const f = t >>> 3;
    if (f === 1) {
      expect(t & 7, LEN, "KeyValue", 1);
      keyEnd = delimited(end);
      keyStart = pos;
      pos = keyEnd;
    } else if (f === 2) {
      expect(t & 7, LEN, "KeyValue", 2);
      const e = delimited(end);
      while (pos < e) {
        const v = tag(e);
        const vf = v >>> 3;
        const wt = v & 7;
        switch (vf) {
          case 1: {
            expect(wt, LEN, "AnyValue", 1);
            const se = delimited(e);
            kind = 1;
            at = pos;
            lo = se;
            pos = se;
            break;
          }
          case 2:
          case 3:
            expect(wt, VARINT, "AnyValue", vf);
            lo = varint(e);
            h = hi;
            kind = vf;
            break;
          case 4:
            expect(wt, I64, "AnyValue", 4);
            fixed(8, e);
            at = pos - 8;
            kind = 4;
            break;
          case 5:
          case 6:
          case 7:
            expect(wt, LEN, "AnyValue", vf); // array, kvlist, bytes: not read
            pos = delimited(e);
            kind = 5;
            break;
          case 8:
            expect(wt, VARINT, "AnyValue", 8); // string_value_strindex (profiles only)
            varint(e);
            kind = 5;
            break;
          default:
            skip(wt, vf, e, 0);
        }
      }
    } else {
      if (f === 3) expect(t & 7, VARINT, "KeyValue", 3); // key_strindex
      skip(t & 7, f, end, 0);
    }
  }
  const index = keyIndex(keyStart, keyEnd);
  if (index < 0) return -1;
  switch (kind) {
    case 1:
      attrValue = text(at, lo);
      break;
    case 2:
      attrValue = lo !== 0 || h !== 0 ? "true" : "false";
      break;
    case 3:
      attrValue = int64Text(lo, h);
      break;
    case 4:
      attrValue = String(buf.readDoubleLE(at));
      break;
    default:
      attrValue = undefined;
  }
  return index;
}

function keyIndex(start: number, end: number): number {
  const candidates = KEYS_BY_LENGTH[end - start];
  if (candidates === undefined) return -1;
  next: for (const { bytes, index } of candidates) {
    for (let i = bytes.length - 1; i >= 0; i--) if (bytes[i] !== buf[start + i]) continue next;
    return index;
  }
  return -1;
}

/** An int64 varint's value (low, high 32 bits) as String(bigint) writes it. */
function int64Text(lo: number, h: number): string {
  // Within ±2⁵³ a double holds it exactly and prints the same digits.
  if (h < 0x200000) return String(h * 4294967296 + lo);
  if (h >= 0xffe00000) return String((h - 4294967296) * 4294967296 + lo);
  return String(BigInt.asIntN(64, (BigInt(h) << 32n) | BigInt(lo)));
}
