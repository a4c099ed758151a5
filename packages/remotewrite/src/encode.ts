/**
 * Protobuf's wire types (as @bufbuild/protobuf's WireType), written here: importing its `wire` module
 * evaluates its whole runtime and well-known types' descriptors, which a server start does not need
 * (docs/performance.md, "Start-up, third pass").
 */
const WireType = { Varint: 0, Bit64: 1, LengthDelimited: 2 } as const;

import { scratchF64, scratchU8 } from "./scratch.ts";
import { snappyCompress } from "./snappy.ts";
import type { Label, MetricMetadata, Sample, TimeSeries, WriteRequest } from "./types.ts";

// Encoding computes every message length first and writes once into a buffer of the exact size.
// BinaryWriter (fork/join over a number[]) measured ~3.5 µs per 4-label series here, 10x this path,
// almost all of it pushing bytes one by one; the decoder, whose cost is elsewhere, uses BinaryReader.

const TAG_WR_TIMESERIES = (1 << 3) | WireType.LengthDelimited;
const TAG_WR_METADATA = (3 << 3) | WireType.LengthDelimited;
const TAG_TS_LABEL = (1 << 3) | WireType.LengthDelimited;
const TAG_TS_SAMPLE = (2 << 3) | WireType.LengthDelimited;
const TAG_STRING_1 = (1 << 3) | WireType.LengthDelimited;
const TAG_STRING_2 = (2 << 3) | WireType.LengthDelimited;
const TAG_SAMPLE_VALUE = (1 << 3) | WireType.Bit64;
const TAG_SAMPLE_TS = (2 << 3) | WireType.Varint;
const TAG_MD_TYPE = (1 << 3) | WireType.Varint;
const TAG_MD_HELP = (4 << 3) | WireType.LengthDelimited;
const TAG_MD_UNIT = (5 << 3) | WireType.LengthDelimited;

const utf8 = new TextEncoder();

/** UTF-8 byte length; ASCII (nearly every label) without a library call. */
function utf8Len(s: string): number {
  const n = s.length;
  for (let i = 0; i < n; i++) if (s.charCodeAt(i) > 0x7f) return Buffer.byteLength(s, "utf8");
  return n;
}

/** Bytes of a varint of a safe integer, by comparisons; negative int64 values always take 10. */
function varintLen(v: number): number {
  if (v < 0) return 10;
  if (v < 0x80) return 1;
  if (v < 0x4000) return 2;
  if (v < 0x200000) return 3;
  if (v < 0x10000000) return 4;
  if (v < 0x800000000) return 5;
  if (v < 0x40000000000) return 6;
  if (v < 0x2000000000000) return 7;
  return 8; // safe integers stop below 2^53
}

/** Size of a length-delimited field (1-byte tag + length + body) whose body is `len` bytes. */
function fieldLen(len: number): number {
  return 1 + varintLen(len) + len;
}

function strField(s: string): number {
  return s === "" ? 0 : fieldLen(utf8Len(s));
}

function isPositiveZero(v: number): boolean {
  return v === 0 && 1 / v > 0;
}

function checkTimestamp(ms: number): void {
  if (!Number.isSafeInteger(ms)) throw new RangeError(`timestamp ${ms} is not a safe integer (ms)`);
}

// proto3 canonical form omits default values, as Prometheus does; decoders accept both.
const labelLen = (l: Label) => strField(l.name) + strField(l.value);
const sampleLen = (s: Sample) =>
  (isPositiveZero(s.value) ? 0 : 9) + (s.timestampMs === 0 ? 0 : 1 + varintLen(s.timestampMs));
const metadataLen = (m: MetricMetadata) =>
  (m.type === 0 ? 0 : 1 + varintLen(m.type)) +
  strField(m.metricFamilyName) +
  strField(m.help) +
  strField(m.unit);

function seriesLen(ts: TimeSeries): number {
  let n = 0;
  for (const l of ts.labels) n += fieldLen(labelLen(l));
  for (const s of ts.samples) {
    checkTimestamp(s.timestampMs);
    n += fieldLen(sampleLen(s));
  }
  return n;
}

class Out {
  readonly buf: Uint8Array;
  pos = 0;
  constructor(size: number) {
    this.buf = new Uint8Array(size);
  }

  varint(v: number): void {
    this.pos = putVarint(this.buf, this.pos, v);
  }

  str(tag: number, s: string): void {
    if (s === "") return;
    const b = this.buf;
    b[this.pos++] = tag;
    const n = s.length;
    let ascii = true;
    for (let i = 0; i < n; i++) {
      if (s.charCodeAt(i) > 0x7f) {
        ascii = false;
        break;
      }
    }
    if (ascii) {
      this.varint(n);
      for (let i = 0; i < n; i++) b[this.pos++] = s.charCodeAt(i);
      return;
    }
    this.varint(Buffer.byteLength(s, "utf8"));
    this.pos += utf8.encodeInto(s, b.subarray(this.pos)).written;
  }

