/**
 * MetricsBackend.queryEncoded: a Prometheus-API answer built (and compressed) in the query worker is
 * byte for byte the body the event loop builds from the result.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { MemStorage } from "../../testing/memstorage.ts";
import type { EncodedAnswer } from "../promql/index.ts";
import { createQueryPool, ResponseTooLargeError } from "../promql/index.ts";
import { queryAnswerJson } from "../promql/json.ts";
import { labelsFromRecord, type Queryable } from "../storage/interface.ts";
import { createMetricsBackend } from "./backend.ts";

const STEP = 15_000;
const MAX = 10_000_000;

function store(): MemStorage {
  const s = new MemStorage();
  for (const project of ["p", "q"])
    for (let k = 0; k < 8; k++) {
      const counter = labelsFromRecord({
        __name__: "m_total",
        i: String(k),
        project_id: project,
        vm: `vm <${k}>`,
      });
      const gauge = labelsFromRecord({ __name__: "g", i: String(k), project_id: project });
      for (let p = 0; p < 400; p++) {
        s.append(counter, p * STEP, p * (k + 1) + (project === "q" ? 1e6 : 0));
        s.append(gauge, p * STEP, Math.sin(p / 7) * 1e-7 * (k + 1));
      }
    }
  return s;
}

/** A body built in a worker (not the inline path's text). */
function fromWorker(x: EncodedAnswer | string): EncodedAnswer {
  assert.notEqual(typeof x, "string", "expected the worker's encoded body");
  return x as EncodedAnswer;
}

describe("MetricsBackend.queryEncoded", () => {
  const storage = store();
  const pool = createQueryPool({ workers: 1 });
  after(() => pool.close());
  const inline = createMetricsBackend({ storage });
  const pooled = createMetricsBackend({ storage, queryPool: pool });
  const decode = (body: Uint8Array, coding?: string) =>
    (coding === "gzip"
      ? gunzipSync(body)
      : coding === "br"
        ? brotliDecompressSync(body)
        : Buffer.from(body)
    ).toString();

  it("is absent without a worker pool: the handler builds the body itself", () => {
    assert.equal(inline.queryEncoded, undefined);
    assert.equal(typeof pooled.queryEncoded, "function");
  });

  it("answers the body the event loop would build, in every coding, without the tenant label", async () => {
    const encoded = pooled.queryEncoded;
    assert.ok(encoded);
    for (const expr of [
      "sum by (i) (rate(m_total[5m]))",
      "m_total",
      "rate(g[5m])", // an info annotation: g is not a counter
      "g",
      "scalar(sum(m_total))",
      "count(m_total > 1e12)", // empty
    ]) {
      const range = { startMs: 600_000, endMs: 5_000_000, stepMs: 60_000 };
      const want = queryAnswerJson(await inline.rangeQuery("p", expr, 600_000, 5_000_000, 60_000), MAX);
      assert.ok(!want.includes("project_id"), expr);
      const wantI = queryAnswerJson(await inline.instantQuery("p", expr, 3_000_000), MAX);
      for (const coding of [undefined, "gzip", "br"] as const) {
        const got = fromWorker(await encoded("p", expr, range, { maxBytes: MAX, coding }));
        assert.equal(decode(got.body, got.coding), want, `${expr} ${coding}`);
        // Small bodies stay plain whatever the client accepts.
        assert.equal(got.coding, want.length >= 1024 ? coding : undefined, `${expr} ${coding}`);
        const gotI = fromWorker(await encoded("p", expr, { timeMs: 3_000_000 }, { maxBytes: MAX, coding }));
        assert.equal(decode(gotI.body, gotI.coding), wantI, `${expr} instant ${coding}`);
      }
    }
    assert.match(
      queryAnswerJson(await inline.rangeQuery("p", "rate(g[5m])", 600_000, 5_000_000, 60_000), MAX),
      /"infos"/,
    );
  });

  it("refuses an answer over the size limit with the error the event loop would raise", async () => {
    const expr = "m_total";
    const inlineErr = await inline
      .rangeQuery("p", expr, 0, 5_000_000, 15_000)
      .then((r) => queryAnswerJson(r, 10_000))
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    assert.ok(inlineErr instanceof ResponseTooLargeError);
    await assert.rejects(
      pooled.queryEncoded?.(
        "p",
        expr,
        { startMs: 0, endMs: 5_000_000, stepMs: 15_000 },
        { maxBytes: 10_000 },
      ) ?? Promise.resolve(),
      (e) => {
        assert.ok(e instanceof ResponseTooLargeError);
        assert.equal(e.limit, 10_000);
        assert.match(e.message, /response of more than 10,000 bytes/);
        return true;
      },
    );
  });
});

