import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isStaleMarker, staleNaN } from "../storage/interface.ts";
import { mergeRanges } from "./compactor.ts";
import { mergeParts } from "./merge.ts";

const part = (t: number[], v: number[]) => ({ t: Float64Array.from(t), v: Float64Array.from(v) });

describe("mergeParts", () => {
  it("concatenates disjoint parts in order and keeps staleness markers' bits", () => {
    const v = new Float64Array([1, 2]);
    v[1] = staleNaN();
    const m = mergeParts([part([1, 2], [10, 20]), part([], []), { t: Float64Array.from([3, 4]), v }]);
    assert.deepEqual([...m.t], [1, 2, 3, 4]);
    assert.deepEqual([...m.v.subarray(0, 3)], [10, 20, 1]);
    assert.ok(isStaleMarker(m.v, 3));
  });

  it("interleaves overlapping parts, the earlier part winning on equal timestamps", () => {
    const m = mergeParts([
      part([1, 3, 5], [1, 3, 5]),
      part([2, 3, 6], [20, 30, 60]),
      part([0, 5, 7], [0, 50, 70]),
    ]);
    assert.deepEqual([...m.t], [0, 1, 2, 3, 5, 6, 7]);
    assert.deepEqual([...m.v], [0, 1, 20, 3, 5, 60, 70]);
  });

  it("returns empty arrays when every part is empty", () => {
    const m = mergeParts([part([], []), part([], [])]);
    assert.equal(m.t.length, 0);
    assert.equal(m.v.length, 0);
  });
});

describe("mergeRanges()", () => {
  const H = 3_600_000;
  it("merges 2-hour blocks into 6 h and 24 h ones for 7 days of retention", () => {
    assert.deepEqual(mergeRanges(2 * H, 168 * H), [6 * H, 24 * H]);
  });
  it("stops at the largest block allowed: a seventh of the retention, or the configured maximum", () => {
    assert.deepEqual(mergeRanges(2 * H, 48 * H), [6 * H]);
    assert.deepEqual(mergeRanges(2 * H, 168 * H, 12 * H), [6 * H]);
    assert.deepEqual(mergeRanges(2 * H, 168 * H, 2 * H), [], "the block range: no merging");
  });
});
