/**
 * XOR chunk: Gorilla-style compression of (timestamp, float64) samples in one bit stream, as in
 * Prometheus' tsdb/chunkenc/xor.go (our own code and bit layout, see FORMAT.md).
 *
 * Timestamps (integer ms): the first is written raw (64 bits), then delta-of-delta in buckets
 * `0` | `10`+14 | `110`+17 | `1110`+20 | `1111`+64 bits (two's complement).
 * Values: the first raw (64 bits), then the XOR with the previous value: `0` (same) |
 * `10`+meaningful bits inside the previous leading/trailing window | `11`+5 leading+6 length+bits.
 * Values are handled as raw IEEE-754 bit pairs, so NaN payloads (the staleness marker) round-trip.
 *
 * The encoder keeps no state of its own between calls: its state is loaded from and saved into the
 * caller's storage (the head keeps it in typed arrays, one slot per series), which is why it is a
 * reusable cursor rather than one object per chunk.
 */

const TWO32 = 4294967296;

/** Worst case size of one appended sample (ts 4+64, value 2+5+6+64), bits. */
export const MAX_SAMPLE_BITS = 145;
/** Size of the first sample (64 + 64), bits. */
export const FIRST_SAMPLE_BITS = 128;

const f64 = new Float64Array(1);
const u32 = new Uint32Array(f64.buffer);

/** Raw bits of a number (low word, high word) into out[0], out[1]. */
export function numberBits(v: number, out: Uint32Array): void {
  f64[0] = v;
  out[0] = u32[0];
  out[1] = u32[1];
}

function ctz32(x: number): number {
  return 31 - Math.clz32(x & -x);
}

/** Writes bits into a zero-initialised byte region starting at `base`. */
export class BitWriter {
  buf: Uint8Array = new Uint8Array(0);
  base = 0;
  /** Bits written so far, relative to base. */
  pos = 0;

  /**
   * Writes the low n (≤ 32) bits of v, most significant first. The bits are left-aligned in one int32
   * and written a byte at a time (the first byte's free bits, then whole bytes), with no per-byte
   * masks or Math.min: the hot path of every append, a WAL replay's included (docs/performance.md,
   * "Start-up, fifth pass").
   */
  write(v: number, n: number): void {
    if (n <= 0) return;
    const buf = this.buf;
    const pos = this.pos;
    let idx = this.base + (pos >>> 3);
    const used = pos & 7;
    this.pos = pos + n;
    // The n bits at the top of x, zeros below them.
    let x = n === 32 ? v | 0 : v << (32 - n);
    buf[idx++] |= x >>> (24 + used);
    let left = n - 8 + used;
    x <<= 8 - used;
    while (left > 0) {
      buf[idx++] |= x >>> 24;
      x <<= 8;
      left -= 8;
    }
  }

  /** Writes the low n (≤ 64) bits of the 64-bit value hi:lo. */
  write64(hi: number, lo: number, n: number): void {
    if (n > 32) {
      this.write(hi, n - 32);
      this.write(lo, 32);
    } else {
      this.write(lo, n);
    }
  }

  /** Writes a safe integer as 64-bit two's complement. */
  writeInt64(x: number): void {
    const hi = Math.floor(x / TWO32);
    this.write(hi >>> 0, 32);
    this.write((x - hi * TWO32) >>> 0, 32);
  }
}

/** Encoder state that survives between appends; stored by the caller (see head.ts). */
export interface XorState {
  count: number;
  /** Bit position after the last sample. */
  bits: number;
  t: number;
  tDelta: number;
  vHi: number;
  vLo: number;
  leading: number;
  trailing: number;
}

export function emptyXorState(): XorState {
  return { count: 0, bits: 0, t: 0, tDelta: 0, vHi: 0, vLo: 0, leading: 0xff, trailing: 0 };
}

const vbits = new Uint32Array(2);
const w = new BitWriter();

/**
 * Appends one sample to the chunk held in buf[base...], updating `s`. The caller guarantees
 * room for MAX_SAMPLE_BITS more bits, a zeroed tail and t > s.t (strictly increasing).
 */
export function xorAppend(buf: Uint8Array, base: number, s: XorState, t: number, v: number): void {
  numberBits(v, vbits);
  xorAppendBits(buf, base, s, t, vbits[1], vbits[0]);
}

