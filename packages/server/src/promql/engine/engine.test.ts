import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { MemStorage } from "../../../testing/memstorage.ts";
import { runFile } from "../../../testing/promql-corpus/runner.ts";
import { labelsFromRecord, type Queryable } from "../../storage/interface.ts";
import {
  createEngine,
  PointBudgetError,
  parse,
  QueryTimeoutError,
  resolveEngineOptions,
  TooManySamplesError,
} from "../index.ts";

const here = dirname(fileURLToPath(import.meta.url));

function store(series = 3, points = 100): MemStorage {
  const s = new MemStorage();
  for (let k = 0; k < series; k++) {
    const labels = labelsFromRecord({ __name__: "m_total", i: String(k) });
    for (let p = 0; p < points; p++) s.append(labels, p * 15_000, p);
  }
  return s;
}

describe("createEngine()", () => {
  it("passes svc's own script cases", () => {
    const r = runFile(join(here, "../testdata/engine.test"));
    assert.deepEqual(r.failures, []);
    assert.equal(r.failed, 0);
    assert.ok(r.passed >= 7);
  });

  it("rejects a range query over the point budget with a typed error", () => {
    const engine = createEngine({ maxPointsPerSeries: 10 });
    assert.throws(() => engine.rangeQuery(store(), parse("m_total"), 0, 60_000, 6_000), PointBudgetError);
    assert.doesNotThrow(() => engine.rangeQuery(store(), parse("m_total"), 0, 54_000, 6_000));
  });

  it("stops when the samples limit is exceeded", () => {
    const engine = createEngine({ maxSamples: 50 });
    assert.throws(
      () => engine.instantQuery(store(), parse("rate(m_total[1h])"), 1_500_000),
      TooManySamplesError,
    );
  });

  it("stops evaluation when the signal fires mid-query", () => {
    const base = store(200, 50);
    const ctl = new AbortController();
    let selects = 0;
    const aborting: Queryable = {
      querier: () => {
        const q = base.querier();
        return {
          ...q,
          select: (...a: Parameters<typeof q.select>) => {
            selects++;
            ctl.abort();
            return q.select(...a);
          },
        };
      },
    };
    const engine = createEngine();
    assert.throws(
      () =>
        engine.instantQuery(aborting, parse("sum(rate(m_total[5m])) + sum(m_total)"), 600_000, {
          signal: ctl.signal,
        }),
      QueryTimeoutError,
    );
    assert.equal(selects, 1, "the second selector was never read");
  });

  it("reads a selector repeated over the same range once per query", () => {
    const base = store(3, 100);
    const ranges: string[] = [];
    const counting: Queryable = {
      querier: () => {
        const q = base.querier();
        return {
          ...q,
          select: (...a: Parameters<typeof q.select>) => {
            ranges.push(`${a[1]}..${a[2]}`);
            return q.select(...a);
          },
        };
      },
    };
    const r = createEngine().rangeQuery(
      counting,
      parse("sum(m_total - on(i) m_total) / sum(m_total) + sum(m_total offset 1m)"),
      600_000,
      900_000,
      60_000,
    );
    assert.equal(ranges.length, 2, `one read per distinct range, got ${ranges.join(", ")}`);
    assert.equal(r.value.resultType, "matrix");
    if (r.value.resultType === "matrix") {
      // 0 / sum(m_total) + sum(m_total offset 1m): 3 series at p = t/15s - 4, each worth p.
      assert.deepEqual(Array.from(r.value.result[0].values), [108, 120, 132, 144, 156, 168]);
    }
  });

  it("uses the injected lookback", () => {
    const engine = createEngine({ lookbackDeltaMs: 10_000 });
    const r = engine.instantQuery(store(1, 2), parse("m_total"), 30_000);
    assert.equal(r.value.resultType === "vector" && r.value.result.length, 0);
  });

  it("returns annotations beside the value", () => {
    const s = new MemStorage();
    for (let p = 0; p < 10; p++) s.append(labelsFromRecord({ __name__: "gauge" }), p * 15_000, p);
    const r = createEngine().instantQuery(s, parse("rate(gauge[1m]) + quantile(2, gauge)"), 120_000);
    assert.equal(r.annotations.infos.length, 1);
    assert.match(r.annotations.infos[0], /might not be a counter/);
    assert.match(r.annotations.warnings[0], /quantile value should be between 0 and 1, got 2/);
  });

  it("validates options once", () => {
    assert.throws(() => resolveEngineOptions({ lookbackDeltaMs: -1 }), RangeError);
    assert.ok(Object.isFrozen(resolveEngineOptions()));
  });
});
