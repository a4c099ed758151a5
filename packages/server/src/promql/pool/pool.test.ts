import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { labelsFromRecord, type Queryable, writeStaleMarker } from "../../storage/interface.ts";
import { createEngine } from "../engine/engine.ts";
import { QueryOverloadError, QueryTimeoutError, TooManySamplesError } from "../errors.ts";
import { parse } from "../parser.ts";
import { injectTenant } from "../tenant.ts";
import { MemStorage } from "../testing/memstorage.ts";
import { createQueryPool, type QueryPool } from "./pool.ts";

const STEP = 15_000;

async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setTimeout(r, 1));
}

/** `series` counters of `points` samples each, 15 s apart, and a gauge that goes stale half way. */
function store(series: number, points: number): MemStorage {
  const s = new MemStorage();
  for (let k = 0; k < series; k++) {
    const labels = labelsFromRecord({ __name__: "m_total", i: String(k), project_id: "p" });
    for (let p = 0; p < points; p++) s.append(labels, p * STEP, p * (k + 1));
  }
  const g = labelsFromRecord({ __name__: "g", project_id: "p" });
  const stale = new Float64Array(1);
  writeStaleMarker(stale, 0);
  for (let p = 0; p < points; p++) s.append(g, p * STEP, p < points / 2 ? p : stale[0]);
  return s;
}

/** ~seconds of sorting on any machine: a 1 s subquery over two hours at each of 10,000 steps. */
const HEAVY = "quantile_over_time(0.5, (sum(rate(m_total[5m])) + vector(time()))[2h:1s])";

