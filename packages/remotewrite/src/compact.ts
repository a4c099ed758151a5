/**
 * The receiver's decoder: a WriteRequest decoded into parallel typed arrays with no object per series
 * or sample. A series' labels are kept as the bytes they arrived in (its "label key", one string per
 * series); a receiver caches whatever it derives from a label set by that key and decodes the labels
 * themselves (`labelsOfKey`) only for keys it has not seen. Everything is validated in the one pass
 * (wire types, lengths, limits, UTF-8), so a key handed out always decodes without error.
 */
import { type DecodeLimitName, RemoteWriteDecodeError } from "./errors.ts";
import type { DecodeLimits } from "./options.ts";
import type { Label, MetricMetadata } from "./types.ts";

/**
 * A decoded WriteRequest. Series i has the label key `labelKeys[i]` and the samples
 * `[sampleStart[i], sampleStart[i + 1])` of `timestampsMs` / `values`. The arrays are new and owned
 * by the caller; typed arrays may be longer than the counts say.
 */
export interface CompactWriteRequest {
  readonly seriesCount: number;
  readonly sampleCount: number;
  /**
   * The series' label fields as sent, one char per byte (latin1). Equal keys mean equal label sets
   * (different keys may still decode to equal sets). Decode with `labelsOfKey`. Made on first use
   * from `labelBytes`: a receiver that finds its series by the bytes makes no string per series.
   */
  readonly labelKeys: readonly string[];
  /**
   * The same keys as bytes: series i's are `labelBytes[labelKeyStart[i], labelKeyEnd[i])`. A view of
   * the decoded input when every series sends its labels together (senders do), so that input must
   * not change while the request is in use. Decode with `labelsOfKeyBytes`.
   */
  readonly labelBytes: Uint8Array;
  readonly labelKeyStart: Uint32Array;
  readonly labelKeyEnd: Uint32Array;
  /**
   * A 30-bit hash of each label key (equal keys, equal hashes), so a receiver can look keys up by
   * number instead of having every new key string hashed again.
   */
  readonly labelHashes: Uint32Array;
  /** seriesCount + 1 offsets into the sample arrays. */
  readonly sampleStart: Uint32Array;
  /** Milliseconds since the Unix epoch, safe integers. */
  readonly timestampsMs: Float64Array;
  /** Values copied bit for bit from the wire (a staleness-marker NaN keeps its payload). */
  readonly values: Float64Array;
  readonly metadata: readonly MetricMetadata[];
}

/**
 * A receiver's numbering of label keys, run by the decoder as it reads each series (svc's decode
 * worker: docs/decisions.md "Numbering label keys by their successor"). A key the numbering already
 * holds was checked (UTF-8) and hashed when it was added, so for a key it recognises the decoder
 * neither hashes it nor checks it again.
 */
export interface LabelKeyNumbering {
  /**
   * Series `index`'s label key is `bytes[start, end)` (`view` is over `bytes`). When the numbering
   * holds exactly these bytes (it compares them) and has numbered the series: the key's hash, as
   * labelHashes holds it. Else −1: the decoder hashes and checks the key, then calls `add`.
   */
  known(index: number, bytes: Uint8Array, view: DataView, start: number, end: number): number;
  /** Numbers series `index`, whose key `known` did not recognise, once the decoder has checked it. */
  add(index: number, bytes: Uint8Array, view: DataView, start: number, end: number, hash: number): void;
}

const WT_VARINT = 0;
const WT_BIT64 = 1;
const WT_LEN = 2;
const WT_START_GROUP = 3;
const WT_END_GROUP = 4;
const WT_BIT32 = 5;

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

function tooMany(
  what: string,
  limit: DecodeLimitName,
  actual: number,
  allowed: number,
): RemoteWriteDecodeError {
  return new RemoteWriteDecodeError(`remote write: ${what}`, { limit, actual, allowed });
}

function malformed(what: string): RemoteWriteDecodeError {
  return new RemoteWriteDecodeError(`remote write: ${what}`);
}

/** Cursor over the protobuf bytes; every read is bounds-checked against the input's end. */
class Cursor {
  pos = 0;
  readonly buf: Buffer;
  readonly view: DataView;
  readonly len: number;

  constructor(buf: Buffer) {
    this.buf = buf;
    this.view = dataView(buf);
    this.len = buf.length;
  }

