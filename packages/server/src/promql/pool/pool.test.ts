import assert from "node:assert/strict";
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, afterEach, before, describe, it } from "node:test";
import { MemStorage } from "../../../testing/memstorage.ts";
import { labelsFromRecord, type Queryable, writeStaleMarker } from "../../storage/interface.ts";
import { openTsdb, type Tsdb } from "../../tsdb/index.ts";
import { createEngine } from "../engine/engine.ts";
import { QueryOverloadError, QueryTimeoutError, TooManySamplesError } from "../errors.ts";
import { parse } from "../parser.ts";
import { injectTenant } from "../tenant.ts";
import { createQueryPool, type QueryPool, workersPerTenant } from "./pool.ts";
import { threadCpuSeconds } from "./thread-cpu.ts";

const STEP = 15_000;

/** What the process's fd `fd` is open on, or undefined when it is closed. */
function fdTarget(fd: number): string | undefined {
  try {
    return readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    return undefined;
  }
}

/** The process's open fds on a thread's /proc schedstat (the main thread's and each worker's kept one). */
function schedstatFds(): string[] {
  // An fd closed meanwhile (the listing's own) has no target.
  return readdirSync("/proc/self/fd").filter((fd) => fdTarget(Number(fd))?.endsWith("/schedstat"));
}

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

const HOUR = 3_600_000;
const T0 = Date.UTC(2025, 0, 1);

