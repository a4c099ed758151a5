/**
 * Snappy block format (not the framed/stream format), as remote write uses it. Compression and
 * decompression are native (the `snappy` package, napi-rs, prebuilt per platform) when its binary
 * loads, and JavaScript otherwise (snappyjs to compress, our own decompressor): native cost 4–7x less
 * CPU per byte on remote-write bodies (docs/performance.md "Remote backend"). Either way this module
 * adds what an untrusted receiver needs first: the length preamble is read and checked against the
 * limit and against what the input could possibly produce before any output is allocated.
 */
import { createRequire } from "node:module";
import snappyjs from "snappyjs";
import { RemoteWriteDecodeError } from "./errors.ts";

/** The slice of the `snappy` package used here. */
interface NativeSnappy {
  compressSync(input: Uint8Array, options: { copyOutputData: boolean }): Buffer;
  uncompressSync(input: Uint8Array, options: { asBuffer: true; copyOutputData: boolean }): Buffer;
}

// copyOutputData: an external buffer (the default) made compressSync ~8x and uncompressSync ~5x slower
// on 100 KB bodies (Node 20), slower than the JavaScript; a copy into a V8 buffer costs little.
const COPY = { copyOutputData: true } as const;
const COPY_BUFFER = { asBuffer: true, copyOutputData: true } as const;

function loadNative(): NativeSnappy | undefined {
  try {
    // Through require, so the server bundle leaves the addon in node_modules (scripts/build-server.mjs).
    return createRequire(import.meta.url)("snappy") as NativeSnappy;
  } catch {
    return undefined; // no prebuilt binary for this platform, or it does not load: JavaScript
  }
}

// Loaded on first use, not at import: dlopen of the addon cost ~10 ms of a server's start-up, before its first
// remote-write body (docs/performance.md "Start-up").
let loaded: NativeSnappy | null | undefined;
function nativeSnappy(): NativeSnappy | undefined {
  if (loaded === undefined) loaded = loadNative() ?? null;
  return loaded ?? undefined;
}

/** Which snappy this process uses ("javascript" when the native binary did not load). Loads it if not yet. */
export function snappyImplementation(): "native" | "javascript" {
  return nativeSnappy() ? "native" : "javascript";
}

/** Snappy-compresses `data` (block format). Returns a new array owned by the caller. */
export function snappyCompress(data: Uint8Array): Uint8Array {
  const native = nativeSnappy();
  return native ? native.compressSync(data, COPY) : snappyjs.compress(data);
}

/** snappyCompress in JavaScript whatever loaded (tests compare the two). */
export function snappyCompressJs(data: Uint8Array): Uint8Array {
  return snappyjs.compress(data);
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
 * above `maxDecompressedBytes` (inclusive bound) and a declared length the input could not possibly
 * produce; then any stream whose elements are out of bounds or do not produce exactly that length
 * (natively while writing into an output of that length, in JavaScript before allocating it).
 * Throws RemoteWriteDecodeError. Returns a new array owned by the caller.
 */
export function snappyDecompress(body: Uint8Array, maxDecompressedBytes: number): Uint8Array {
  const [declared, start] = checkDeclared(body, maxDecompressedBytes);
  const native = nativeSnappy();
  if (native) {
    let out: Buffer | undefined;
    try {
      out = native.uncompressSync(body, COPY_BUFFER);
    } catch {
      // refused below, with the JavaScript walk's reason
    }
    if (out !== undefined && out.length === declared) return out;
    validateElements(body, start, declared);
    throw new RemoteWriteDecodeError("snappy: invalid block");
  }
  validateElements(body, start, declared);
  return expandElements(body, start, declared);
}

/**
 * snappyDecompress in JavaScript whatever loaded: the whole stream is validated before the output is
 * allocated (the native decoder allocates the declared length, bounded as above, then validates).
 */
export function snappyDecompressJs(body: Uint8Array, maxDecompressedBytes: number): Uint8Array {
  const [declared, start] = checkDeclared(body, maxDecompressedBytes);
  validateElements(body, start, declared);
  return expandElements(body, start, declared);
}

/** The declared length and preamble size, refused when above the limit or beyond what `body` can produce. */
function checkDeclared(body: Uint8Array, maxDecompressedBytes: number): [number, number] {
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
  return [declared, start];
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