/** Same as xorAppend with the value given as raw bits (high word, low word). */
export function xorAppendBits(
  buf: Uint8Array,
  base: number,
  s: XorState,
  t: number,
  hi: number,
  lo: number,
): void {
  w.buf = buf;
  w.base = base;
  w.pos = s.bits;
  if (s.count === 0) {
    w.writeInt64(t);
    w.write(hi, 32);
    w.write(lo, 32);
    s.tDelta = 0;
  } else {
    const delta = t - s.t;
    const dod = delta - s.tDelta;
    if (dod === 0) w.write(0, 1);
    else if (dod >= -8192 && dod < 8192) {
      w.write(0b10, 2);
      w.write(dod & 0x3fff, 14);
    } else if (dod >= -65536 && dod < 65536) {
      w.write(0b110, 3);
      w.write(dod & 0x1ffff, 17);
    } else if (dod >= -524288 && dod < 524288) {
      w.write(0b1110, 4);
      w.write(dod & 0xfffff, 20);
    } else {
      w.write(0b1111, 4);
      w.writeInt64(dod);
    }
    s.tDelta = delta;
    const xhi = (hi ^ s.vHi) >>> 0;
    const xlo = (lo ^ s.vLo) >>> 0;
    if (xhi === 0 && xlo === 0) {
      w.write(0, 1);
    } else {
      let leading = xhi !== 0 ? Math.clz32(xhi) : 32 + Math.clz32(xlo);
      const trailing = xlo !== 0 ? ctz32(xlo) : 32 + ctz32(xhi);
      if (leading > 31) leading = 31; // 5 bits for the leading count
      if (s.leading !== 0xff && leading >= s.leading && trailing >= s.trailing) {
        w.write(0b10, 2);
        writeShifted(xhi, xlo, s.trailing, 64 - s.leading - s.trailing);
      } else {
        const sig = 64 - leading - trailing;
        w.write(0b11, 2);
        w.write(leading, 5);
        w.write(sig & 63, 6); // 64 is written as 0
        writeShifted(xhi, xlo, trailing, sig);
        s.leading = leading;
        s.trailing = trailing;
      }
    }
  }
  s.t = t;
  s.vHi = hi;
  s.vLo = lo;
  s.count++;
  s.bits = w.pos;
}

/** Writes n bits of (hi:lo) >> shift. */
function writeShifted(hi: number, lo: number, shift: number, n: number): void {
  if (shift >= 32) {
    lo = hi >>> (shift - 32);
    hi = 0;
  } else if (shift > 0) {
    lo = ((lo >>> shift) | (hi << (32 - shift))) >>> 0;
    hi = hi >>> shift;
  }
  w.write64(hi, lo, n);
}

/**
 * The 32 bits of buf[base...] starting at bit `pos`, most significant first, as a signed int32
 * (the same bits; callers shift with >>> where they need them unsigned). Signed, because an
 * unsigned value above 2^31 is not a small integer: each one crossing a call that V8 did not
 * inline was boxed as a heap number, ~24 bytes of garbage per decoded sample.
 * Bytes past the end of `buf` read as zero (a chunk's last sample may end in its final byte).
 */
function peek32(buf: Uint8Array, base: number, pos: number): number {
  const i = base + (pos >>> 3);
  const s = pos & 7;
  if (i + 4 < buf.length) {
    const w = (buf[i] << 24) | (buf[i + 1] << 16) | (buf[i + 2] << 8) | buf[i + 3];
    return s === 0 ? w : (w << s) | (buf[i + 4] >>> (8 - s));
  }
  let w = 0;
  for (let k = 0; k < 5; k++) w = w * 256 + (i + k < buf.length ? buf[i + k] : 0);
  // w holds 40 bits; drop the `s` leading ones already consumed and the 8 - s trailing extra.
  return (Math.floor(w / 2 ** (8 - s)) % 4294967296) | 0;
}

/**
 * Decodes `count` samples of the chunk in buf[base...] and appends those with
 * mint ≤ t ≤ maxt (inclusive) to the output arrays at index `at`; returns the new index.
 * Values are written as raw bits through a Uint32Array view, so NaN payloads survive; a caller
 * that decodes into the same arrays again and again passes that view (`outBits`, over outV's
 * memory) instead of having one made per call.
 * The output arrays must have room.
 *
 * Hot path of every select: bits are read through 32-bit windows (peek32) with the state in locals
 * rather than through a reader object, and the delta-of-delta buckets are sign-extended with shifts.
 */
export function xorDecodeInto(
  buf: Uint8Array,
  base: number,
  count: number,
  mint: number,
  maxt: number,
  outT: Float64Array,
  outV: Float64Array,
  at: number,
  outBits?: Uint32Array,
): number {
  if (count === 0) return at;
  const ov = outBits ?? new Uint32Array(outV.buffer, outV.byteOffset, outV.length * 2);
  const t = peek32(buf, base, 0) * TWO32 + (peek32(buf, base, 32) >>> 0);
  return decodeFrom(
    buf,
    base,
    count,
    0,
    128,
    t,
    0,
    peek32(buf, base, 64),
    peek32(buf, base, 96),
    0,
    0,
    mint,
    maxt,
    outT,
    ov,
    at,
  );
}

/**
 * A chunk's decoder state right after one of its samples (number `index`, 0-based): enough to decode
 * the samples after it without decoding those before (a head chunk keeps one, so a read of its last
 * minutes decodes only those: head.ts). `bits` is the bit position after the sample; `leading` and
 * `trailing` the XOR window then in force (0 before any was written).
 */
export interface XorCheckpoint {
  index: number;
  bits: number;
  t: number;
  tDelta: number;
  hi: number;
  lo: number;
  leading: number;
  trailing: number;
}

