/**
 * Snappy block format (not the framed/stream format), as remote write uses it. Compression is
 * snappyjs; this module adds what an untrusted receiver needs first: the length
 * preamble is read and checked against the limit, and the whole element stream is validated
 * (bounds, copy offsets, exact output length) before the output buffer is allocated and written
 * (decompression is our own: with the stream validated it needs no checks of its own).
 */
import snappy from "snappyjs";
import { RemoteWriteDecodeError } from "./errors.ts";

/** Snappy-compresses `data` (block format). Returns a new array owned by the caller. */
export function snappyCompress(data: Uint8Array): Uint8Array {
  return snappy.compress(data);
}

/**
 * Reads the uncompressed-length preamble (a uint32 varint).
 * Returns `[length, preambleBytes]`; throws RemoteWriteDecodeError when it is missing or invalid.
 */
export function readSnappyLength(body: Uint8Array): [number, number] {
  let result = 0;
  for (let i = 0; i < 5; i++) {
    if (i >= body.length) throw new RemoteWriteDecodeError("snappy: truncated length preamble");
    const b = body[i];
    if (i === 4 && b > 0x0f) throw new RemoteWriteDecodeError("snappy: length preamble overflows uint32");
    result += (b & 0x7f) * 2 ** (7 * i);
    if ((b & 0x80) === 0) return [result, i + 1];
  }
  throw new RemoteWriteDecodeError("snappy: length preamble overflows uint32");
}

// The best a snappy element can do is a 3-byte copy emitting 64 bytes.
const MAX_EXPANSION_NUM = 64;
const MAX_EXPANSION_DEN = 3;

/**
 * Decompresses an untrusted snappy block. Refuses, before allocating the output, a declared length
 * above `maxDecompressedBytes` (inclusive bound), a declared length the input could not possibly
 * produce, and any stream whose elements are out of bounds or do not produce exactly that length.
 */
export function snappyDecompress(body: Uint8Array, maxDecompressedBytes: number): Uint8Array {
  const [declared, start] = readSnappyLength(body);
  if (declared > maxDecompressedBytes) {
    throw new RemoteWriteDecodeError("snappy: declared uncompressed size refused", {
      limit: "maxDecompressedBytes",
      actual: declared,
      allowed: maxDecompressedBytes,
    });
  }
  const maxPossible = Math.ceil(((body.length - start) * MAX_EXPANSION_NUM) / MAX_EXPANSION_DEN);
  if (declared > maxPossible) {
    throw new RemoteWriteDecodeError(
      `snappy: preamble declares ${declared} bytes but ${body.length} input bytes can produce at most ${maxPossible}`,
    );
  }
  validateElements(body, start, declared);
  return expandElements(body, start, declared);
}

/**
 * Writes out a stream validateElements accepted (so every element is in bounds and the output is
 * exactly `declared` bytes, each written once). Long copies go through native copies: remote-write
 * bodies are mostly back-references to repeated label strings.
 */
function expandElements(a: Uint8Array, pos: number, declared: number): Uint8Array {
  const out = Buffer.allocUnsafe(declared);
  const n = a.length;
  let op = 0;
  while (pos < n) {
    const c = a[pos++];
    const kind = c & 3;
    let len: number;
    if (kind === 0) {
      len = (c >>> 2) + 1;
      if (len > 60) {
        const extra = len - 60;
        len = 0;
        for (let i = 0; i < extra; i++) len += a[pos + i] * 2 ** (8 * i);
        len += 1;
        pos += extra;
      }
      if (len < 8) for (let i = 0; i < len; i++) out[op + i] = a[pos + i];
      else out.set(a.subarray(pos, pos + len), op);
      pos += len;
      op += len;
      continue;
    }
    let offset: number;
    if (kind === 1) {
      len = ((c >>> 2) & 7) + 4;
      offset = ((c >>> 5) << 8) | a[pos];
      pos += 1;
    } else if (kind === 2) {
      len = (c >>> 2) + 1;
      offset = a[pos] | (a[pos + 1] << 8);
      pos += 2;
    } else {
      len = (c >>> 2) + 1;
      offset = (a[pos] | (a[pos + 1] << 8) | (a[pos + 2] << 16)) + a[pos + 3] * 2 ** 24;
      pos += 4;
    }
    const from = op - offset;
    // An overlapping copy (offset < len) repeats a pattern and must go byte by byte.
    if (offset >= len && len >= 8) out.copyWithin(op, from, from + len);
    else for (let i = 0; i < len; i++) out[op + i] = out[from + i];
    op += len;
  }
  return out;
}

/** Walks the element stream without writing anything; throws unless it yields exactly `declared` bytes. */
function validateElements(a: Uint8Array, pos: number, declared: number): void {
  const n = a.length;
  let out = 0;
  while (pos < n) {
    const c = a[pos++];
    const kind = c & 3;
    let len: number;
    if (kind === 0) {
      len = (c >>> 2) + 1;
      if (len > 60) {
        const extra = len - 60;
        if (pos + extra > n) throw new RemoteWriteDecodeError("snappy: truncated literal length");
        len = 0;
        for (let i = 0; i < extra; i++) len += a[pos + i] * 2 ** (8 * i);
        len += 1;
        pos += extra;
      }
      if (pos + len > n) throw new RemoteWriteDecodeError("snappy: literal runs past end of input");
      pos += len;
    } else {
      let offset: number;
      if (kind === 1) {
        if (pos + 1 > n) throw new RemoteWriteDecodeError("snappy: truncated copy element");
        len = ((c >>> 2) & 7) + 4;
        offset = ((c >>> 5) << 8) | a[pos];
        pos += 1;
      } else if (kind === 2) {
        if (pos + 2 > n) throw new RemoteWriteDecodeError("snappy: truncated copy element");
        len = (c >>> 2) + 1;
        offset = a[pos] | (a[pos + 1] << 8);
        pos += 2;
      } else {
        if (pos + 4 > n) throw new RemoteWriteDecodeError("snappy: truncated copy element");
        len = (c >>> 2) + 1;
        offset = (a[pos] | (a[pos + 1] << 8) | (a[pos + 2] << 16)) + a[pos + 3] * 2 ** 24;
        pos += 4;
      }
      if (offset === 0 || offset > out) throw new RemoteWriteDecodeError("snappy: copy offset out of range");
    }
    out += len;
    if (out > declared) {
      throw new RemoteWriteDecodeError(`snappy: stream produces more than the declared ${declared} bytes`);
    }
  }
  if (out !== declared) {
    throw new RemoteWriteDecodeError(`snappy: stream produces ${out} bytes, preamble declares ${declared}`);
  }
}
