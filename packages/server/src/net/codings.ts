/**
 * svc's response codings as plain zlib calls: the levels chosen in compression.ts (gzip level 2,
 * brotli quality 1), for code that compresses outside Connect and the event loop (a query worker
 * encoding a Prometheus-API answer). No Connect import, so a worker does not load it.
 */
import { type BrotliOptions, brotliCompressSync, constants, gzipSync, type ZlibOptions } from "node:zlib";

export type Coding = "gzip" | "br";

/** Texts shorter than this are sent as they are: compressing them saves less than it costs. */
export const MIN_COMPRESS_BYTES = 1024;

export const gzipOptions = (): ZlibOptions => ({ level: 2 });

export const brotliOptions = (bytes: Uint8Array): BrotliOptions => ({
  params: {
    [constants.BROTLI_PARAM_QUALITY]: 1,
    [constants.BROTLI_PARAM_SIZE_HINT]: bytes.byteLength,
  },
});

/** `bytes` compressed with `coding`, on the calling thread. */
export function compressSync(bytes: Uint8Array, coding: Coding): Buffer {
  return coding === "gzip" ? gzipSync(bytes, gzipOptions()) : brotliCompressSync(bytes, brotliOptions(bytes));
}