describe("createQueryPool()", () => {
  let pool: QueryPool;
  const data = store(20, 2_000);
  before(async () => {
    pool = createQueryPool({ workers: 2 });
    await pool.warm();
  });
  after(() => pool.close());

  it("runs its workers below the event loop's thread in the scheduler (nice 10, Linux)", {
    skip: process.platform !== "linux",
  }, () => {
    // Field 19 of /proc/<pid>/task/<tid>/stat is the thread's nice value (after the parenthesised name).
    const niceOf = (tid: string) =>
      Number(readFileSync(`/proc/self/task/${tid}/stat`, "utf8").split(") ")[1].split(" ")[16]);
    const threads = readdirSync("/proc/self/task");
    assert.equal(niceOf(String(process.pid)), 0, "the event loop's thread keeps its priority");
    assert.ok(threads.filter((t) => niceOf(t) === 10).length >= 2, "both workers run at nice 10");
  });

  it("reads a store that can iterate a series at a time, giving the event loop back in between", async () => {
    const events: string[] = [];
    // The store as the TSDB is: select and, for sliced readers, selectIter.
    const iterating: Queryable = {
      querier: () => {
        const q = data.querier();
        return {
          ...q,
          select: q.select.bind(q),
          *selectIter(matchers, mintMs, maxtMs, hints) {
            for (const s of q.select(matchers, mintMs, maxtMs, hints)) {
              events.push("series");
              yield s;
            }
          },
        };
      },
    };
    const sliced = createQueryPool({ workers: 1, readSliceMs: 0 });
    try {
      let ticking = true;
      const tick = () => {
        events.push("tick");
        if (ticking) setImmediate(tick);
      };
      setImmediate(tick);
      const ast = injectTenant(parse("sum(m_total)"), "p");
      const got = await sliced.instantQuery(iterating, ast, 15_000_000);
      ticking = false;
      assert.deepEqual(got, createEngine().instantQuery(data, ast, 15_000_000));
      const reads = events.slice(events.indexOf("series"), events.lastIndexOf("series") + 1);
      assert.equal(reads.filter((e) => e === "series").length, 20);
      assert.ok(reads.filter((e) => e === "tick").length >= 19, `other work ran between series: ${reads}`);
    } finally {
      await sliced.close();
    }
  });

  it("answers exactly what the engine answers on the event loop", async () => {
    const engine = createEngine();
    for (const expr of [
      "sum by (i) (rate(m_total[5m]))",
      "g",
      "max_over_time(g[10m])",
      "avg_over_time(rate(m_total[2m])[10m:30s] offset 1m)",
      "m_total @ 100 - m_total offset 5m",
      "count(m_total > 1000)",
    ]) {
      const ast = injectTenant(parse(expr), "p");
      const want = engine.rangeQuery(data, ast, 600_000, 29_000_000, 60_000);
      assert.ok(want.value.resultType === "matrix" && want.value.result.length > 0, expr);
      const got = await pool.rangeQuery(data, ast, 600_000, 29_000_000, 60_000);
      assert.deepEqual(got, want, expr);
      const wantI = engine.instantQuery(data, ast, 15_000_000);
      assert.deepEqual(await pool.instantQuery(data, ast, 15_000_000), wantI, expr);
    }
    const m = parse("m_total[2m]");
    assert.deepEqual(await pool.instantQuery(data, m, 1_000_000), engine.instantQuery(data, m, 1_000_000));
  });

  it("brings back the engine's typed errors", async () => {
    await assert.rejects(pool.instantQuery(data, parse('label_replace(m_total, "i", "x", "", "")'), 1), {
      name: "QueryEvalError",
    });
    await assert.rejects(pool.rangeQuery(data, parse("m_total"), 0, 1e9, 1), { name: "PointBudgetError" });
  });

  it("stops a query at its deadline by terminating its worker, and replaces the worker", async () => {
    const before = pool.stats();
    const r = pool.rangeQuery(data, parse(HEAVY), 20_000_000, 29_999_000, 1_000, { timeoutMs: 300 });
    await assert.rejects(r, QueryTimeoutError);
    const s = pool.stats();
    assert.equal(s.running, 0, "nothing runs after the timeout");
    assert.equal(s.replaced, before.replaced + 1);
    assert.equal(s.started, before.started + 1, "a fresh worker replaced the terminated one");
    assert.deepEqual(
      (await pool.instantQuery(data, parse("count(m_total)"), 1_000_000)).value,
      createEngine().instantQuery(data, parse("count(m_total)"), 1_000_000).value,
    );
  });

  it("refuses a query that would load more samples than the limit, naming it", async () => {
    const small = createQueryPool({ workers: 1, maxSamples: 10_000 });
    try {
      await assert.rejects(small.instantQuery(data, parse("rate(m_total[1d])"), 29_000_000), (e) => {
        assert.ok(e instanceof TooManySamplesError);
        assert.equal(e.limit, 10_000);
        return true;
      });
      // The worker survives a refused read and serves the next query.
      const ok = await small.instantQuery(data, parse("sum(m_total)"), 29_000_000);
      assert.equal(ok.value.resultType, "vector");
      assert.equal(small.stats().replaced, 0);
    } finally {
      await small.close();
    }
  });

  it("keeps a worker for another tenant while one tenant's heavy queries occupy the rest", async () => {
    const p = createQueryPool({ workers: 2, maxQueueWaitMs: 600_000 });
    try {
      await p.warm();
      const order: string[] = [];
      const heavy = [1, 2].map((k) =>
        p
          .rangeQuery(data, parse(HEAVY), 20_000_000, 29_999_000, 1_000, { tenant: "busy", timeoutMs: 0 })
          .then(() => order.push(`heavy${k}`)),
      );
      await until(() => p.stats().running === 1);
      assert.deepEqual(
        p.stats(),
        { ...p.stats(), running: 1, queued: 1 },
        "the busy tenant holds one of two",
      );
      await p
        .instantQuery(data, parse("sum(m_total)"), 1_000_000, { tenant: "light" })
        .then(() => order.push("light"));
      assert.deepEqual(
        order,
        ["light"],
        "the light tenant's query finished while the busy one's ran and waited",
      );
      await Promise.all(heavy);
      assert.deepEqual(order, ["light", "heavy1", "heavy2"]);
    } finally {
      await p.close();
    }
  });

  it("refuses with an overload error (429), not a timeout, when a tenant waits too long for a worker", async () => {
    const p = createQueryPool({ workers: 1, maxQueueWaitMs: 50, retryAfterSeconds: 3 });
    try {
      await p.warm();
      const held = p.rangeQuery(data, parse(HEAVY), 20_000_000, 29_999_000, 1_000, { timeoutMs: 0 });
      await until(() => p.stats().running === 1);
      await assert.rejects(p.instantQuery(data, parse("1"), 0), (e) => {
        assert.ok(e instanceof QueryOverloadError);
        assert.equal(e.retryAfterSeconds, 3);
        return true;
      });
      const closed = assert.rejects(held, /query pool closed/);
      await p.close();
      await closed;
    } finally {
      await p.close();
    }
  });
});
