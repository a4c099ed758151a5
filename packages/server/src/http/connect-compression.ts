/**
 * The codings of Connect's routes: svc's compression (compression.ts) with connect-node's
 * decompression (its size limit and errors). Apart from compression.ts because connect-node loads
 * Connect and protobuf, which a start does not (docs/performance.md, "Start-up"): this module loads
 * with the RPC routes, at the first call.
 */
import type { Compression } from "@connectrpc/connect/protocol";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import { brotliCompressor, gzipCompressor } from "./compression.ts";

export const gzipFast: Compression = { ...gzipCompressor, decompress: compressionGzip.decompress };

export const brotliFast: Compression = { ...brotliCompressor, decompress: compressionBrotli.decompress };

/** What the Connect routes accept and answer with (requests of any level decompress). */
export const connectCompressions: Compression[] = [gzipFast, brotliFast];
