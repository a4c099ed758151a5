/**
 * Issue 19: a heavy Prometheus-API query runs in a worker thread, so the event loop keeps serving
 * everyone else while it runs; its deadline terminates the worker; a query that would load too many
 * samples is refused with 422 naming the limit. Asserted by order and progress, never by duration.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { pushRemoteWrite } from "@svc/remotewrite";
import Fastify from "fastify";
import pino from "pino";
import { type PromFixture, S, startPromFixture } from "../../testing/promapi-fixture.ts";
import { createMetricsBackend } from "../metrics/backend.ts";
import { createProjectLimiter } from "../metrics/concurrency.ts";
import { createQueryPool, type QueryPool } from "../promql/index.ts";
import { promApiRoutes } from "./plugin.ts";

const sec = (ms: number) => String(ms / 1000);

/**
 * Seconds of work on any machine: a one-second subquery over two hours (the project's CPU rate on a
 * time ramp), sorted for a median at each of 10,000 steps (~70 million values sorted).
 */
const HEAVY =
  "quantile_over_time(0.5, (vector(time()) + scalar(sum(rate(svc_vm_cpu_seconds_total[5m]))))[2h:1s])";

function heavy(f: PromFixture, extra: Record<string, string> = {}) {
  return f.post("mine", "api/v1/query_range", {
    query: HEAVY,
    start: sec(f.endMs - 9_999 * S),
    end: sec(f.endMs),
    step: "1",
    ...extra,
  });
}

async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setTimeout(r, 1));
}