  /** A varint that must fit in uint32 (tags and lengths). */
  uint32(): number {
    // Tags and label lengths are nearly always one byte, series lengths two.
    const p = this.pos;
    const b = this.buf;
    if (p + 1 < this.len) {
      const c0 = b[p];
      if (c0 < 0x80) {
        this.pos = p + 1;
        return c0;
      }
      const c1 = b[p + 1];
      if (c1 < 0x80) {
        this.pos = p + 2;
        return (c0 & 0x7f) | (c1 << 7);
      }
    }
    return this.uint32Long();
  }

  uint32Long(): number {
    const b = this.buf;
    let x = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      if (this.pos >= this.len) throw malformed("malformed protobuf (premature EOF)");
      const c = b[this.pos++];
      x += (c & 0x7f) * 2 ** shift;
      if (c < 0x80) {
        if (x > 0xffffffff) break;
        return x;
      }
    }
    throw malformed("malformed protobuf (invalid varint)");
  }

  /** An int64 varint as a number; refused unless exact (|hi word| < 2^21). */
  int64(): number {
    const b = this.buf;
    let lo = 0;
    let hi = 0;
    let c = 0;
    let i = 0;
    for (; i < 10; i++) {
      if (this.pos >= this.len) throw malformed("malformed protobuf (premature EOF)");
      c = b[this.pos++];
      if (i < 4) lo |= (c & 0x7f) << (7 * i);
      else if (i === 4) {
        lo |= (c & 0x0f) << 28;
        hi = (c & 0x7f) >>> 4;
      } else hi |= (c & 0x7f) << (7 * i - 32);
      if (c < 0x80) break;
    }
    if (c >= 0x80) throw malformed("malformed protobuf (invalid varint)");
    hi |= 0;
    if (hi >= 0x200000 || hi < -0x200000) throw malformed("timestamp out of range");
    return hi * 0x100000000 + (lo >>> 0);
  }

  /** Reads a length prefix and returns the end offset of the sub-message, checked against the input. */
  messageEnd(): number {
    const len = this.uint32();
    const end = this.pos + len;
    if (end > this.len) throw malformed("message length runs past end of input");
    return end;
  }

  /** Tag as fieldNo * 8 + wireType; field 0 is refused as protobuf readers do. */
  tag(): number {
    const t = this.uint32();
    if (t < 8) throw malformed(`malformed protobuf (illegal tag: field no 0 wire type ${t & 7})`);
    return t;
  }

  skip(tag: number): void {
    const wt = tag & 7;
    if (wt === WT_VARINT) {
      for (;;) {
        if (this.pos >= this.len) throw malformed("malformed protobuf (premature EOF)");
        if (this.buf[this.pos++] < 0x80) return;
      }
    }
    let n: number;
    if (wt === WT_BIT64) n = 8;
    else if (wt === WT_BIT32) n = 4;
    else if (wt === WT_LEN) n = this.uint32();
    else if (wt === WT_START_GROUP || wt === WT_END_GROUP) {
      // Group/end-group are proto2 relics no remote-write sender emits; refusing them bounds recursion.
      throw malformed(`unexpected group field ${tag >>> 3}`);
    } else throw malformed(`malformed protobuf (cant skip wire type ${wt})`);
    if (this.pos + n > this.len) throw malformed("malformed protobuf (premature EOF)");
    this.pos += n;
  }

  /**
   * Checks a string field's length and, when `utf8`, that its bytes are UTF-8, without decoding it;
   * returns its start.
   */
  checkString(max: number, limit: DecodeLimitName, what: string, utf8: boolean): number {
    const len = this.uint32();
    if (len > max) throw tooMany(`${what} too long`, limit, len, max);
    const start = this.pos;
    const end = start + len;
    if (end > this.len) throw malformed(`${what} runs past end of input`);
    const b = this.buf;
    for (let i = start; utf8 && i < end; i++) {
      if (b[i] > 0x7f) {
        try {
          strictUtf8.decode(b.subarray(start, end));
        } catch {
          throw malformed(`${what} is not valid UTF-8`);
        }
        break;
      }
    }
    this.pos = end;
    return start;
  }

  /** Reads and decodes a string field, refusing it before decoding when longer than `max` bytes. */
  string(max: number, limit: DecodeLimitName, what: string): string {
    const start = this.checkString(max, limit, what, true);
    return decodeString(this.buf, start, this.pos);
  }
}

/**
 * Buffer's own latin1 slice (what toString("latin1", s, e) calls after its argument handling, which
 * cost as much again per key); toString where a runtime lacks it.
 */
