import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { negotiateAcceptEncoding } from "./compression.ts";
import { brotliFast, gzipFast } from "./connect-compression.ts";

describe("negotiateAcceptEncoding()", () => {
  it("answers a browser's JSON request with br and its binary requests with gzip", () => {
    assert.equal(negotiateAcceptEncoding("gzip, deflate, br, zstd", false), "br, gzip");
    assert.equal(negotiateAcceptEncoding("gzip, deflate, br, zstd", true), "gzip, br");
  });

  it("lets the client's weights decide before svc's preference", () => {
    assert.equal(negotiateAcceptEncoding("gzip;q=1.0, br;q=0.5", false), "gzip, br");
    assert.equal(negotiateAcceptEncoding("gzip;q=0.5, br;q=0.8", true), "br, gzip");
    assert.equal(negotiateAcceptEncoding("gzip;q=1.0, identity; q=0.5", false), "gzip");
  });

  it("never picks a refused coding, and says identity when nothing fits", () => {
    assert.equal(negotiateAcceptEncoding("br;q=0, gzip", false), "gzip");
    assert.equal(negotiateAcceptEncoding("deflate", false), "identity");
    assert.equal(negotiateAcceptEncoding("identity", false), "identity");
    assert.equal(negotiateAcceptEncoding("*;q=0", false), "identity");
    assert.equal(negotiateAcceptEncoding("", false), "identity");
  });

  it("reads * as every coding not named, and names case-insensitively", () => {
    assert.equal(negotiateAcceptEncoding("*", false), "br, gzip");
    assert.equal(negotiateAcceptEncoding("br;q=0, *", false), "gzip");
    assert.equal(negotiateAcceptEncoding("GZIP ; Q=0.9", false), "gzip");
  });
});

describe("response codings", () => {
  it("round-trip through the standard decoders", async () => {
    const body = new TextEncoder().encode(
      JSON.stringify({ points: Array.from({ length: 500 }, (_, i) => i) }),
    );
    const gz = await gzipFast.compress(body);
    const br = await brotliFast.compress(body);
    assert.ok(gz.byteLength < body.byteLength / 2 && br.byteLength < body.byteLength / 2);
    assert.deepEqual(new Uint8Array(gunzipSync(gz)), body);
    assert.deepEqual(new Uint8Array(brotliDecompressSync(br)), body);
    assert.deepEqual(new Uint8Array(await brotliFast.decompress(br, 1 << 20)), body);
  });

  it("round-trip above the size compressed on the event loop (thread pool path)", async () => {
    const body = new TextEncoder().encode(JSON.stringify(Array.from({ length: 60_000 }, (_, i) => i * 1.5)));
    assert.ok(body.byteLength > 128 * 1024);
    assert.deepEqual(new Uint8Array(gunzipSync(await gzipFast.compress(body))), body);
    assert.deepEqual(new Uint8Array(brotliDecompressSync(await brotliFast.compress(body))), body);
  });
});
