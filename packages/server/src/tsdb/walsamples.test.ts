import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { ByteWriter } from "./block.ts";
import { openTsdb } from "./index.ts";
import { tempDir } from "./testutil.ts";
import {
  encodeSamplesRecord,
  encodeSeriesRecord,
  frameCompactSamples,
  frameRecord,
  frameSeriesRecord,
  REC_SERIES_SNAPPY,
  readRecords,
} from "./wal.ts";

const f = new Float64Array(1);
const u = new Uint32Array(f.buffer);
const bitsOf = (v: number): [number, number] => {
  f[0] = v;
  return [u[1], u[0]];
};

function roundTrip(refs: number[], ts: number[], his: number[], los: number[]) {
  const rec = frameCompactSamples(refs.length, refs, ts, his, los);
  const got: [number, number, number, number][] = [];
  const used = readRecords(rec, { series() {}, sample: (r, t, hi, lo) => got.push([r, t, hi, lo]) });
  assert.equal(used.end, rec.length);
  return { got, bytes: rec.length };
}

describe("compact WAL sample records", () => {
  it("returns every value bit for bit: decimals, integers, -0, NaN payloads, infinities, tiny and huge", () => {
    const values = [
      0,
      -0,
      1,
      -1,
      0.1,
      123.45,
      -98.765,
      1e-7,
      2 ** 51,
      2 ** 51 + 2,
      -(2 ** 53),
      1e300,
      5e-324,
      Number.POSITIVE_INFINITY,
      Number.NEGATIVE_INFINITY,
      Math.PI,
      0.1 + 0.2,
      1234567.891,
      4096 * 987654,
    ];
    const refs: number[] = [];
    const ts: number[] = [];
    const his: number[] = [];
    const los: number[] = [];
    values.forEach((v, i) => {
      const [hi, lo] = bitsOf(v);
      refs.push(i % 3 === 0 ? 4_000_000_000 - i : i * 7);
      ts.push(1_700_000_000_000 + (i % 2 === 0 ? i * 30_011 : -i * 17));
      his.push(hi);
      los.push(lo);
    });
    // Staleness marker (NaN payload 2) and another NaN payload.
    for (const [hi, lo] of [
      [0x7ff00000, 2],
      [0x7ff80000, 0xdeadbeef],
    ]) {
      refs.push(3);
      ts.push(-5);
      his.push(hi);
      los.push(lo);
    }
    const { got } = roundTrip(refs, ts, his, los);
    assert.deepEqual(
      got,
      refs.map((r, i) => [r, ts[i], his[i], los[i]]),
    );
  });

  it("decodes refs, timestamps and values at every varint length and sign (the inline one-byte path and the long one)", () => {
    // A seeded generator: deltas of 0..2^44 either way, so zigzag values cross 2^7, 2^31 and 2^32.
    let seed = 12345;
    const rnd = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    const n = 5000;
    const refs: number[] = [];
    const ts: number[] = [];
    const vals: number[] = [];
    let ref = 0;
    let t = 1_700_000_000_000;
    for (let i = 0; i < n; i++) {
      const scale = 2 ** Math.floor(rnd() * 45);
      ref = Math.max(0, Math.min(2 ** 31, ref + Math.round((rnd() - 0.5) * Math.min(scale, 2 ** 32))));
      t += Math.round((rnd() - 0.5) * scale);
      refs.push(ref);
      ts.push(t);
      const kind = i % 4;
      vals.push(
        kind === 0
          ? Math.round((rnd() - 0.5) * scale)
          : kind === 1
            ? Math.round(rnd() * 1e6) / 1000
            : kind === 2
              ? rnd()
              : -Math.round(rnd() * scale) / 100,
      );
    }
    const { got } = roundTrip(
      refs,
      ts,
      vals.map((v) => bitsOf(v)[0]),
      vals.map((v) => bitsOf(v)[1]),
    );
    assert.equal(got.length, n);
    for (let i = 0; i < n; i++) assert.deepEqual(got[i], [refs[i], ts[i], ...bitsOf(vals[i])], `sample ${i}`);
  });

  it("spends a few bytes on the common sample, not 20", () => {
    const n = 1000;
    const refs = Array.from({ length: n }, (_, i) => 100 + i);
    const ts = Array.from({ length: n }, (_, i) => 1_700_000_000_000 + Math.floor(i / 20) * 1000 + (i % 7));
    const vals = Array.from({ length: n }, (_, i) => (i % 2 === 0 ? 1_000_000 + i * 4000 : 42.17 + i));
    const { got, bytes } = roundTrip(
      refs,
      ts,
      vals.map((v) => bitsOf(v)[0]),
      vals.map((v) => bitsOf(v)[1]),
    );
    assert.equal(got.length, n);
    assert.ok(bytes / n < 7, `${bytes / n} bytes per sample`);
  });

  it("compresses series records with snappy and reads them back", () => {
    const series = Array.from({ length: 50 }, (_, i) => ({
      ref: 1000 + i,
      labels: [
        { name: "__name__", value: "svc_vm_network_receive_bytes_total" },
        { name: "interface", value: `eth${i % 2}` },
        { name: "vm", value: `projects/p/locations/dc-1/vms/vm-${i}` },
      ],
    }));
    const w = new ByteWriter();
    frameSeriesRecord(w, series);
    const buf = w.finish();
    assert.equal(buf[8], REC_SERIES_SNAPPY);
    const plain = new ByteWriter();
    frameRecord(plain, (p) => encodeSeriesRecord(p, series));
    assert.ok(buf.length < plain.finish().length / 2, "compression pays on repetitive labels");
    const got: { ref: number; labels: unknown }[] = [];
    assert.equal(
      readRecords(buf, { series: (ref, labels) => got.push({ ref, labels }), sample() {} }).end,
      buf.length,
    );
    assert.deepEqual(got, series);
  });

  it("replays a WAL written in the old 20-byte sample format", async () => {
    const { dir, cleanup } = tempDir();
    try {
      const labels = [
        { name: "__name__", value: "m" },
        { name: "a", value: "b" },
      ];
      const w = new ByteWriter();
      frameRecord(w, (p) => encodeSeriesRecord(p, [{ ref: 5, labels }]));
      const [hi, lo] = bitsOf(2.5);
      frameRecord(w, (p) => encodeSamplesRecord(p, 2, [5, 5], [1000, 2000], [hi, 0x7ff00000], [lo, 2]));
      mkdirSync(join(dir, "wal"), { recursive: true });
      writeFileSync(join(dir, "wal", "00000001"), w.finish());
      const db = await openTsdb(dir, { now: () => 3000, autoCompact: false });
      try {
        const [s] = db.querier().select([{ type: "=", name: "a", value: "b" }], 0, 5000);
        assert.deepEqual([...s.timestamps], [1000, 2000]);
        assert.equal(s.values[0], 2.5);
        const v = new Uint32Array(s.values.buffer, s.values.byteOffset, 4);
        assert.deepEqual([v[2], v[3]], [2, 0x7ff00000], "the staleness marker keeps its payload");
      } finally {
        await db.close();
      }
    } finally {
      cleanup();
    }
  });
});