/** 20 counters over three hours, 15 s apart, cut into one-hour blocks plus the head, in a temp dir. */
async function tsdbWithBlocks(): Promise<{ db: Tsdb; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), "svc-pool-"));
  const db = await openTsdb(dir, {
    now: () => T0 + 3 * HOUR,
    autoCompact: false,
    blockRangeMs: HOUR,
    outOfOrderWindowMs: 0,
    mergeBlocks: false,
  });
  cleanups.push(async () => {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const app = db.appender();
  for (let t = T0; t <= T0 + 3 * HOUR; t += STEP)
    for (let k = 0; k < 20; k++)
      app.append(
        labelsFromRecord({ __name__: "m_total", i: String(k), project_id: "p" }),
        t,
        (t - T0) * (k + 1),
      );
  await app.commit();
  await db.compact();
  assert.ok(db.stats().blocks >= 2, "blocks were cut");
  return { db, dir };
}
/** `db` as a Queryable that counts the blocks its selects lend to a worker. */
function lending(db: Tsdb): { watched: Queryable; lent: () => number } {
  let lent = 0;
  const watched: Queryable = {
    querier: () => {
      const q = db.querier();
      return {
        ...q,
        select: q.select.bind(q),
        selectParts(...args) {
          const parts = q.selectParts?.(...args);
          assert.ok(parts);
          lent += parts.blocks.length;
          return parts;
        },
      };
    },
  };
  return { watched, lent: () => lent };
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

/** Seconds of work on a TSDB: quantiles of an hour of 1 s points at each second of two hours. */
const HEAVY_TSDB = "quantile_over_time(0.5, (sum(rate(m_total[5m])) + vector(time()))[1h:1s])";

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

  it("reads a TSDB's blocks in the worker and answers what the engine answers", async () => {
    const { db } = await tsdbWithBlocks();
    const engine = createEngine();
    for (const expr of ["sum by (i) (rate(m_total[5m]))", "max_over_time(m_total[30m])", "m_total"]) {
      const ast = injectTenant(parse(expr), "p");
      const want = engine.rangeQuery(db, ast, T0, T0 + 3 * HOUR, 60_000);
      assert.ok(want.value.resultType === "matrix" && want.value.result.length === 20, expr);
      assert.deepEqual(await pool.rangeQuery(db, ast, T0, T0 + 3 * HOUR, 60_000), want, expr);
    }
  });

  it("keeps the blocks a query reads until its worker has stopped, and leaves no file of them open", async () => {
    const { db, dir } = await tsdbWithBlocks();
    const blocks = () => readdirSync(join(dir, "blocks")).filter((e) => !e.endsWith(".tmp"));
    // Descriptors of this process (the workers' included: threads share them) into the blocks.
    const blockFds = () =>
      readdirSync("/proc/self/fd").filter((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`).startsWith(join(dir, "blocks"));
        } catch {
          return false; // closed meanwhile
        }
      });
    const { watched, lent } = lending(db);
    const before = blocks();
    assert.ok(before.length >= 2);
    const stop = new AbortController();
    const running = pool.rangeQuery(watched, parse(HEAVY_TSDB), T0 + HOUR, T0 + 3 * HOUR, 1_000, {
      timeoutMs: 0,
      signal: stop.signal,
    });
    await until(() => lent() > 0);
    assert.ok(db.applyRetention(T0 + 365 * 24 * HOUR) >= before.length);
    assert.deepEqual(blocks(), before, "held while the worker may read them");
    stop.abort();
    await assert.rejects(running, QueryTimeoutError);
    await until(() => blocks().length === 0);
    assert.deepEqual(blockFds(), [], "the worker opened none of the blocks' files");
  });

  it("gives a running query's blocks back once a closing pool's workers have stopped", async () => {
    const { db, dir } = await tsdbWithBlocks();
    const own = createQueryPool({ workers: 1 });
    const blocks = () => readdirSync(join(dir, "blocks")).filter((e) => !e.endsWith(".tmp"));
    const { watched, lent } = lending(db);
    const running = own.rangeQuery(watched, parse(HEAVY_TSDB), T0 + HOUR, T0 + 3 * HOUR, 1_000, {
      timeoutMs: 0,
    });
    const closedErr = assert.rejects(running, /query pool closed/);
    await until(() => lent() > 0);
    db.applyRetention(T0 + 365 * 24 * HOUR);
    assert.ok(blocks().length > 0, "held by the running query");
    await own.close();
    await closedErr;
    assert.deepEqual(blocks(), [], "released when the pool had closed");
  });

  it("counts the samples a worker reads from blocks against the limit", async () => {
    const { db } = await tsdbWithBlocks();
    const small = createQueryPool({ workers: 1, maxSamples: 1_000 });
    try {
      await assert.rejects(small.rangeQuery(db, parse("m_total"), T0, T0 + 3 * HOUR, 60_000), (e) => {
        assert.ok(e instanceof TooManySamplesError);
        assert.equal(e.limit, 1_000);
        return true;
      });
      const ok = await small.instantQuery(db, injectTenant(parse("count(m_total)"), "p"), T0 + 3 * HOUR);
      assert.equal(ok.value.resultType, "vector");
    } finally {
      await small.close();
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

  it("closes no file of the process's when a worker it terminated exits (Node closes the worker's own)", {
    skip: process.platform !== "linux" && "Linux only (/proc/self/fd)",
  }, async () => {
    // Node closes the fds a worker opened when it exits; a file opened then takes the lowest free
    // number, the worker's kept schedstat fd's. The pool once closed that number again on the
    // worker's exit event, so it closed whatever held it by then (the replacement worker's epoll fd,
    // which aborted the process; in production as likely a WAL segment or a socket). Here the main
    // thread holds its event loop until the worker's fd is gone and the number is taken again, and
    // only then lets the exit event through.
    threadCpuSeconds(); // the main thread's own kept schedstat fd, opened before the count
    const p = createQueryPool({ workers: 1 });
    const reopened: number[] = [];
    try {
      await p.warm();
      // Each thread's schedstat names its thread: the worker's, by its target, is gone even when a
      // new file took its number at once.
      const withWorker = new Map(schedstatFds().map((fd) => [Number(fd), fdTarget(Number(fd))]));
      const r = p.rangeQuery(data, parse(HEAVY), 20_000_000, 29_999_000, 1_000, { timeoutMs: 200 });
      await assert.rejects(r, QueryTimeoutError);
      const giveUpAt = Date.now() + 10_000;
      let number: number | undefined;
      while (number === undefined && Date.now() < giveUpAt)
        for (const [fd, target] of withWorker) if (fdTarget(fd) !== target) number = fd;
      assert.ok(number !== undefined, "the terminated worker's schedstat fd was closed by Node at its exit");
      // The worker's other fds (its event loop's) are freed too: open until one takes its number,
      // unless the replacement worker, started at the deadline, took it first (its epoll fd, as then).
      while (reopened.length < 64 && fdTarget(number) === undefined)
        reopened.push(openSync("/dev/null", "r"));
      assert.ok(fdTarget(number) !== undefined, "a new file took the number");
      await p.instantQuery(data, parse("count(m_total)"), 1_000_000); // the exit handled, a new worker answers
      assert.deepEqual(
        reopened.filter((fd) => fdTarget(fd) !== "/dev/null"),
        [],
        "the files opened meanwhile are still open",
      );
    } finally {
      for (const fd of reopened) if (fdTarget(fd) === "/dev/null") closeSync(fd);
      await p.close();
    }
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

  it("warm(n) starts n workers; the last starts when a second tenant's query needs it (main.ts warms one tenant's share)", async () => {
    const p = createQueryPool({ workers: 2, maxQueueWaitMs: 600_000 });
    try {
      await p.warm(workersPerTenant(2));
      assert.equal(workersPerTenant(2), 1);
      assert.deepEqual([p.stats().workers, p.stats().started], [1, 1]);
      const busy = p.rangeQuery(data, parse(HEAVY), 20_000_000, 29_999_000, 1_000, {
        tenant: "busy",
        timeoutMs: 0,
      });
      await until(() => p.stats().running === 1);
      assert.equal(p.stats().started, 1, "one tenant's query runs on the warm worker: nothing else starts");
      const light = await p.instantQuery(data, parse("sum(m_total)"), 1_000_000, { tenant: "light" });
      assert.equal(light.value.resultType, "vector");
      assert.equal(p.stats().started, 2, "the second tenant's query started the pool's last worker");
      assert.equal(p.stats().running, 1, "while the busy tenant's query still runs");
      await busy;
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

describe("query CPU of the pool's queries", () => {
  it("reads a worker's CPU through one kept schedstat fd, closed once the worker has exited", {
    skip: process.platform !== "linux" && "Linux only (/proc/thread-self/schedstat)",
  }, async () => {
    threadCpuSeconds(); // the main thread's own kept fd, opened before the count
    const before = schedstatFds().length;
    const told: number[] = [];
    const pool = createQueryPool({ workers: 1, onCpu: (_tenant, s) => told.push(s) });
    try {
      const data = store(20, 2_000);
      const ast = injectTenant(parse("sum(rate(m_total[5m]))"), "p");
      for (let i = 0; i < 3; i++) await pool.rangeQuery(data, ast, 0, 2_000 * STEP, STEP, { tenant: "p" });
      assert.equal(schedstatFds().length, before + 1, "one fd for the worker, kept across its queries");
      assert.ok(told.length === 3 && told.every((s) => s > 0 && s < 60), JSON.stringify(told));
    } finally {
      await pool.close();
    }
    await until(() => schedstatFds().length === before);
  });

  it("tells each finished query's CPU with its tenant, unless asked not to charge it", async () => {
    const told: [string, number][] = [];
    const pool = createQueryPool({ workers: 1, onCpu: (tenant, s) => told.push([tenant, s]) });
    try {
      const data = store(20, 2_000);
      const ast = injectTenant(parse("sum(rate(m_total[5m]))"), "p");
      await pool.rangeQuery(data, ast, 0, 2_000 * STEP, STEP, { tenant: "p" });
      await pool.rangeQuery(data, ast, 0, 2_000 * STEP, STEP, { tenant: "q", charge: false });
      await pool.instantQuery(data, ast, 1_000 * STEP);
      assert.equal(told[0]?.[0], "p");
      assert.ok(told[0][1] > 0 && told[0][1] < 60, `${told[0][1]}`);
      // Not charged: "q" (charge: false) and the query without a tenant.
      assert.ok(
        told.every(([t]) => t !== "q" && t !== ""),
        JSON.stringify(told),
      );
    } finally {
      await pool.close();
    }
  });
});
