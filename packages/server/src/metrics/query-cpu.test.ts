import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createQueryCpuMeter } from "./query-cpu.ts";

describe("query CPU per project", () => {
  it("sums each project's charges over the last 5 minutes and forgets older ones", () => {
    let now = Date.UTC(2026, 0, 1);
    const m = createQueryCpuMeter({ now: () => now });
    m.add("a", 0.5);
    m.add("b", 0.25);
    m.add("b", 0); // nothing spent: no entry made
    m.add("c", 0);
    now += 120_000;
    m.add("a", 1);
    assert.deepEqual(
      [...m.recent()],
      [
        ["b", 0.25],
        ["a", 1.5],
      ],
    );
    // 5 minutes after the first charges they are out of the window; a's second one is not.
    now += 180_000;
    assert.deepEqual([...m.recent()], [["a", 1]]);
    now += 300_000;
    assert.deepEqual([...m.recent()], []);
    assert.equal(m.windowSeconds, 300);
  });

  it("keeps at most maxProjects, dropping the one charged longest ago", () => {
    const m = createQueryCpuMeter({ now: () => 0, maxProjects: 2 });
    m.add("a", 1);
    m.add("b", 1);
    m.add("a", 1); // a charged again: b is now the oldest
    m.add("c", 1);
    assert.deepEqual([...m.recent()].sort(), [
      ["a", 2],
      ["c", 1],
    ]);
  });
});