  double(v: number): void {
    scratchF64[0] = v;
    this.buf.set(scratchU8, this.pos);
    this.pos += 8;
  }
}

function writeSeries(o: Out, ts: TimeSeries, len: number): void {
  o.buf[o.pos++] = TAG_WR_TIMESERIES;
  o.varint(len);
  for (const l of ts.labels) {
    o.buf[o.pos++] = TAG_TS_LABEL;
    o.varint(labelLen(l));
    o.str(TAG_STRING_1, l.name);
    o.str(TAG_STRING_2, l.value);
  }
  for (const s of ts.samples) {
    o.buf[o.pos++] = TAG_TS_SAMPLE;
    o.varint(sampleLen(s));
    if (!isPositiveZero(s.value)) {
      o.buf[o.pos++] = TAG_SAMPLE_VALUE;
      o.double(s.value);
    }
    if (s.timestampMs !== 0) {
      o.buf[o.pos++] = TAG_SAMPLE_TS;
      o.varint(s.timestampMs);
    }
  }
}

function writeMetadata(o: Out, m: MetricMetadata, len: number): void {
  o.buf[o.pos++] = TAG_WR_METADATA;
  o.varint(len);
  if (m.type !== 0) {
    o.buf[o.pos++] = TAG_MD_TYPE;
    o.varint(m.type);
  }
  o.str(TAG_STRING_2, m.metricFamilyName);
  o.str(TAG_MD_HELP, m.help);
  o.str(TAG_MD_UNIT, m.unit);
}

/**
 * Encodes a WriteRequest as protobuf (not compressed). Labels and samples are written in the order
 * given; remote write expects labels sorted by name and samples ascending by time, which callers own.
 * Sample values are copied bit for bit. Throws RangeError for a timestamp that is not a safe integer
 * or a negative metadata type. Returns a new array owned by the caller.
 */
export function encodeWriteRequest(req: WriteRequest): Uint8Array {
  const sLens = req.timeseries.map(seriesLen);
  const md = req.metadata ?? [];
  for (const m of md) {
    if (!Number.isInteger(m.type) || m.type < 0) throw new RangeError(`metadata type ${m.type} is invalid`);
  }
  const mLens = md.map(metadataLen);
  let size = 0;
  for (const n of sLens) size += fieldLen(n);
  for (const n of mLens) size += fieldLen(n);
  const o = new Out(size);
  for (let i = 0; i < sLens.length; i++) writeSeries(o, req.timeseries[i], sLens[i]);
  for (let i = 0; i < mLens.length; i++) writeMetadata(o, md[i], mLens[i]);
  if (o.pos !== size) throw new Error(`remote write encoder: wrote ${o.pos} bytes, sized ${size}`);
  return o.buf;
}

/**
 * A series' labels as they are encoded inside a TimeSeries message (its repeated Label fields, in the
 * order given): a sender that forwards the same series again and again encodes them once and hands
 * them to encodeSeriesColumns. Returns a new array owned by the caller.
 */
export function encodeLabelFields(labels: readonly Label[]): Uint8Array {
  let size = 0;
  for (const l of labels) size += fieldLen(labelLen(l));
  const o = new Out(size);
  for (const l of labels) {
    o.buf[o.pos++] = TAG_TS_LABEL;
    o.varint(labelLen(l));
    o.str(TAG_STRING_1, l.name);
    o.str(TAG_STRING_2, l.value);
  }
  return o.buf;
}

/** One series of encodeSeriesColumns. */
export interface ColumnSeries {
  /** From encodeLabelFields. */
  readonly labelFields: Uint8Array;
  /** Positions of the series' samples in the columns, in the order to send (ascending by time). */
  readonly samples: readonly number[];
}

/**
 * A WriteRequest (protobuf, not compressed) of series whose labels are already encoded and whose
 * samples are positions into two columns: `timestampsMs[i]` and `values[i]` (copied bit for bit, so
 * staleness markers keep their payload). Throws RangeError for a timestamp that is not a safe integer.
 * Returns a new array owned by the caller, or, when `scratch` is given and large enough, a view of
 * its start, valid until the caller writes to `scratch` again (a sender that compresses each body at
 * once allocates no buffer per body).
 */
export function encodeSeriesColumns(
  series: readonly ColumnSeries[],
  timestampsMs: ArrayLike<number>,
  values: Float64Array,
  scratch?: Uint8Array,
): Uint8Array {
  // The forwarder's hot loop (once per forwarded sample): sizes by comparisons, bytes through a local
  // cursor, no closures; Out is for the rest.
  const lens = new Array<number>(series.length);
  let size = 0;
  for (let k = 0; k < series.length; k++) {
    const samples = series[k].samples;
    let n = series[k].labelFields.length;
    for (let j = 0; j < samples.length; j++) {
      const i = samples[j];
      const t = timestampsMs[i];
      checkTimestamp(t);
      const body = sampleBodyLen(values[i], t);
      n += 1 + varintLen(body) + body;
    }
    lens[k] = n;
    size += fieldLen(n);
  }
  // Every byte up to `size` is written below, so a reused buffer needs no clearing.
  const buf =
    scratch !== undefined && scratch.length >= size ? scratch.subarray(0, size) : new Uint8Array(size);
  const valueBytes = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  let p = 0;
  for (let k = 0; k < series.length; k++) {
    const { labelFields, samples } = series[k];
    buf[p++] = TAG_WR_TIMESERIES;
    p = putVarint(buf, p, lens[k]);
    buf.set(labelFields, p);
    p += labelFields.length;
    for (let j = 0; j < samples.length; j++) {
      const i = samples[j];
      p = putSample(buf, p, valueBytes, values[i], timestampsMs[i], i);
    }
  }
  if (p !== size) throw new Error(`remote write encoder: wrote ${p} bytes, sized ${size}`);
  return buf;
}