describe("MetricsBackend: a cheap Prometheus-API query inline when the project has no free worker (promql/cost.ts)", () => {
  const mem = store();
  // MemStorage has no index estimate (such stores always use the pool): count the matching series.
  const storage: Queryable = {
    querier() {
      const q = mem.querier();
      q.estimateSeries = (ms, mint, maxt) => q.select(ms, mint, maxt, { labelsOnly: true }).length;
      return q;
    },
  };
  const reference = createMetricsBackend({ storage: mem });
  const range = { startMs: 600_000, endMs: 5_000_000, stepMs: 60_000 }; // 74 steps

  it("answers a query under the threshold inline while no worker has started, as text equal to the worker's body", async () => {
    const pool = createQueryPool({ workers: 1 });
    after(() => pool.close());
    const b = createMetricsBackend({ storage, queryPool: pool, inlineQueryCost: 100_000 });
    // One series of a project × 74 steps × 20 samples per 5 m window: 1,480 visits.
    const expr = 'rate(m_total{i="3"}[5m])';
    const want = queryAnswerJson(await reference.rangeQuery("p", expr, 600_000, 5_000_000, 60_000), MAX);
    const got = await b.queryEncoded?.("p", expr, range, { maxBytes: MAX, coding: "gzip" });
    assert.equal(got, want);
    assert.equal(pool.stats().started, 0);
    // The evaluator's and preview's queries (instantQuery, rangeQuery) always go to the pool.
    assert.deepEqual(
      await b.instantQuery("p", expr, 3_000_000),
      await reference.instantQuery("p", expr, 3_000_000),
    );
    assert.equal(pool.stats().started, 1);
  });

  it("sends a cheap query to a free worker, and evaluates it inline while the project's worker is taken", async () => {
    const pool = createQueryPool({ workers: 1 });
    after(() => pool.close());
    await pool.warm();
    const b = createMetricsBackend({ storage, queryPool: pool, inlineQueryCost: 100_000 });
    const expr = 'rate(m_total{i="3"}[5m])';
    const want = queryAnswerJson(await reference.rangeQuery("p", expr, 600_000, 5_000_000, 60_000), MAX);
    const alone = await b.queryEncoded?.("p", expr, range, { maxBytes: MAX });
    assert.equal(typeof alone, "object", "a free worker takes it");
    assert.equal(Buffer.from(fromWorker(alone ?? "").body).toString(), want);
    // Two at once, as a dashboard's panels: the first takes the worker, the second runs inline.
    const [first, second] = await Promise.all([
      b.queryEncoded?.("p", expr, range, { maxBytes: MAX }),
      b.queryEncoded?.("p", expr, range, { maxBytes: MAX }),
    ]);
    assert.equal(Buffer.from(fromWorker(first ?? "").body).toString(), want);
    assert.equal(second, want);
  });

  it("sends a query over the threshold, and any subquery, to a worker", async () => {
    const pool = createQueryPool({ workers: 1 });
    after(() => pool.close());
    // 8 series × 74 steps × 20 = 11,840 visits, over a threshold of 10,000.
    const b = createMetricsBackend({ storage, queryPool: pool, inlineQueryCost: 10_000 });
    const expr = "sum by (i) (rate(m_total[5m]))";
    const want = queryAnswerJson(await reference.rangeQuery("p", expr, 600_000, 5_000_000, 60_000), MAX);
    const got = fromWorker((await b.queryEncoded?.("p", expr, range, { maxBytes: MAX })) ?? "");
    assert.equal(Buffer.from(got.body).toString(), want);
    assert.equal(pool.stats().started, 1);
    const sub = "max_over_time(g[10m:1m])";
    const subWant = queryAnswerJson(await reference.instantQuery("p", sub, 3_000_000), MAX);
    const subGot = fromWorker(
      (await b.queryEncoded?.("p", sub, { timeMs: 3_000_000 }, { maxBytes: MAX })) ?? "",
    );
    assert.equal(Buffer.from(subGot.body).toString(), subWant);
  });

  it("uses the worker for every query with a threshold of 0", async () => {
    const pool = createQueryPool({ workers: 1 });
    after(() => pool.close());
    const b = createMetricsBackend({ storage, queryPool: pool, inlineQueryCost: 0 });
    fromWorker(
      (await b.queryEncoded?.("p", 'm_total{i="1"}', { timeMs: 3_000_000 }, { maxBytes: MAX })) ?? "",
    );
    assert.equal(pool.stats().started, 1);
  });
});
