/**
 * Compact WAL sample record (type 3, layout in FORMAT.md). Each record decodes on its own: refs and
 * timestamps are varint deltas against the previous sample of the record, and a value is a varint
 * integer with a decimal scale when it is exactly one (counters, gauges with a few decimals), else
 * its raw 64 bits — so every value, NaN payloads included, comes back bit for bit.
 */

export const REC_SAMPLES_COMPACT = 3;

/** Scale tags 0..6 mean value = k / 10^tag; tag 7 means raw bits follow. */
const RAW = 7;
const POW10 = [1, 10, 100, 1000, 10_000, 100_000, 1_000_000];
/** Integers up to this magnitude keep their zigzag form (< 2^53) exact. */
const MAX_K = 2 ** 51;

const f64 = new Float64Array(1);
const u32 = new Uint32Array(f64.buffer);

/** Worst-case payload bytes for n samples (type byte and count included). */
export function compactSamplesMaxBytes(n: number): number {
  return 1 + 8 + n * (6 + 8 + 8);
}

/** Writes an unsigned integer < 2^53 as LEB128; returns the new position. */
function putUvarint(buf: Uint8Array, pos: number, x: number): number {
  if (x < 0x80000000) {
    // Nearly every ref and timestamp delta and most values: 32-bit shifts, not float division.
    while (x >= 0x80) {
      buf[pos++] = (x & 0x7f) | 0x80;
      x >>>= 7;
    }
    buf[pos++] = x;
    return pos;
  }
  while (x >= 0x80) {
    buf[pos++] = (x % 0x80) | 0x80;
    x = Math.floor(x / 0x80);
  }
  buf[pos++] = x;
  return pos;
}

const zigzag = (x: number): number => (x >= 0 ? 2 * x : -2 * x - 1);

/** The scale tag (0..6) at which value `v` is an exact integer k / 10^tag, or RAW. */
function scaleOf(v: number): number {
  if (!(Math.abs(v) <= MAX_K) || (v === 0 && 1 / v < 0)) return RAW; // NaN, ±Inf, huge, -0
  if (Number.isInteger(v)) return 0;
  for (let d = 1; d < POW10.length; d++) {
    const k = Math.round(v * POW10[d]);
    if (Math.abs(k) > MAX_K) return RAW;
    if (k / POW10[d] === v) return d;
  }
  return RAW;
}

/**
 * Encodes samples (parallel arrays, values as raw bits hi/lo) into `out` starting at `pos`; returns
 * the end position. `out` must hold compactSamplesMaxBytes(n) bytes from pos.
 */
export function encodeCompactSamples(
  out: Uint8Array,
  pos: number,
  n: number,
  refs: ArrayLike<number>,
  ts: ArrayLike<number>,
  his: ArrayLike<number>,
  los: ArrayLike<number>,
): number {
  out[pos++] = REC_SAMPLES_COMPACT;
  pos = putUvarint(out, pos, n);
  let prevRef = 0;
  let prevT = 0;
  for (let i = 0; i < n; i++) {
    u32[0] = los[i];
    u32[1] = his[i];
    const v = f64[0];
    const tag = scaleOf(v);
    const ref = refs[i];
    pos = putUvarint(out, pos, zigzag(ref - prevRef) * 8 + tag);
    pos = putUvarint(out, pos, zigzag(ts[i] - prevT));
    prevRef = ref;
    prevT = ts[i];
    if (tag === RAW) {
      const lo = los[i];
      const hi = his[i];
      out[pos] = lo & 0xff;
      out[pos + 1] = (lo >>> 8) & 0xff;
      out[pos + 2] = (lo >>> 16) & 0xff;
      out[pos + 3] = lo >>> 24;
      out[pos + 4] = hi & 0xff;
      out[pos + 5] = (hi >>> 8) & 0xff;
      out[pos + 6] = (hi >>> 16) & 0xff;
      out[pos + 7] = hi >>> 24;
      pos += 8;
    } else {
      pos = putUvarint(out, pos, zigzag(tag === 0 ? v : Math.round(v * POW10[tag])));
    }
  }
  return pos;
}

/** Thrown on a malformed compact record (the CRC matched, so this is a bug or a foreign file). */
export class CompactRecordError extends Error {}

/** The position after the varint uvarintAt read last (a module variable: no object per call). */
let nextPos = 0;

/** The LEB128 varint at buf[pos] (any length up to 2^56); the position after it is left in nextPos. */
function uvarintAt(buf: Uint8Array, pos: number, end: number): number {
  let x = 0;
  let mul = 1;
  for (;;) {
    if (pos >= end || mul > 2 ** 49) throw new CompactRecordError("truncated or oversized varint");
    const b = buf[pos++];
    x += (b & 0x7f) * mul;
    if (b < 0x80) {
      nextPos = pos;
      return x;
    }
    mul *= 0x80;
  }
}

/** Zigzag decoding: 32-bit operations below 2^31, float arithmetic above. */
function unzig(z: number): number {
  if (z <= 0x7fffffff) return (z >>> 1) ^ -(z & 1);
  return z % 2 === 0 ? z / 2 : -(z + 1) / 2;
}

/**
 * Decodes a compact sample record payload (after its type byte, starting at `pos`), calling `sample`
 * for each sample with the value as raw bits.
 *
 * Hot path of a restart's WAL replay: a one-byte varint (nearly every ref delta and most timestamp
 * deltas) is read inline with the position in a local; longer ones go through uvarintAt. An earlier
 * version read every varint through a closure over `pos` with float arithmetic, ~45 ns a sample of a
 * 1 M-sample replay (docs/performance.md, "Start-up, fifth pass").
 */
export function decodeCompactSamples(
  buf: Uint8Array,
  pos: number,
  sample: (ref: number, t: number, hi: number, lo: number) => void,
): void {
  const end = buf.length;
  const n = uvarintAt(buf, pos, end);
  pos = nextPos;
  let ref = 0;
  let t = 0;
  for (let i = 0; i < n; i++) {
    let h: number;
    if (pos < end && buf[pos] < 0x80) h = buf[pos++];
    else {
      h = uvarintAt(buf, pos, end);
      pos = nextPos;
    }
    let tag: number;
    if (h <= 0x7fffffff) {
      tag = h & 7;
      ref += unzig(h >>> 3);
    } else {
      tag = h % 8;
      ref += unzig((h - tag) / 8);
    }
    let dt: number;
    if (pos < end && buf[pos] < 0x80) dt = buf[pos++];
    else {
      dt = uvarintAt(buf, pos, end);
      pos = nextPos;
    }
    t += unzig(dt);
    if (tag === RAW) {
      if (pos + 8 > end) throw new CompactRecordError("truncated value");
      const lo = (buf[pos] | (buf[pos + 1] << 8) | (buf[pos + 2] << 16) | (buf[pos + 3] << 24)) >>> 0;
      const hi = (buf[pos + 4] | (buf[pos + 5] << 8) | (buf[pos + 6] << 16) | (buf[pos + 7] << 24)) >>> 0;
      pos += 8;
      sample(ref, t, hi, lo);
    } else {
      let z: number;
      if (pos < end && buf[pos] < 0x80) z = buf[pos++];
      else {
        z = uvarintAt(buf, pos, end);
        pos = nextPos;
      }
      const k = unzig(z);
      f64[0] = tag === 0 ? k : k / POW10[tag];
      sample(ref, t, u32[1], u32[0]);
    }
  }
}
