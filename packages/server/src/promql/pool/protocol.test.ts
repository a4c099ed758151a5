import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ColumnsBuilder, columnsOf } from "../../storage/columns.ts";
import { type Labels, labelsFromRecord } from "../../storage/interface.ts";
import { packColumns, unpackSeries } from "./protocol.ts";

/** Three series keyed 7, 8 and 9, two samples each. */
function columns() {
  const labels = new Map<number, Labels>(
    [7, 8, 9].map((k) => [k, labelsFromRecord({ __name__: "m", i: String(k) })]),
  );
  const b = new ColumnsBuilder(4);
  for (const key of labels.keys()) {
    b.reserve(2);
    b.timestamps.set([key * 1000, key * 1000 + 15], b.used);
    b.values.set([key, key + 0.5], b.used);
    b.used += 2;
    b.endSeries(key);
  }
  return { cols: b.finish((k) => labels.get(k)!), labels };
}

describe("packColumns and unpackSeries", () => {
  it("send a keyed series' labels to a worker once, and the worker answers later selects from its own copy", () => {
    const known = new Set<number>();
    const cache = new Map<number, Labels>();
    const first = columns();
    const p1 = packColumns(first.cols, known);
    assert.equal(JSON.parse(p1.labels).filter((l: unknown) => l === null).length, 0);
    const got1 = unpackSeries(p1, cache);
    assert.deepEqual(
      got1.map((s) => [s.labels, [...s.timestamps], [...s.values]]),
      [7, 8, 9].map((k) => [first.labels.get(k), [k * 1000, k * 1000 + 15], [k, k + 0.5]]),
    );
    const again = columns();
    const p2 = packColumns(again.cols, known);
    assert.deepEqual(JSON.parse(p2.labels), [null, null, null], "no label set crosses a second time");
    const got2 = unpackSeries(p2, cache);
    assert.deepEqual(
      got2.map((s) => s.labels),
      got1.map((s) => s.labels),
    );
    assert.ok(Object.isFrozen(got2[0].labels), "the kept labels serve every later query, unchanged");
  });

  it("refuse a series whose labels the worker was never sent, rather than answer without them", () => {
    const { cols } = columns();
    const p = packColumns(cols, new Set([8]));
    assert.throws(() => unpackSeries(p, new Map()), /labels of series 8 were never sent/);
  });

  it("keep the series of a select of labels only, which have no samples", () => {
    const cols = columnsOf([
      {
        labels: labelsFromRecord({ __name__: "m" }),
        timestamps: new Float64Array(0),
        values: new Float64Array(0),
      },
    ]);
    assert.equal(cols.length, 1);
    assert.deepEqual(
      unpackSeries(packColumns(cols)).map((s) => [s.labels, s.values.length]),
      [[labelsFromRecord({ __name__: "m" }), 0]],
    );
  });

  it("drop a series that got no samples", () => {
    const b = new ColumnsBuilder(0);
    b.endSeries(1, labelsFromRecord({ __name__: "empty" }));
    b.reserve(1);
    b.timestamps[b.used] = 5;
    b.values[b.used] = 1;
    b.used++;
    b.endSeries(2, labelsFromRecord({ __name__: "one" }));
    const cols = b.finish();
    assert.equal(cols.length, 1);
    assert.deepEqual([...cols.keys], [2]);
    assert.deepEqual(cols.labelsOf(0), labelsFromRecord({ __name__: "one" }));
  });
});
