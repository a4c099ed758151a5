import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { seededRandom } from "../../testing/seeded-random.ts";
import { labelsFromRecord } from "../storage/interface.ts";
import { Head } from "./head.ts";
import { resolveTsdbOptions } from "./options.ts";

/**
 * A head chunk's decoder checkpoint (head.ts CHECKPOINT_AT) lets a read whose window starts after it
 * decode from there. The samples and value bits must be exactly those of a read from the chunk's start:
 * here every window of random series (irregular intervals, large timestamp jumps, repeated values,
 * NaN payloads, values that widen and narrow the XOR window) is compared with what was appended.
 */
describe("head chunk checkpoints", () => {
  it("a read from a checkpoint returns the same samples and bits as the samples appended", () => {
    const rnd = seededRandom(46);
    const head = new Head(resolveTsdbOptions({ chunkTargetSamples: 120 }));
    const f64 = new Float64Array(1);
    const u32 = new Uint32Array(f64.buffer);
    const series: { ref: number; t: number[]; hi: number[]; lo: number[] }[] = [];
    for (let k = 0; k < 40; k++) {
      const ref = head.getOrCreate(labelsFromRecord({ __name__: "m", k: String(k) }));
      const s = { ref, t: [] as number[], hi: [] as number[], lo: [] as number[] };
      // Up to ~3 chunks, so reads cross closed and open chunks, some shorter than the checkpoint.
      const n = 1 + Math.floor(rnd() * 400);
      let t = 1_700_000_000_000 + Math.floor(rnd() * 1000);
      let v = rnd() * 100;
      for (let i = 0; i < n; i++) {
        const r = rnd();
        t +=
          r < 0.003 ? 1 + Math.floor(rnd() * 5_000_000) : r < 0.8 ? 30_000 : 1 + Math.floor(rnd() * 60_000);
        const w = rnd();
        if (w < 0.02) {
          u32[0] = 0x00000002; // a NaN with a payload (the staleness marker's kind)
          u32[1] = 0x7ff00000;
        } else {
          if (w < 0.3) {
            // the same value again
          } else if (w < 0.85) v = Math.round(rnd() * 100);
          else if (w < 0.99) v = Math.round(rnd() * 100) + 0.5;
          else v = rnd() * 1e12;
          f64[0] = v;
        }
        assert.equal(head.append(ref, t, u32[1], u32[0]), "appended");
        s.t.push(t);
        s.hi.push(u32[1]);
        s.lo.push(u32[0]);
      }
      series.push(s);
    }
    for (const s of series) {
      const n = s.t.length;
      // A window starting at every sample (before, at and after each chunk's checkpoint), or just before it.
      for (let a = 0; a < n; a++) {
        const b = a + Math.floor(rnd() * (n - a));
        const mint = s.t[a] - (rnd() < 0.5 ? 0 : 1);
        const maxt = rnd() < 0.5 ? s.t[b] : Number.POSITIVE_INFINITY;
        const got = head.samples(s.ref, mint, maxt);
        const bits = new Uint32Array(got.v.buffer, got.v.byteOffset, got.v.length * 2);
        const want = s.t.map((_t, i) => i).filter((i) => s.t[i] >= mint && s.t[i] <= maxt);
        assert.equal(got.t.length, want.length, `series ${s.ref} [${mint}, ${maxt}]`);
        for (const [j, i] of want.entries()) {
          assert.equal(got.t[j], s.t[i]);
          assert.equal(bits[2 * j], s.lo[i]);
          assert.equal(bits[2 * j + 1], s.hi[i]);
        }
      }
    }
  });
});
