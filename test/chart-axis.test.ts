import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { axisTicks, formatTicks, niceStep, roundUp } from "../packages/console/src/components/chart-axis.ts";

const GiB = 2 ** 30;
const ticks = (unit: string, max: number) => {
  const top = roundUp(unit, 0, max, 4);
  return formatTicks(unit, axisTicks(unit, 0, top, 4));
};

/** Issue 43, item 7: round y-axis ticks in the unit's scale (docs/console.md#charts). */
describe("chart axis ticks", () => {
  it("steps by 1, 2 or 5 × 10^n", () => {
    assert.deepEqual([0.13, 0.3, 2.5, 4, 7.2, 240].map(niceStep), [0.1, 0.2, 2, 5, 10, 200]);
  });
  it("reads memory in whole GiB, not 3.7 GiB", () => {
    assert.deepEqual(ticks("bytes", 3.7 * GiB), ["0 B", "1 GiB", "2 GiB", "3 GiB", "4 GiB"]);
  });
  it("reads throughput in round MiB/s, not 976.6 KiB/s", () => {
    assert.deepEqual(ticks("bytes/s", 1.08e6), ["0 B/s", "0.5 MiB/s", "1 MiB/s", "1.5 MiB/s"]);
    assert.deepEqual(ticks("bytes/s", 900 * 1024), [
      "0 B/s",
      "200 KiB/s",
      "400 KiB/s",
      "600 KiB/s",
      "800 KiB/s",
      "1000 KiB/s",
    ]);
  });
  it("reads percentages and rates by tens and thousands", () => {
    assert.deepEqual(formatTicks("%", axisTicks("%", 0, 100, 4)), [
      "0 %",
      "20 %",
      "40 %",
      "60 %",
      "80 %",
      "100 %",
    ]);
    assert.deepEqual(ticks("ops/s", 1234), ["0 ops/s", "0.5k ops/s", "1k ops/s", "1.5k ops/s"]);
  });
  it("ends the axis on its top tick", () => {
    for (const [unit, max] of [
      ["bytes", 3.7 * GiB],
      ["bytes/s", 1.08e6],
      ["ops/s", 77],
      ["%", 3.3],
    ] as const) {
      const top = roundUp(unit, 0, max, 4);
      const t = axisTicks(unit, 0, top, 4);
      assert.ok(top >= max, `${unit}: ${top} < ${max}`);
      assert.equal(t[t.length - 1], top, `${unit}: the last tick is the top`);
    }
  });
});