describe("Prometheus API queries off the event loop", () => {
  let f: PromFixture;
  let pool: QueryPool;
  before(async () => {
    f = await startPromFixture({ queryWorkers: 2 });
    const p = f.t.app.queryPool;
    assert.ok(p, "the app evaluates Prometheus-API queries in a pool");
    pool = p;
    await pool.warm();
  });
  after(() => f?.close());

  it("serves /healthz, another project's RPC and query, and a remote write while a heavy query runs", async () => {
    const order: string[] = [];
    const done = <T>(name: string, p: Promise<T>) =>
      p.then((v) => {
        order.push(name);
        return v;
      });
    const big = done("heavy", heavy(f));
    // Progress, not time: the heavy query is in a worker before the others start.
    await until(() => pool.stats().running === 1);
    const others = await Promise.all([
      done(
        "healthz",
        fetch(`${f.t.baseUrl}/healthz`).then((r) => r.status),
      ),
      done(
        "ListVMMonitoring",
        f.t
          .clients(f.other.owner.session)
          .monitoring.listVMMonitoring({ projectName: f.other.projectName, pageSize: 10 })
          .then((r) => r.vms.length),
      ),
      done(
        "remote write",
        pushRemoteWrite(`${f.t.baseUrl}/v1/ingest/prometheus/api/v1/write`, f.t.app.config.collectorToken, {
          timeseries: [
            {
              labels: [
                { name: "__name__", value: "svc_vm_vcpus" },
                { name: "vm", value: f.other.vms[0] },
              ],
              samples: [{ timestampMs: f.endMs + S, value: 2000 }],
            },
          ],
          metadata: [],
        }).then((r) => (r.status === 204 ? 204 : `${r.status} ${r.body}`)),
      ),
      done(
        "other project's query",
        f
          .get("other", "api/v1/query", { query: "sum(svc_vm_vcpus)", time: sec(f.endMs) })
          .then((r) => r.status),
      ),
    ]);
    assert.deepEqual(others, [200, 2, 204, 200]);
    assert.equal(order.includes("heavy"), false, `the heavy query finished first: ${order.join(", ")}`);
    assert.equal(pool.stats().running, 1, "the heavy query is still being evaluated");
    const r = await big;
    // On a slow machine it may reach the 10 s deadline; either way it answered last.
    assert.ok(r.status === 200 || r.status === 503, `${r.status} ${r.text.slice(0, 200)}`);
    assert.equal(order.at(-1), "heavy");
  });

  it("answers 503 at the deadline and terminates the worker that was evaluating", async () => {
    const before = pool.stats();
    const r = await heavy(f, { timeout: "300ms" });
    assert.equal(r.status, 503, r.text.slice(0, 300));
    assert.equal(r.json.errorType, "timeout");
    const s = pool.stats();
    assert.equal(s.running, 0, "no evaluation outlives the 503");
    assert.equal(s.replaced, before.replaced + 1, "the worker was terminated");
    assert.equal(s.started, before.started + 1, "and a fresh one took its place");
    const ok = await f.get("mine", "api/v1/query", { query: "sum(svc_vm_vcpus)", time: sec(f.endMs) });
    assert.equal(ok.status, 200);
  });

  it("stops the evaluation, terminating its worker, when the client goes away", async () => {
    const before = pool.stats();
    const gone = new AbortController();
    const form = new URLSearchParams({
      query: HEAVY,
      start: sec(f.endMs - 9_999 * S),
      end: sec(f.endMs),
      step: "1",
    });
    const r = fetch(`${f.t.baseUrl}/v1/monitoring/projects/mine/prometheus/api/v1/query_range`, {
      method: "POST",
      headers: { authorization: `Bearer ${f.mine.key}`, "content-type": "application/x-www-form-urlencoded" },
      body: form.toString(),
      signal: gone.signal,
    }).then(
      () => "answered",
      (e: Error) => e.name,
    );
    await until(() => pool.stats().running === 1);
    gone.abort();
    assert.equal(await r, "AbortError");
    await until(() => pool.stats().running === 0);
    // Replaced, not finished: the heavy query runs for seconds.
    assert.equal(pool.stats().replaced, before.replaced + 1);
  });

  describe("with a small pool", () => {
    async function surface(poolOptions: Parameters<typeof createQueryPool>[0]) {
      const small = createQueryPool(poolOptions);
      const app = Fastify();
      await app.register(
        promApiRoutes({
          db: f.t.app.db.db,
          metrics: createMetricsBackend({ storage: f.t.app.tsdb, queryPool: small }),
          limiter: createProjectLimiter(),
          now: f.t.clock.now,
          log: pino({ level: "silent" }),
          operatorToken: f.t.app.config.adminToken,
        }),
      );
      app.addHook("onClose", () => small.close());
      const post = (form: Record<string, string>, path = "query") =>
        app.inject({
          method: "POST",
          url: `/v1/monitoring/projects/mine/prometheus/api/v1/${path}`,
          headers: {
            authorization: `Bearer ${f.mine.key}`,
            "content-type": "application/x-www-form-urlencoded",
          },
          payload: new URLSearchParams(form).toString(),
        });
      return { app, pool: small, post };
    }

    it("refuses a query that would load more samples than the limit with 422 naming it", async () => {
      const s = await surface({ workers: 1, maxSamples: 100 });
      try {
        // Two VMs × 61 samples of half an hour = 122 samples; the window (t − 30m, t] holds 120 of them.
        const r = await s.post({ query: "sum(rate(svc_vm_cpu_seconds_total[30m]))", time: sec(f.endMs) });
        assert.equal(r.statusCode, 422, r.body);
        assert.deepEqual(JSON.parse(r.body), {
          status: "error",
          errorType: "execution",
          error:
            "query processing would load too many samples into memory in query execution: the limit is 100 samples per query; it had asked for 120 samples when it was stopped [TOO_MANY_SAMPLES]",
        });
        const small = await s.post({ query: "sum(rate(svc_vm_cpu_seconds_total[10m]))", time: sec(f.endMs) });
        assert.equal(small.statusCode, 200, small.body);
      } finally {
        await s.app.close();
      }
    });

    it("answers 429 with Retry-After, not a 5xx, when no worker comes free within the wait", async () => {
      const s = await surface({ workers: 1, maxQueueWaitMs: 50, retryAfterSeconds: 4 });
      try {
        await s.pool.warm();
        const held = s.post(
          {
            query: "quantile_over_time(0.5, vector(time())[2h:1s])",
            start: sec(f.endMs - 9_999 * S),
            end: sec(f.endMs),
            step: "1",
          },
          "query_range",
        );
        await until(() => s.pool.stats().running === 1);
        // A cheap query is evaluated inline (promql/cost.ts) and answers at once; one that needs a
        // worker (a subquery always does) waits, then is refused.
        const cheap = await s.post({ query: "1" });
        assert.equal(cheap.statusCode, 200, cheap.body);
        const r = await s.post({ query: "max_over_time(vector(1)[1m:10s])" });
        assert.equal(r.statusCode, 429, r.body);
        assert.equal(r.headers["retry-after"], "4");
        assert.equal(JSON.parse(r.body).errorType, "too_many_requests");
        await s.app.close();
        await held.catch(() => undefined);
      } finally {
        await s.app.close();
      }
    });
  });
});