const latin1: (b: Buffer, start: number, end: number) => string =
  typeof (Buffer.prototype as { latin1Slice?: unknown }).latin1Slice === "function"
    ? (b, start, end) =>
        (b as unknown as { latin1Slice(s: number, e: number): string }).latin1Slice(start, end)
    : (b, start, end) => b.toString("latin1", start, end);

/** Decodes validated UTF-8 bytes [start, end). */
function decodeString(b: Buffer, start: number, end: number): string {
  for (let i = start; i < end; i++) if (b[i] > 0x7f) return b.toString("utf8", start, end);
  return latin1(b, start, end);
}

function finish(c: Cursor, end: number, what: string): void {
  if (c.pos !== end) throw malformed(`${what} overruns its length`);
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Growable sample columns. */
class Columns {
  n = 0;
  ts: Float64Array;
  vals: Float64Array;
  bytes: Uint8Array;

  constructor(cap: number) {
    this.ts = new Float64Array(cap);
    this.vals = new Float64Array(cap);
    this.bytes = new Uint8Array(this.vals.buffer);
  }

  grow(): void {
    const cap = this.ts.length * 2;
    const ts = new Float64Array(cap);
    ts.set(this.ts);
    const vals = new Float64Array(cap);
    // Copied as bytes, so NaN payloads are kept.
    new Uint8Array(vals.buffer).set(this.bytes);
    this.ts = ts;
    this.vals = vals;
    this.bytes = new Uint8Array(vals.buffer);
  }
}

/** Reads one Sample message [pos, end) into sample slot `cols.n`. */
function readSample(c: Cursor, end: number, cols: Columns): void {
  if (cols.n === cols.ts.length) cols.grow();
  const k = cols.n++;
  let t = 0;
  const off = k * 8;
  const vb = cols.bytes;
  for (let i = 0; i < 8; i++) vb[off + i] = 0;
  while (c.pos < end) {
    const tag = c.tag();
    if (tag === 0x09) {
      // value, fixed64: raw bytes, never through arithmetic
      if (c.pos + 8 > c.len) throw malformed("truncated double");
      const b = c.buf;
      const p = c.pos;
      for (let i = 0; i < 8; i++) vb[off + i] = b[p + i];
      c.pos = p + 8;
    } else if (tag === 0x10) {
      t = c.int64();
    } else if (tag >>> 3 === 1 || tag >>> 3 === 2) {
      throw malformed(
        `Sample.${tag >>> 3 === 1 ? "value" : "timestamp"} has wire type ${tag & 7}, want ${tag >>> 3 === 1 ? WT_BIT64 : WT_VARINT}`,
      );
    } else c.skip(tag);
  }
  cols.ts[k] = t;
}

/**
 * Validates one Label message [pos, end) except for UTF-8 (`utf8` false: readSeries checks a whole
 * label key at once and looks closer only when a byte has its high bit set).
 */
function checkLabel(c: Cursor, end: number, lim: DecodeLimits, utf8: boolean): void {
  while (c.pos < end) {
    const tag = c.tag();
    if (tag === 0x0a) c.checkString(lim.maxLabelNameBytes, "maxLabelNameBytes", "label name", utf8);
    else if (tag === 0x12) c.checkString(lim.maxLabelValueBytes, "maxLabelValueBytes", "label value", utf8);
    else if (tag >>> 3 === 1 || tag >>> 3 === 2) {
      throw malformed(`Label.${tag >>> 3 === 1 ? "name" : "value"} has wire type ${tag & 7}, want ${WT_LEN}`);
    } else c.skip(tag);
  }
}

/** UTF-8 check of every label name and value in a label key's bytes (structure already checked). */
function checkKeyUtf8(key: Buffer, lim: DecodeLimits): void {
  const c = new Cursor(key);
  while (c.pos < c.len) {
    c.tag();
    const e = c.messageEnd();
    checkLabel(c, e, lim, true);
  }
}

interface Counts {
  samples: number;
}

/** Where decodeCompact keeps each series' label key: byte ranges, and keys sent in several parts. */
interface Keys {
  starts: Uint32Array<ArrayBuffer>;
  ends: Uint32Array<ArrayBuffer>;
  hashes: Uint32Array<ArrayBuffer>;
  /** Keys whose label fields were interleaved with other fields, by series index (rare). */
  scattered: Map<number, Buffer> | undefined;
  numbering: LabelKeyNumbering | undefined;
}

/**
 * Reads one TimeSeries message [pos, end) as series `index`: its label key's byte range (or, sent in
 * parts, a copy) and hash go into `keys`.
 */
function readSeries(
  c: Cursor,
  end: number,
  lim: DecodeLimits,
  cols: Columns,
  count: Counts,
  keys: Keys,
  index: number,
): void {
  let labels = 0;
  // The key is the byte range of the label fields; fields interleaved with others are concatenated.
  let keyStart = -1;
  let keyEnd = -1;
  let parts: Buffer[] | undefined;
  const b = c.buf;
  while (c.pos < end) {
    const fieldStart = c.pos;
    const tag = c.tag();
    if (tag === 0x0a) {
      if (labels >= lim.maxLabelsPerSeries) {
        throw tooMany(
          "too many labels in a series",
          "maxLabelsPerSeries",
          labels + 1,
          lim.maxLabelsPerSeries,
        );
      }
      labels++;
      const e = c.messageEnd();
      checkLabel(c, e, lim, false);
      finish(c, e, "Label");
      if (keyStart < 0) keyStart = fieldStart;
      else if (fieldStart !== keyEnd) {
        parts ??= [];
        parts.push(b.subarray(keyStart, keyEnd));
        keyStart = fieldStart;
      }
      keyEnd = e;
    } else if (tag === 0x12) {
      if (count.samples >= lim.maxSamples) {
        throw tooMany("too many samples", "maxSamples", count.samples + 1, lim.maxSamples);
      }
      count.samples++;
      const e = c.messageEnd();
      readSample(c, e, cols);
      finish(c, e, "Sample");
    } else if (tag >>> 3 === 1 || tag >>> 3 === 2) {
      throw malformed(
        `TimeSeries.${tag >>> 3 === 1 ? "labels" : "samples"} has wire type ${tag & 7}, want ${WT_LEN}`,
      );
    } else c.skip(tag);
  }
  if (keyStart < 0) keyStart = keyEnd = 0;
  if (parts === undefined) {
    keys.starts[index] = keyStart;
    keys.ends[index] = keyEnd;
    keys.hashes[index] = keyHash(b, c.view, keyStart, keyEnd, lim, keys.numbering, index);
    return;
  }
  parts.push(b.subarray(keyStart, keyEnd));
  const kb = Buffer.concat(parts);
  keys.scattered ??= new Map();
  keys.scattered.set(index, kb);
  keys.hashes[index] = keyHash(kb, dataView(kb), 0, kb.length, lim, keys.numbering, index);
}

/**
 * The hash of series `index`'s label key `b[start, end)` once its labels' UTF-8 is checked: the
 * numbering's, when it recognises the key (checked when added); else computed, and the key checked
 * and numbered.
 */
function keyHash(
  b: Buffer,
  view: DataView,
  start: number,
  end: number,
  lim: DecodeLimits,
  numbering: LabelKeyNumbering | undefined,
  index: number,
): number {
  if (numbering !== undefined) {
    const known = numbering.known(index, b, view, start, end);
    if (known >= 0) return known;
  }
  const h = hashBytes(view, start, end);
  // All bytes ASCII (tags and lengths included) means every label string is valid UTF-8.
  if (orOfLastHash & 0x80) checkKeyUtf8(b.subarray(start, end), lim);
  numbering?.add(index, b, view, start, end, h);
  return h;
}

/** OR of the bytes hashBytes saw last (a module scratch, so no object per call). */
let orOfLastHash = 0;

/**
 * Two FNV-1a-style lanes (FNV's prime and MurmurHash2's multiplier) over alternate little-endian
 * 32-bit words of d[start, end), the tail bytes into the first, mixed into 30 bits; also sets
 * orOfLastHash. Two lanes take 8 bytes per step with independent multiplies (a third faster than one
 * lane); DataView reads compile to single unaligned loads, a third faster than byte reads.
 */
function hashBytes(d: DataView, start: number, end: number): number {
  let a = 0x811c9dc5;
  let b = 0x9e3779b9;
  let or = 0;
  let i = start;
  for (; i + 8 <= end; i += 8) {
    const w = d.getUint32(i, true);
    const x = d.getUint32(i + 4, true);
    or |= w | x;
    a = Math.imul(a ^ w, 0x01000193);
    b = Math.imul(b ^ x, 0x5bd1e995);
  }
  for (; i < end; i++) {
    const x = d.getUint8(i);
    or |= x;
    a = Math.imul(a ^ x, 0x01000193);
  }
  orOfLastHash = or | (or >>> 8) | (or >>> 16) | (or >>> 24);
  let h = a ^ Math.imul(b ^ (end - start), 0x2c1b3c6d);
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  // 30 bits: small integers in V8, so Maps keyed by them neither box nor hash a heap number.
  return (h ^ (h >>> 13)) & 0x3fffffff;
}

/** The hash `labelHashes` holds for a label key. */
export function labelKeyHash(key: string): number {
  return hashBytes(dataView(Buffer.from(key, "latin1")), 0, key.length);
}

/** The hash `labelHashes` holds for the label key bytes `bytes[start, end)`. */
export function labelKeyBytesHash(bytes: Uint8Array, start = 0, end = bytes.length): number {
  return hashBytes(dataView(bytes), start, end);
}

function dataView(b: Uint8Array): DataView {
  return new DataView(b.buffer, b.byteOffset, b.byteLength);
}

function readMetadata(c: Cursor, end: number, lim: DecodeLimits): MetricMetadata {
  let type = 0;
  let metricFamilyName = "";
  let help = "";
  let unit = "";
  const max = lim.maxMetadataTextBytes;
  while (c.pos < end) {
    const tag = c.tag();
    const no = tag >>> 3;
    const wt = tag & 7;
    if (no === 1) {
      if (wt !== WT_VARINT) throw malformed(`MetricMetadata.type has wire type ${wt}, want ${WT_VARINT}`);
      // int32 semantics: the low 32 bits, signed (a negative value is sign-extended to 10 bytes).
      type = c.int64() | 0;
    } else if (no === 2 || no === 4 || no === 5) {
      const field = no === 2 ? "metric_family_name" : no === 4 ? "help" : "unit";
      if (wt !== WT_LEN) throw malformed(`MetricMetadata.${field} has wire type ${wt}, want ${WT_LEN}`);
      const what = no === 2 ? "metric family name" : no === 4 ? "metadata help" : "metadata unit";
      const s = c.string(max, "maxMetadataTextBytes", what);
      if (no === 2) metricFamilyName = s;
      else if (no === 4) help = s;
      else unit = s;
    } else c.skip(tag);
  }
  return { type, metricFamilyName, help, unit };
}

/**
 * Decodes a protobuf WriteRequest (already decompressed, size already checked) from untrusted bytes.
 * Counts and string sizes are checked against `lim` as they are met; unknown fields are skipped.
 * Throws RemoteWriteDecodeError, never anything else, on bad input. `numbering`, when given, numbers
 * each series' key as it is read (also the series of a body refused further on).
 */
export function decodeCompact(
  bytes: Uint8Array,
  lim: DecodeLimits,
  numbering?: LabelKeyNumbering,
): CompactWriteRequest {
  const c = new Cursor(asBuffer(bytes));
  let n = 0;
  const metadata: MetricMetadata[] = [];
  // Sized for a typical series (labels of ~100 bytes and a sample or two), grown by doubling: an
  // estimate from the smallest possible encoding would zero several times the memory needed.
  const cols = new Columns(Math.min(lim.maxSamples, Math.ceil(bytes.length / 64)) + 8);
  let starts = new Uint32Array(Math.min(lim.maxSeries, Math.ceil(bytes.length / 96)) + 8);
  const keys: Keys = {
    starts: new Uint32Array(starts.length),
    ends: new Uint32Array(starts.length),
    hashes: new Uint32Array(starts.length),
    scattered: undefined,
    numbering,
  };
  const count: Counts = { samples: 0 };
  try {
    while (c.pos < c.len) {
      const tag = c.tag();
      if (tag === 0x0a) {
        if (n >= lim.maxSeries) throw tooMany("too many series", "maxSeries", n + 1, lim.maxSeries);
        if (n + 1 >= starts.length) {
          const size = starts.length * 2;
          starts = grown(starts, size);
          keys.starts = grown(keys.starts, size);
          keys.ends = grown(keys.ends, size);
          keys.hashes = grown(keys.hashes, size);
        }
        starts[n] = cols.n;
        const e = c.messageEnd();
        readSeries(c, e, lim, cols, count, keys, n);
        n++;
        finish(c, e, "TimeSeries");
      } else if (tag === 0x1a) {
        if (metadata.length >= lim.maxMetadata) {
          throw tooMany("too many metadata entries", "maxMetadata", metadata.length + 1, lim.maxMetadata);
        }
        const e = c.messageEnd();
        metadata.push(readMetadata(c, e, lim));
        finish(c, e, "MetricMetadata");
      } else if (tag >>> 3 === 1 || tag >>> 3 === 3) {
        const field = tag >>> 3 === 1 ? "timeseries" : "metadata";
        throw malformed(`WriteRequest.${field} has wire type ${tag & 7}, want ${WT_LEN}`);
      } else c.skip(tag);
    }
  } catch (err) {
    if (err instanceof RemoteWriteDecodeError) throw err;
    throw malformed(`malformed protobuf (${(err as Error).message})`);
  }
  starts[n] = cols.n;
  const labelBytes = keys.scattered ? gatherKeys(c.buf, keys, n) : c.buf;
  return new DecodedRequest(
    n,
    cols.n,
    labelBytes,
    keys.starts,
    keys.ends,
    keys.hashes,
    starts,
    cols.ts,
    cols.vals,
    metadata,
  );
}

function grown(a: Uint32Array, size: number): Uint32Array<ArrayBuffer> {
  const b = new Uint32Array(size);
  b.set(a);
  return b;
}

/** One buffer holding every key when some were sent in parts; rewrites keys' ranges into it. */
function gatherKeys(buf: Buffer, keys: Keys, n: number): Buffer {
  let total = 0;
  for (let i = 0; i < n; i++) total += keys.scattered?.get(i)?.length ?? keys.ends[i] - keys.starts[i];
  const out = Buffer.allocUnsafe(total);
  let at = 0;
  for (let i = 0; i < n; i++) {
    const part = keys.scattered?.get(i) ?? buf.subarray(keys.starts[i], keys.ends[i]);
    out.set(part, at);
    keys.starts[i] = at;
    at += part.length;
    keys.ends[i] = at;
  }
  return out;
}

/**
 * A CompactWriteRequest over decoded parts (this decoder's, or buffers a decode worker moved to the
 * event loop), its label-key strings made on first use.
 */
export function compactWriteRequest(
  p: Omit<CompactWriteRequest, "labelKeys" | "labelBytes"> & { labelBytes: Buffer },
): CompactWriteRequest {
  return new DecodedRequest(
    p.seriesCount,
    p.sampleCount,
    p.labelBytes,
    p.labelKeyStart,
    p.labelKeyEnd,
    p.labelHashes,
    p.sampleStart,
    p.timestampsMs,
    p.values,
    p.metadata,
  );
}

/** CompactWriteRequest with its label-key strings made on first use. */
class DecodedRequest implements CompactWriteRequest {
  #labelKeys: string[] | undefined;

  constructor(
    readonly seriesCount: number,
    readonly sampleCount: number,
    readonly labelBytes: Buffer,
    readonly labelKeyStart: Uint32Array,
    readonly labelKeyEnd: Uint32Array,
    readonly labelHashes: Uint32Array,
    readonly sampleStart: Uint32Array,
    readonly timestampsMs: Float64Array,
    readonly values: Float64Array,
    readonly metadata: readonly MetricMetadata[],
  ) {}

  get labelKeys(): readonly string[] {
    if (this.#labelKeys === undefined) {
      const keys = new Array<string>(this.seriesCount);
      for (let i = 0; i < this.seriesCount; i++)
        keys[i] = latin1(this.labelBytes, this.labelKeyStart[i], this.labelKeyEnd[i]);
      this.#labelKeys = keys;
    }
    return this.#labelKeys;
  }
}

/**
 * The labels of a label key from `CompactWriteRequest.labelKeys`, in the order sent (not sorted,
 * not de-duplicated). Returns a new array the caller owns. A key not made by the decoder throws
 * RemoteWriteDecodeError.
 */
export function labelsOfKey(key: string): Label[] {
  return labelsOfKeyBytes(Buffer.from(key, "latin1"));
}

/**
 * `labelsOfKey` of the key bytes `bytes[start, end)` (CompactWriteRequest.labelBytes and its ranges),
 * without making the key's string.
 */
export function labelsOfKeyBytes(bytes: Uint8Array, start = 0, end = bytes.length): Label[] {
  const c = new Cursor(asBuffer(bytes).subarray(start, end));
  const out: Label[] = [];
  const big = Number.MAX_SAFE_INTEGER;
  while (c.pos < c.len) {
    const tag = c.tag();
    if (tag !== 0x0a) throw malformed("not a label key");
    const e = c.messageEnd();
    let name = "";
    let value = "";
    while (c.pos < e) {
      const t = c.tag();
      if (t === 0x0a) name = c.string(big, "maxLabelNameBytes", "label name");
      else if (t === 0x12) value = c.string(big, "maxLabelValueBytes", "label value");
      else c.skip(t);
    }
    finish(c, e, "Label");
    out.push({ name, value });
  }
  return out;
}
