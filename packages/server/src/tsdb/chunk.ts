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

  /** Writes the low n (≤ 32) bits of v, most significant first. */
  write(v: number, n: number): void {
    const buf = this.buf;
    let pos = this.pos;
    while (n > 0) {
      const idx = this.base + (pos >>> 3);
      const free = 8 - (pos & 7);
      const take = Math.min(n, free);
      const bits = (v >>> (n - take)) & ((1 << take) - 1);
      buf[idx] |= bits << (free - take);
      pos += take;
      n -= take;
    }
    this.pos = pos;
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

export class BitReader {
  buf: Uint8Array = new Uint8Array(0);
  base = 0;
  pos = 0;

  reset(buf: Uint8Array, base: number): void {
    this.buf = buf;
    this.base = base;
    this.pos = 0;
  }

  /** Reads n (≤ 32) bits as an unsigned number. */
  read(n: number): number {
    const buf = this.buf;
    let pos = this.pos;
    let out = 0;
    while (n > 0) {
      const byte = buf[this.base + (pos >>> 3)];
      const avail = 8 - (pos & 7);
      const take = Math.min(n, avail);
      const bits = (byte >>> (avail - take)) & ((1 << take) - 1);
      out = out * (1 << take) + bits;
      pos += take;
      n -= take;
    }
    this.pos = pos;
    return out;
  }

  readBit(): number {
    const pos = this.pos++;
    return (this.buf[this.base + (pos >>> 3)] >>> (7 - (pos & 7))) & 1;
  }

  readInt64(): number {
    const hi = this.read(32) | 0;
    return hi * TWO32 + this.read(32);
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

const r = new BitReader();
const DOD_BITS = [0, 14, 17, 20];

/**
 * Decodes `count` samples of the chunk in buf[base...] and appends those with
 * mint ≤ t ≤ maxt (inclusive) to the output arrays at index `at`; returns the new index.
 * Values are written as raw bits through a Uint32Array view, so NaN payloads survive.
 * The output arrays must have room.
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
): number {
  if (count === 0) return at;
  const ov = new Uint32Array(outV.buffer, outV.byteOffset, outV.length * 2);
  r.reset(buf, base);
  let t = r.readInt64();
  let hi = r.read(32);
  let lo = r.read(32);
  let tDelta = 0;
  let leading = 0;
  let trailing = 0;
  for (let i = 0; ; ) {
    if (t > maxt) break;
    if (t >= mint) {
      outT[at] = t;
      ov[at * 2] = lo;
      ov[at * 2 + 1] = hi;
      at++;
    }
    if (++i >= count) break;
    // The dod bucket is the number of leading 1 bits (0..4) of its prefix.
    let ones = 0;
    while (ones < 4 && r.readBit() === 1) ones++;
    const dod = ones === 4 ? r.readInt64() : ones === 0 ? 0 : signed(r.read(DOD_BITS[ones]), DOD_BITS[ones]);
    tDelta += dod;
    t += tDelta;
    if (r.readBit() === 1) {
      if (r.readBit() === 1) {
        leading = r.read(5);
        let sig = r.read(6);
        if (sig === 0) sig = 64;
        trailing = 64 - leading - sig;
      }
      const n = 64 - leading - trailing;
      let xhi = 0;
      let xlo: number;
      if (n > 32) {
        xhi = r.read(n - 32);
        xlo = r.read(32);
      } else xlo = r.read(n);
      // shift (xhi:xlo) left by trailing
      if (trailing >= 32) {
        xhi = (xlo << (trailing - 32)) >>> 0;
        xlo = 0;
      } else if (trailing > 0) {
        xhi = ((xhi << trailing) | (xlo >>> (32 - trailing))) >>> 0;
        xlo = (xlo << trailing) >>> 0;
      }
      hi = (hi ^ xhi) >>> 0;
      lo = (lo ^ xlo) >>> 0;
    }
  }
  return at;
}

function signed(v: number, n: number): number {
  return v >= 2 ** (n - 1) ? v - 2 ** n : v;
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