/**
 * As xorDecodeInto, starting at a checkpoint of the same chunk (taken by the encoder after sample
 * `ck.index`) instead of its first sample: the samples up to ck.index must all be below mint but
 * the checkpoint's own, which is emitted when in range. Same samples, same bits as decoding it whole.
 */
export function xorDecodeFromInto(
  buf: Uint8Array,
  base: number,
  count: number,
  ck: XorCheckpoint,
  mint: number,
  maxt: number,
  outT: Float64Array,
  outV: Float64Array,
  at: number,
  outBits?: Uint32Array,
): number {
  if (count === 0) return at;
  const ov = outBits ?? new Uint32Array(outV.buffer, outV.byteOffset, outV.length * 2);
  const { index, bits, t, tDelta, hi, lo, leading, trailing } = ck;
  return decodeFrom(
    buf,
    base,
    count,
    index,
    bits,
    t,
    tDelta,
    hi | 0,
    lo | 0,
    leading,
    trailing,
    mint,
    maxt,
    outT,
    ov,
    at,
  );
}

/** The decoding loop from sample i0 (state after it given), writing samples in [mint, maxt]. */
function decodeFrom(
  buf: Uint8Array,
  base: number,
  count: number,
  i0: number,
  pos: number,
  t: number,
  tDelta: number,
  hi: number,
  lo: number,
  leading: number,
  trailing: number,
  mint: number,
  maxt: number,
  outT: Float64Array,
  ov: Uint32Array,
  at: number,
): number {
  for (let i = i0; ; ) {
    if (t > maxt) break;
    if (t >= mint) {
      outT[at] = t;
      ov[at * 2] = lo;
      ov[at * 2 + 1] = hi;
      at++;
    }
    if (++i >= count) break;
    // Delta of delta: `0` | `10`+14 | `110`+17 | `1110`+20 | `1111`+64 bits, two's complement.
    const w = peek32(buf, base, pos);
    let dod: number;
    let used: number;
    if ((w & 0x80000000) === 0) {
      dod = 0;
      used = 1;
    } else if ((w & 0x40000000) === 0) {
      dod = (w << 2) >> 18;
      used = 16;
    } else if ((w & 0x20000000) === 0) {
      dod = (w << 3) >> 15;
      used = 20;
    } else if ((w & 0x10000000) === 0) {
      dod = (w << 4) >> 12;
      used = 24;
    } else {
      dod = peek32(buf, base, pos + 4) * TWO32 + (peek32(buf, base, pos + 36) >>> 0);
      used = 68;
    }
    pos += used;
    tDelta += dod;
    t += tDelta;
    // The value header (at most 15 bits) is usually still in the bits of w the timestamp left over.
    const x = used <= 16 ? w << used : peek32(buf, base, pos);
    if ((x & 0x80000000) === 0) {
      pos += 1; // same value
      continue;
    }
    if ((x & 0x40000000) !== 0) {
      leading = (x >>> 25) & 31;
      let sig = (x >>> 19) & 63;
      if (sig === 0) sig = 64;
      trailing = 64 - leading - sig;
      pos += 13;
    } else pos += 2;
    const n = 64 - leading - trailing;
    let xhi = 0;
    let xlo: number;
    if (n > 32) {
      xhi = (peek32(buf, base, pos) >>> (64 - n)) | 0;
      xlo = peek32(buf, base, pos + n - 32);
    } else xlo = (peek32(buf, base, pos) >>> (32 - n)) | 0;
    pos += n;
    // shift (xhi:xlo) left by trailing
    if (trailing >= 32) {
      xhi = xlo << (trailing - 32);
      xlo = 0;
    } else if (trailing > 0) {
      xhi = (xhi << trailing) | (xlo >>> (32 - trailing));
      xlo = xlo << trailing;
    }
    hi ^= xhi;
    lo ^= xlo;
  }
  return at;
}

/** Bytes needed to hold `bits` bits. */
export function bitsToBytes(bits: number): number {
  return (bits + 7) >>> 3;
}

/**
 * Encodes whole sample arrays into standalone chunks of at most `maxSamples` samples (used when
 * writing blocks from merged data). Returns the chunks; each owns its bytes.
 */
export function encodeChunks(
  ts: Float64Array,
  vs: Float64Array,
  n: number,
  maxSamples: number,
): { bytes: Uint8Array; count: number; minT: number; maxT: number }[] {
  const out: { bytes: Uint8Array; count: number; minT: number; maxT: number }[] = [];
  const vv = new Uint32Array(vs.buffer, vs.byteOffset, vs.length * 2);
  let i = 0;
  while (i < n) {
    const take = Math.min(maxSamples, n - i);
    const buf = new Uint8Array(bitsToBytes(FIRST_SAMPLE_BITS + take * MAX_SAMPLE_BITS));
    const s = emptyXorState();
    for (let k = 0; k < take; k++) xorAppendBits(buf, 0, s, ts[i + k], vv[(i + k) * 2 + 1], vv[(i + k) * 2]);
    out.push({ bytes: buf.slice(0, bitsToBytes(s.bits)), count: take, minT: ts[i], maxT: ts[i + take - 1] });
    i += take;
  }
  return out;
}
