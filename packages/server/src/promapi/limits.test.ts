import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import Fastify, { type FastifyInstance } from "fastify";
import pino from "pino";
import { type PromFixture, S, startPromFixture } from "../../testing/promapi-fixture.ts";
import { createProjectLimiter, type ProjectLimiter } from "../metrics/concurrency.ts";
import type { PromApiOptions } from "./options.ts";
import { promApiRoutes } from "./plugin.ts";

describe("Prometheus API limits", () => {
  let f: PromFixture;
  before(async () => {
    f = await startPromFixture();
  });
  after(() => f?.close());
  const sec = (ms: number) => String(ms / 1000);

  /** The same surface over the fixture's data with its own limits and limiter, called in-process. */
  async function surface(
    options: Partial<PromApiOptions>,
    limiter: ProjectLimiter = createProjectLimiter(),
  ): Promise<FastifyInstance> {
    const app = Fastify();
    await app.register(
      promApiRoutes({
        db: f.t.app.db.db,
        metrics: f.t.app.metrics,
        limiter,
        now: f.t.clock.now,
        log: pino({ level: "silent" }),
        operatorToken: f.t.app.config.adminToken,
        options,
      }),
    );
    return app;
  }
  const inject = (app: FastifyInstance, path: string, form: Record<string, string>) =>
    app.inject({
      method: "POST",
      url: `/v1/monitoring/projects/mine/prometheus/api/v1/${path}`,
      headers: { authorization: `Bearer ${f.mine.key}`, "content-type": "application/x-www-form-urlencoded" },
      payload: new URLSearchParams(form).toString(),
    });

  it("refuses an expression of 16 KiB + 1 byte and accepts one of 16 KiB", async () => {
    const ok = await f.post("mine", "api/v1/query", { query: `1${" ".repeat(16 * 1024 - 1)}`, time: "4" });
    assert.equal(ok.status, 200, ok.text);
    const r = await f.post("mine", "api/v1/query", { query: `1${" ".repeat(16 * 1024)}`, time: "4" });
    assert.equal(r.status, 400);
    assert.equal(r.json.errorType, "bad_data");
    assert.match(r.json.error, /16,385 bytes exceeds the limit of 16,384 bytes \[EXPRESSION_TOO_LONG\]/);
  });

  it("refuses an 11,000-point range and accepts 10,000 points", async () => {
    const end = f.endMs;
    const ok = await f.post("mine", "api/v1/query_range", {
      query: "vector(1)",
      start: sec(end - 9_999 * S),
      end: sec(end),
      step: "1",
    });
    assert.equal(ok.status, 200);
    assert.equal(ok.json.data.result[0].values.length, 10_000);
    const r = await f.post("mine", "api/v1/query_range", {
      query: "vector(1)",
      start: sec(end - 10_999 * S),
      end: sec(end),
      step: "1s",
    });
    assert.equal(r.status, 400);
    assert.equal(r.json.errorType, "bad_data");
    assert.match(
      r.json.error,
      /exceeded maximum resolution of 10,000 points per timeseries \(requested 11,000\)/,
    );
    assert.match(r.json.error, /step=2s \[POINT_BUDGET_EXCEEDED\]/);
  });

  it("clamps a range to retention on the requested step grid", async () => {
    const step = 3_600 * S;
    const start = f.endMs - 10 * 24 * step; // 10 days back, retention is 7
    const r = await f.get("mine", "api/v1/query_range", {
      query: "vector(1)",
      start: sec(start),
      end: sec(f.endMs),
      step: "1h",
    });
    assert.equal(r.status, 200);
    const ts: number[] = r.json.data.result[0].values.map((v: [number, string]) => v[0] * 1000);
    const floor = f.endMs - f.t.app.config.retentionMs;
    assert.ok(
      ts[0] >= floor && ts[0] - step < floor,
      `first point ${ts[0]} not the first grid point after ${floor}`,
    );
    assert.equal((ts[0] - start) % step, 0);
    const old = await f.get("mine", "api/v1/query_range", {
      query: "vector(1)",
      start: sec(start),
      end: sec(start + step),
      step: "1h",
    });
    assert.deepEqual(old.json.data, { resultType: "matrix", result: [] });
  });

  it("stops a slow evaluation at its deadline with 503 timeout", async () => {
    // ~2 s of sorting uninterrupted on a laptop; the deadline is 100x shorter, so no machine is fast enough.
    const slow = {
      query: "quantile_over_time(0.5, vector(time())[2h:1s])",
      start: sec(f.endMs - 9_999 * S),
      end: sec(f.endMs),
      step: "1",
    };
    const app = await surface({ timeoutMs: 20 });
    const r = await inject(app, "query_range", slow);
    assert.equal(r.statusCode, 503, r.body.slice(0, 300));
    assert.deepEqual(JSON.parse(r.body), {
      status: "error",
      errorType: "timeout",
      error: "query timed out in expression evaluation [QUERY_TIMEOUT]",
    });
    await app.close();
    // A `timeout` parameter shortens the 10 s default (it can never extend it).
    const short = await f.post("mine", "api/v1/query_range", { ...slow, timeout: "20ms" });
    assert.equal(short.status, 503, short.text.slice(0, 300));
    assert.equal(short.json.errorType, "timeout");
  });

  it("refuses a response past the size limit with 422 execution", async () => {
    const app = await surface({ maxResponseBytes: 2_000 });
    const r = await inject(app, "query_range", {
      query: "svc_vm_memory_free_bytes",
      start: sec(f.endMs - 1_800 * S),
      end: sec(f.endMs),
      step: "30",
    });
    assert.equal(r.statusCode, 422);
    const body = JSON.parse(r.body);
    assert.equal(body.errorType, "execution");
    assert.match(body.error, /exceeds the limit/);
    const small = await inject(app, "query", { query: "1" });
    assert.equal(small.statusCode, 200);
    await app.close();
  });

  it("answers 429 with Retry-After and a JSON body when the project's slots and queue are full", async () => {
    const limiter = createProjectLimiter({ maxConcurrent: 1, maxQueued: 0, retryAfterSeconds: 3 });
    const app = await surface({}, limiter);
    let release = () => {};
    const held = limiter.run("mine", () => new Promise<void>((r) => (release = r)));
    for (const [path, form] of [
      ["query", { query: "1" }],
      ["series", { "match[]": "svc_vm_vcpus" }],
      ["labels", {}],
    ] as const) {
      const r = await inject(app, path, form);
      assert.equal(r.statusCode, 429, path);
      assert.equal(r.headers["retry-after"], "3");
      const body = JSON.parse(r.body);
      assert.equal(body.status, "error");
      assert.equal(body.errorType, "too_many_requests");
    }
    const other = await app.inject({
      method: "GET",
      url: "/v1/monitoring/projects/other/prometheus/api/v1/query?query=1",
      headers: { authorization: `Bearer ${f.other.key}` },
    });
    assert.equal(other.statusCode, 200, "another project is not held back");
    release();
    await held;
    assert.equal((await inject(app, "query", { query: "1" })).statusCode, 200);
    await app.close();
  });
});
