/**
 * Response compression for Connect: which codings svc offers, at which levels, and which one it
 * picks when a client accepts several.
 *
 * Levels are chosen by measurement on a 7-day QueryVMMonitoring answer (6 series × 336 points):
 *   JSON, 100 KiB:  gzip-1 748 µs → 22.8 KiB, gzip-2 476 µs → 22.4 KiB, gzip-6 946 µs → 20.6 KiB,
 *                   brotli-1 208 µs → 18.1 KiB, brotli-11 (connect-node's default) tens of ms
 *   binary, 34 KiB: gzip-1 195 µs → 15.8 KiB, gzip-2 154 µs → 16.0 KiB, brotli-1 269 µs → 17.3 KiB
 * (zlib's level 1 uses a shorter match search than level 2 and loses on this repetitive text).
 * The compression runs on the same cores as the queries, so cheap matters more than the last bytes.
 *
 * Answers up to SYNC_MAX_BYTES are compressed on the event loop (≤ ~0.5 ms at these levels): handing
 * them to libuv's thread pool and back cost more than the work itself on a 2-core machine (7-day
 * answer, bench/vm-query, two interleaved pairs: p50 5.29 / 4.00 ms vs 5.45 / 4.41, p99 12.1 / 10.3 vs
 * 14.3 / 11.2). Larger answers go to the thread pool so that no request holds the loop for long.
 */
import { promisify } from "node:util";
import {
  type BrotliOptions,
  brotliCompress,
  brotliCompressSync,
  gzip,
  gzipSync,
  type ZlibOptions,
} from "node:zlib";
import { brotliOptions, type Coding, gzipOptions, MIN_COMPRESS_BYTES } from "../net/codings.ts";

const gzipAsync = promisify(gzip);
const brotliAsync = promisify(brotliCompress);

const SYNC_MAX_BYTES = 128 * 1024;

const asBytes = (b: Buffer) => new Uint8Array(b.buffer as ArrayBuffer, b.byteOffset, b.byteLength);

/** One coding's compression (Connect's codings add their decompression: connect-compression.ts). */
export interface Compressor {
  readonly name: "gzip" | "br";
  compress(bytes: Uint8Array): Promise<Uint8Array<ArrayBuffer>>;
}

/** One coding: compressed on the event loop up to SYNC_MAX_BYTES, in the thread pool above. */
function sizedCompression<O>(
  name: Compressor["name"],
  options: (bytes: Uint8Array) => O,
  sync: (bytes: Uint8Array, o: O) => Buffer,
  async: (bytes: Uint8Array, o: O) => Promise<Buffer>,
): Compressor {
  return {
    name,
    compress: async (bytes) =>
      asBytes(
        bytes.byteLength <= SYNC_MAX_BYTES ? sync(bytes, options(bytes)) : await async(bytes, options(bytes)),
      ),
  };
}

export const gzipCompressor = sizedCompression<ZlibOptions>("gzip", gzipOptions, gzipSync, gzipAsync);

export const brotliCompressor = sizedCompression<BrotliOptions>(
  "br",
  brotliOptions,
  brotliCompressSync,
  brotliAsync,
);

/** The codings svc answers with, best first for neither format. */
export const compressors: readonly Compressor[] = [gzipCompressor, brotliCompressor];

/**
 * Rewrites an `Accept-Encoding` header (RFC 9110 §12.5.3) into the plain list Connect understands,
 * best first. Connect takes the first name it knows in the client's own order and does not parse
 * weights, so `gzip;q=1.0` matched nothing and browsers' `gzip, deflate, br` always got gzip. Here
 * weights decide, `q=0` refuses a coding, `*` stands for the codings not named, and among equally
 * weighted codings svc's preference for the answer's format decides: br for JSON (cheapest and
 * smallest), gzip for binary protobuf. Returns `identity` when nothing svc offers is acceptable.
 */
export function negotiateAcceptEncoding(header: string, binary: boolean): string {
  // A client sends the same header on every request (a dashboard's six at once, twice each: the
  // worker's encoding and the answer's): its answer is remembered, ~5 µs a request of parsing.
  const key = binary ? `b${header}` : `j${header}`;
  const known = negotiated.get(key);
  if (known !== undefined) return known;
  const answer = negotiate(header, binary);
  // Bounded: headers are the clients', so an odd one at a time cannot grow it.
  if (negotiated.size >= 256) negotiated.clear();
  negotiated.set(key, answer);
  return answer;
}

const negotiated = new Map<string, string>();

function negotiate(header: string, binary: boolean): string {
  const preference = binary ? ["gzip", "br"] : ["br", "gzip"];
  const weights = new Map<string, number>();
  let wildcard: number | undefined;
  for (const part of header.split(",")) {
    const [rawName, ...params] = part.split(";");
    const name = rawName.trim().toLowerCase();
    if (name === "") continue;
    let q = 1;
    for (const p of params) {
      const m = /^\s*q\s*=\s*([01](?:\.\d{0,3})?)\s*$/i.exec(p);
      if (m) q = Number(m[1]);
    }
    if (name === "*") wildcard = q;
    else weights.set(name, Math.max(q, weights.get(name) ?? 0));
  }
  const offered = preference
    .map((name, rank) => ({ name, rank, q: weights.get(name) ?? wildcard ?? 0 }))
    .filter((c) => c.q > 0)
    .sort((a, b) => b.q - a.q || a.rank - b.rank);
  return offered.length > 0 ? offered.map((c) => c.name).join(", ") : "identity";
}

/** The coding svc answers with for an `Accept-Encoding` (negotiateAcceptEncoding's first), if any. */
export function preferredCoding(acceptEncoding: string, binary: boolean): Coding | undefined {
  const best = negotiateAcceptEncoding(acceptEncoding, binary).split(", ")[0];
  return best === "gzip" || best === "br" ? best : undefined;
}

/**
 * A text answer of the HTTP surfaces (export shards, the Prometheus API) as the client accepts it:
 * compressed with the best coding it accepts when the text is worth it (≥ 1 KiB), plain otherwise.
 * `binary` picks the preference among equally weighted codings (negotiateAcceptEncoding): gzip for
 * the exposition format, which every scraper decodes; br for JSON. Large texts compress in the
 * thread pool, small ones on the event loop (sizedCompression).
 */
export async function encodeText(
  text: string,
  acceptEncoding: string,
  binary: boolean,
): Promise<{ body: string | Buffer; encoding?: string }> {
  const coding = preferredCoding(acceptEncoding, binary);
  const compression = compressors.find((c) => c.name === coding);
  if (!compression || text.length < MIN_COMPRESS_BYTES) return { body: text };
  const z = await compression.compress(Buffer.from(text));
  return { body: Buffer.from(z.buffer, z.byteOffset, z.byteLength), encoding: compression.name };
}
