import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isStaleMarker, staleNaN, writeStaleMarker } from "../storage/interface.ts";
import {
  bitsToBytes,
  emptyXorState,
  encodeChunks,
  FIRST_SAMPLE_BITS,
  MAX_SAMPLE_BITS,
  xorAppend,
  xorDecodeInto,
} from "./chunk.ts";

function bitsOf(v: Float64Array, i: number): string {
  const u = new Uint32Array(v.buffer, v.byteOffset + i * 8, 2);
  return `${u[1].toString(16)}:${u[0].toString(16)}`;
}

function roundTrip(ts: number[], vs: Float64Array): { t: Float64Array; v: Float64Array; bytes: number } {
  const buf = new Uint8Array(bitsToBytes(FIRST_SAMPLE_BITS + ts.length * MAX_SAMPLE_BITS));
  const s = emptyXorState();
  for (let i = 0; i < ts.length; i++) xorAppend(buf, 0, s, ts[i], vs[i]);
  assert.ok(s.bits <= FIRST_SAMPLE_BITS + (ts.length - 1) * MAX_SAMPLE_BITS);
  const t = new Float64Array(ts.length);
  const v = new Float64Array(ts.length);
  const n = xorDecodeInto(buf, 0, s.count, -Infinity, Infinity, t, v, 0);
  assert.equal(n, ts.length);
  return { t, v, bytes: bitsToBytes(s.bits) };
}

describe("xor chunk", () => {
  it("round-trips edge values bit-exactly, including the staleness marker", () => {
    const raw = [
      0,
      -0,
      1,
      -1,
      Number.NaN,
      Infinity,
      -Infinity,
      Number.MAX_VALUE,
      Number.MIN_VALUE,
      1e-300,
      42.5,
    ];
    const vs = new Float64Array(raw.length + 2);
    vs.set(raw);
    writeStaleMarker(vs, raw.length);
    vs[raw.length + 1] = 3;
    const ts = Array.from({ length: vs.length }, (_, i) => 1_700_000_000_000 + i * 15_000);
    const { t, v } = roundTrip(ts, vs);
    assert.deepEqual(Array.from(t), ts);
    for (let i = 0; i < vs.length; i++) assert.equal(bitsOf(v, i), bitsOf(vs, i), `value ${i}`);
    assert.ok(isStaleMarker(v, raw.length));
    assert.ok(!isStaleMarker(v, 4), "plain NaN is not the staleness marker");
  });

  it("round-trips a staleness marker passed as a number", () => {
    const vs = new Float64Array(3);
    vs[0] = 1;
    vs[1] = staleNaN();
    vs[2] = 2;
    const { v } = roundTrip([1, 2, 3], vs);
    assert.ok(isStaleMarker(v, 1));
  });

  it("round-trips irregular timestamps and huge deltas in every bucket", () => {
    const deltas = [1, 1, 2, 8191, -1, 8192, 65535, 65536, 524287, 524288, 86_400_000 * 365, 3, 1, 2 ** 40];
    const ts: number[] = [-5_000];
    let d = 0;
    for (const dd of deltas) {
      d = Math.max(1, d + dd);
      ts.push(ts[ts.length - 1] + d);
    }
    const vs = Float64Array.from(ts, (_, i) => (i % 3 === 0 ? Math.random() * 1e6 : i));
    const { t, v } = roundTrip(ts, vs);
    assert.deepEqual(Array.from(t), ts);
    assert.deepEqual(Array.from(v), Array.from(vs));
  });

  it("compresses regular gauge data to about 1–2 bytes per sample", () => {
    const n = 120;
    const ts = Array.from({ length: n }, (_, i) => 1_700_000_000_000 + i * 30_000);
    const vs = Float64Array.from(ts, (_, i) => 1000 + (i % 7));
    const { bytes } = roundTrip(ts, vs);
    assert.ok(bytes / n < 2.5, `bytes/sample ${bytes / n}`);
  });

  it("decodes only samples within [mint, maxt] inclusive", () => {
    const ts = [10, 20, 30, 40, 50];
    const buf = new Uint8Array(200);
    const s = emptyXorState();
    for (const t of ts) xorAppend(buf, 0, s, t, t / 10);
    const t = new Float64Array(5);
    const v = new Float64Array(5);
    const n = xorDecodeInto(buf, 0, s.count, 20, 40, t, v, 0);
    assert.deepEqual(Array.from(t.subarray(0, n)), [20, 30, 40]);
    assert.deepEqual(Array.from(v.subarray(0, n)), [2, 3, 4]);
  });

  it("round-trips random data bit-exactly from a buffer cut to the chunk's own length", () => {
    // Seeded, so a failure reproduces; a tight buffer makes the decoder read up to the last byte.
    let seed = 7;
    const rnd = () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed / 4294967296;
    };
    for (let round = 0; round < 50; round++) {
      const n = 1 + Math.floor(rnd() * 200);
      const ts: number[] = [Math.floor(rnd() * 2e12) - 1e12];
      for (let i = 1; i < n; i++) {
        const jump = [1, 15_000, 30_000 + Math.floor(rnd() * 40) - 20, Math.floor(rnd() * 1e9)][
          Math.floor(rnd() * 4)
        ];
        ts.push(ts[i - 1] + jump);
      }
      const vs = new Float64Array(n);
      for (let i = 0; i < n; i++) {
        const k = rnd();
        vs[i] =
          k < 0.2 && i > 0 ? vs[i - 1] : k < 0.5 ? Math.floor(rnd() * 1e6) : k < 0.6 ? -rnd() * 1e300 : rnd();
      }
      if (n > 3) writeStaleMarker(vs, 2);
      const buf = new Uint8Array(bitsToBytes(FIRST_SAMPLE_BITS + n * MAX_SAMPLE_BITS));
      const s = emptyXorState();
      for (let i = 0; i < n; i++) xorAppend(buf, 0, s, ts[i], vs[i]);
      const tight = new Uint8Array(4 + bitsToBytes(s.bits));
      tight.set(buf.subarray(0, bitsToBytes(s.bits)), 4);
      const t = new Float64Array(n);
      const v = new Float64Array(n);
      assert.equal(xorDecodeInto(tight, 4, n, -Infinity, Infinity, t, v, 0), n);
      assert.deepEqual(Array.from(t), ts, `round ${round}`);
      for (let i = 0; i < n; i++) assert.equal(bitsOf(v, i), bitsOf(vs, i), `round ${round} value ${i}`);
    }
  });

  it("encodeChunks splits at the sample limit", () => {
    const ts = Float64Array.from({ length: 250 }, (_, i) => i * 1000);
    const vs = Float64Array.from({ length: 250 }, (_, i) => i);
    const chunks = encodeChunks(ts, vs, 250, 120);
    assert.deepEqual(
      chunks.map((c) => [c.count, c.minT, c.maxT]),
      [
        [120, 0, 119_000],
        [120, 120_000, 239_000],
        [10, 240_000, 249_000],
      ],
    );
    const t = new Float64Array(10);
    const v = new Float64Array(10);
    xorDecodeInto(chunks[2].bytes, 0, 10, -Infinity, Infinity, t, v, 0);
    assert.equal(v[9], 249);
  });
});
