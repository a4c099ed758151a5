import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, it } from "node:test";
import * as zlib from "node:zlib";
import { crc32 } from "./crc32.ts";

describe("crc32()", () => {
  it("gives the standard check value and zlib's sums (where zlib has crc32)", () => {
    assert.equal(crc32(new TextEncoder().encode("123456789")), 0xcbf43926);
    assert.equal(crc32(new Uint8Array(0)), 0);
    // Node 18 (the guests' Node.js, where these tests also run) has no zlib.crc32.
    const native = (zlib as { crc32?: (d: Uint8Array) => number }).crc32;
    if (!native) return;
    for (const n of [1, 7, 100, 4096, 65_537]) {
      const data = randomBytes(n);
      assert.equal(crc32(data), native(data), `${n} bytes`);
    }
  });
});
