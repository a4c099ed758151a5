import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { rollupStepAggregate, rollupsServe, stepAggregate, withoutStaleMarkers } from "../metrics/windows.ts";
import { writeStaleMarker } from "./interface.ts";
import { Rollups, rollupsOf } from "./rollups.ts";

const R = 300_000;
const T0 = Date.UTC(2026, 0, 1);

/**
 * 2 days at ~30 s with jitter, samples exactly on bucket edges, a 40-minute hole, a staleness
 * marker, and counter resets (at most one per bucket).
 */
function series(kind: "gauge" | "integer" | "counter"): { t: Float64Array; v: Float64Array } {
  const t: number[] = [];
  const v: number[] = [];
  let c = 1000;
  for (let i = 0; i < 5760; i++) {
    if (i >= 2000 && i < 2080) continue;
    // Every 10th sample sits exactly on a multiple of 300 s; others are jittered off the grid.
    const ts = T0 + i * 30_000 + (i % 10 === 0 ? 0 : ((i * 7919) % 4000) - 2000);
    t.push(ts);
    if (kind === "gauge") v.push(20 + 15 * Math.sin(i / 37) + ((i * 13) % 7) / 3);
    else if (kind === "integer") v.push(2e9 + 1e6 * ((i * 31) % 500));
    else {
      c = i % 997 === 500 ? 17 : c + 4096 * (1 + (i % 3)) + 0.25;
      v.push(c);
    }
  }
  const tt = Float64Array.from(t);
  const vv = Float64Array.from(v);
  writeStaleMarker(vv, 3000);
  return { t: tt, v: vv };
}

function same(a: Float64Array, b: Float64Array, what: string, relTol = 0): void {
  assert.equal(a.length, b.length, `${what}: length`);
  for (let i = 0; i < a.length; i++) {
    if (relTol === 0) assert.ok(Object.is(a[i], b[i]), `${what}[${i}]: ${a[i]} vs ${b[i]}`);
    else assert.ok(Math.abs(a[i] - b[i]) <= relTol * Math.abs(b[i]), `${what}[${i}]: ${a[i]} vs ${b[i]}`);
  }
}

describe("rollups", () => {
  for (const stepMs of [R, 6 * R, 12 * R]) {
    for (const windowMs of [stepMs, 2 * stepMs]) {
      it(`give the raw step aggregates at step ${stepMs / 60_000} min, window ${windowMs / 60_000} min`, () => {
        const grid = { startMs: T0 + 6 * R, stepMs, points: Math.floor((2 * 86_400_000) / stepMs) };
        assert.ok(rollupsServe(grid, windowMs, R));
        for (const kind of ["gauge", "integer", "counter"] as const) {
          const raw = series(kind);
          const { t, v } = withoutStaleMarkers(raw.t, raw.v);
          const r = rollupsOf(raw.t, raw.v, R);
          for (const fn of ["avg_over_time", "max_over_time", "last_over_time", "rate"] as const) {
            const want = stepAggregate(t, v, grid, windowMs, fn);
            const got = rollupStepAggregate(r, grid, windowMs, fn);
            same(got.timestamps, want.timestamps, `${kind} ${fn} times`);
            // Bit for bit, except the rounding of sums: averages of fractional values, and rate over
            // a series with many drops in one bucket (a gauge), where the corrections add up in
            // another order.
            const rounding =
              (fn === "avg_over_time" && kind !== "integer") || (fn === "rate" && kind === "gauge");
            same(got.values, want.values, `${kind} ${fn}`, rounding ? 1e-12 : 0);
          }
        }
      });
    }
  }

  it("serve only grids whose windows are unions of whole buckets", () => {
    const grid = { startMs: T0, stepMs: R, points: 10 };
    assert.ok(rollupsServe(grid, R, R));
    assert.ok(!rollupsServe({ ...grid, stepMs: 60_000 }, R, R));
    assert.ok(!rollupsServe(grid, 90_000, R));
    assert.ok(!rollupsServe({ ...grid, startMs: T0 + 30_000 }, R, R));
    assert.ok(!rollupsServe(grid, R, 0));
  });

  it("join a bucket split in two (a block boundary) into the bucket of the whole", () => {
    const { t, v } = series("counter");
    const whole = rollupsOf(t, v, R);
    // Split inside a bucket, right after a sample on its right edge and right before a reset.
    for (const cut of [1234, 1000, 1001, 1497, 1498]) {
      const joined = new Rollups(R);
      for (const part of [
        rollupsOf(t.subarray(0, cut), v.subarray(0, cut), R),
        rollupsOf(t.subarray(cut), v.subarray(cut), R),
      ]) {
        for (let i = 0; i < part.n; i++)
          joined.addBucket(
            part.end[i],
            part.count[i],
            part.firstT[i],
            part.firstV[i],
            part.lastT[i],
            part.lastV[i],
            part.max[i],
            part.sum[i],
            part.resets[i],
          );
      }
      assert.equal(joined.n, whole.n);
      for (const f of ["end", "count", "firstT", "firstV", "lastT", "lastV", "max", "resets"] as const)
        same(joined[f].subarray(0, joined.n), whole[f].subarray(0, whole.n), `cut ${cut} ${f}`);
      same(joined.sum.subarray(0, joined.n), whole.sum.subarray(0, whole.n), `cut ${cut} sum`, 1e-15);
    }
  });

  it("never count a staleness marker, and report non-finite sums", () => {
    const t = Float64Array.from([T0 + 1, T0 + 2, T0 + 3]);
    const v = Float64Array.from([1, 0, 3]);
    writeStaleMarker(v, 1);
    const r = rollupsOf(t, v, R);
    assert.equal(r.n, 1);
    assert.equal(r.count[0], 2);
    assert.equal(r.sum[0], 4);
    assert.equal(r.resets[0], 0);
    assert.ok(r.allFinite());
    assert.ok(!rollupsOf(t, Float64Array.from([1, Number.POSITIVE_INFINITY, 3]), R).allFinite());
    assert.ok(!rollupsOf(t, Float64Array.from([1, Number.NaN, 3]), R).allFinite());
  });
});