/**
 * encodeSeriesColumns for samples held as runs: series k is `labelFields[k]` with the samples at
 * positions `starts[k]` up to (not including) `ends[k]` of the columns, in that order (ascending by
 * time: the caller's to ensure). Allocates no position array per series, which the forwarder's
 * batches, one run per series, would otherwise pay for every series of every body.
 */
export function encodeSeriesRuns(
  labelFields: readonly Uint8Array[],
  starts: ArrayLike<number>,
  ends: ArrayLike<number>,
  timestampsMs: ArrayLike<number>,
  values: Float64Array,
  scratch?: Uint8Array,
): Uint8Array {
  const count = labelFields.length;
  const lens = new Array<number>(count);
  let size = 0;
  for (let k = 0; k < count; k++) {
    let n = labelFields[k].length;
    for (let i = starts[k]; i < ends[k]; i++) {
      const t = timestampsMs[i];
      checkTimestamp(t);
      const body = sampleBodyLen(values[i], t);
      n += 1 + varintLen(body) + body;
    }
    lens[k] = n;
    size += fieldLen(n);
  }
  const buf =
    scratch !== undefined && scratch.length >= size ? scratch.subarray(0, size) : new Uint8Array(size);
  const valueBytes = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  let p = 0;
  for (let k = 0; k < count; k++) {
    const fields = labelFields[k];
    buf[p++] = TAG_WR_TIMESERIES;
    p = putVarint(buf, p, lens[k]);
    buf.set(fields, p);
    p += fields.length;
    for (let i = starts[k]; i < ends[k]; i++)
      p = putSample(buf, p, valueBytes, values[i], timestampsMs[i], i);
  }
  if (p !== size) throw new Error(`remote write encoder: wrote ${p} bytes, sized ${size}`);
  return buf;
}

/** Writes the Sample field of column position `i` (value `v`, time `t`) at `p`; returns the end. */
function putSample(
  buf: Uint8Array,
  p: number,
  valueBytes: Uint8Array,
  v: number,
  t: number,
  i: number,
): number {
  buf[p++] = TAG_TS_SAMPLE;
  buf[p++] = sampleBodyLen(v, t); // at most 20: one byte
  if (!isPositiveZero(v)) {
    buf[p++] = TAG_SAMPLE_VALUE;
    const b = i * 8;
    buf[p] = valueBytes[b];
    buf[p + 1] = valueBytes[b + 1];
    buf[p + 2] = valueBytes[b + 2];
    buf[p + 3] = valueBytes[b + 3];
    buf[p + 4] = valueBytes[b + 4];
    buf[p + 5] = valueBytes[b + 5];
    buf[p + 6] = valueBytes[b + 6];
    buf[p + 7] = valueBytes[b + 7];
    p += 8;
  }
  if (t !== 0) {
    buf[p++] = TAG_SAMPLE_TS;
    p = putVarint(buf, p, t);
  }
  return p;
}

/** A Sample message's body size (proto3 defaults omitted). */
function sampleBodyLen(v: number, t: number): number {
  return (isPositiveZero(v) ? 0 : 9) + (t === 0 ? 0 : 1 + varintLen(t));
}

/** Writes a varint of a safe integer at `p`; returns the position after it. */
function putVarint(b: Uint8Array, p: number, v: number): number {
  if (v < 0) {
    let x = BigInt.asUintN(64, BigInt(v));
    while (x > 0x7fn) {
      b[p++] = Number(x & 0x7fn) | 0x80;
      x >>= 7n;
    }
    b[p++] = Number(x);
    return p;
  }
  // `& 0x7f` keeps the low bits of any safe integer exactly (ToInt32 is modulo 2^32); dividing by 128
  // is exact in doubles. Below 2^31 the shifts are int32 arithmetic.
  while (v > 0x7fffffff) {
    b[p++] = (v & 0x7f) | 0x80;
    v = Math.floor(v / 128);
  }
  while (v > 0x7f) {
    b[p++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  b[p++] = v;
  return p;
}

/** Encodes and snappy-compresses a WriteRequest: exactly the HTTP body of a remote-write POST. */
export function encodeRemoteWriteBody(req: WriteRequest): Uint8Array {
  return snappyCompress(encodeWriteRequest(req));
}
