import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { MemStorage } from "../../testing/memstorage.ts";
import type { RangeSeries } from "../promql/index.ts";
import { type Labels, labelsFromRecord, staleNaN } from "../storage/interface.ts";
import { RollupColumn, Rollups } from "../storage/rollups.ts";
import { openTsdb } from "../tsdb/index.ts";
import { tempDir } from "../tsdb/testutil.ts";
import { createMetricsBackend, type MetricsBackend } from "./backend.ts";
import { type MetricDef, metricIds, planRequests, planSeries, vmSelector } from "./metric-ids.ts";
import { rollupColumnsFor, rollupStepAggregate, stepAggregate } from "./windows.ts";

const S = 1000;
const T0 = Date.UTC(2026, 0, 1);
const VM = "projects/p/locations/dc-1/vms/vm-1";

interface Sink {
  append(labels: Labels, tMs: number, value: number): void;
  appendStale(labels: Labels, tMs: number): void;
}

/** One VM with gaps, jitter, a counter reset, a staleness marker, a resize and a zero capacity. */
function storage(): MemStorage {
  const m = new MemStorage();
  fillVm(m, 400);
  return m;
}

function fillVm(m: Sink, samples: number): void {
  const base = { project_id: "p", vm: VM, vm_id: "vm-1", location: "dc-1", source: "hypervisor" };
  const L = (name: string, extra: Record<string, string> = {}) =>
    labelsFromRecord({ ...base, __name__: name, ...extra });
  let disk = 0;
  for (let i = 0; i < samples; i++) {
    if (i >= 100 && i < 130) continue; // samples never delivered
    const t = T0 + i * 30 * S + ((i * 7919) % 5) * S; // a few seconds of jitter
    m.append(L("svc_vm_cpu_utilization_pct"), t, 10 + ((i * 37) % 61) / 3);
    m.append(L("svc_vm_memory_used_bytes"), t, 2e9 + 1e6 * (i % 17));
    m.append(L("svc_vm_memory_total_bytes"), t, i >= 300 && i < 310 ? 0 : 4e9);
    m.append(L("svc_vm_vcpus"), t, i < 200 ? 2 : 4);
    disk = i === 250 ? 1234 : disk + 4096 * (1 + (i % 3)); // a reset at 250
    m.append(L("svc_vm_disk_read_bytes_total", { device: "vda" }), t, disk);
    m.append(L("svc_vm_disk_read_bytes_total", { device: "vdb" }), t, i * 512);
    if (i % 10 === 0) m.append(L("svc_vm_last_observation_timestamp_seconds"), t, t / S);
    // Filesystems: "/" from an agent that sends df's available bytes, "/old" from one that does not,
    // "/up" from one upgraded half-way (available bytes from sample 200 on).
    const G = (name: string, mountpoint: string) =>
      L(name, { source: "guest_agent", mountpoint, fstype: "ext4", device: `/dev/vd${mountpoint.length}` });
    for (const mp of ["/", "/old", "/up"]) {
      m.append(G("svc_vm_filesystem_size_bytes", mp), t, 1e10);
      m.append(G("svc_vm_filesystem_used_bytes", mp), t, 1e9 + 1e6 * (i % 23));
      if (mp === "/" || (mp === "/up" && i >= 200))
        m.append(G("svc_vm_filesystem_avail_bytes", mp), t, 2.5e9 - 1e6 * (i % 7));
    }
  }
  m.appendStale(L("svc_vm_cpu_utilization_pct"), T0 + 350 * 30 * S + 15 * S);
}

async function viaPlan(
  b: MetricsBackend,
  def: MetricDef,
  startMs: number,
  endMs: number,
  stepS: number,
): Promise<RangeSeries[]> {
  const plan = def.plan(stepS, 30);
  const reqs = planRequests(plan);
  const got = await b.windowAggregates(
    "p",
    [{ type: "=", name: "vm", value: VM }],
    reqs,
    startMs,
    endMs,
    stepS * S,
  );
  const ok = got.map((o) => {
    if (!o.ok) throw o.error;
    return o.series;
  });
  return planSeries(plan, ok);
}

const key = (s: RangeSeries) => s.metric.map((l) => `${l.name}=${l.value}`).join(",");

describe("windowAggregates (one pass over raw samples)", () => {
  const b = createMetricsBackend({ storage: storage() });
  for (const stepS of [30, 60, 90, 300, 1800]) {
    it(`gives the PromQL range query's exact series and values for every metricId at ${stepS} s`, async () => {
      let nonEmpty = 0;
      for (const def of metricIds.values()) {
        // Unaligned start and an end past the data, so windows straddle gaps and edges.
        const startMs = T0 + 7 * S;
        const endMs = T0 + 420 * 30 * S;
        const want = await b.rangeQuery(
          "p",
          def.promql(vmSelector(VM), stepS, 30),
          startMs,
          endMs,
          stepS * S,
        );
        assert.equal(want.value.resultType, "matrix");
        const expected = want.value.resultType === "matrix" ? want.value.result : [];
        const got = await viaPlan(b, def, startMs, endMs, stepS);
        if (expected.length > 0) nonEmpty++;
        assert.deepEqual(got.map(key).sort(), expected.map(key).sort(), def.id);
        for (const e of expected) {
          const g = got.find((s) => key(s) === key(e));
          assert.ok(g, `${def.id} ${key(e)}`);
          assert.deepEqual([...g.timestamps], [...e.timestamps], `${def.id} step times`);
          // Bit-for-bit (NaN = NaN, ±Inf kept): the RPC and the PromQL API must agree exactly.
          for (let i = 0; i < e.values.length; i++)
            assert.ok(
              Object.is(g.values[i], e.values[i]),
              `${def.id} at ${e.timestamps[i]}: ${g.values[i]} vs ${e.values[i]}`,
            );
        }
      }
      // Utilization, vCPUs, memory (3), disk read bytes, last observed, filesystem (3): the comparison is
      // not vacuous.
      assert.equal(nonEmpty, 10);
      // Filesystem usage is df's used ÷ (used + available) where available bytes were sent (~29 %
      // here), used ÷ size where they were not (~10 %); an agent upgraded midway has both.
      const fs = await viaPlan(b, metricIds.get("filesystem_used_pct")!, T0, T0 + 420 * 30 * S, stepS);
      const at = (mp: string) => fs.find((x) => x.metric.some((l) => l.value === mp))!.values;
      assert.ok([...at("/")].every((v) => v > 28 && v < 31));
      assert.ok([...at("/old")].every((v) => v > 9.9 && v < 10.3));
      const up = [...at("/up")];
      assert.ok(up.some((v) => v < 10.3) && up.some((v) => v > 28));
    });
  }

  it("leaves steps without samples absent, never 0", () => {
    const t = Float64Array.from([10, 20, 100]);
    const v = Float64Array.from([1, 3, 5]);
    const r = stepAggregate(t, v, { startMs: 20, stepMs: 20, points: 5 }, 20, "avg_over_time");
    assert.deepEqual([...r.timestamps], [20, 100]);
    assert.deepEqual([...r.values], [2, 5]);
  });

  it("refuses rollups read without the columns a function needs, instead of answering from NaN", () => {
    const r = new Rollups(
      20,
      4,
      rollupColumnsFor("avg_over_time") | RollupColumn.firstT | RollupColumn.lastT,
    );
    r.addBucket(20, 2, 11, 1, 19, 3, Number.NaN, 4, Number.NaN);
    r.addBucket(40, 1, 30, 5, 30, 5, Number.NaN, 5, Number.NaN);
    const grid = { startMs: 20, stepMs: 20, points: 2 };
    const avg = rollupStepAggregate(r, grid, 20, "avg_over_time");
    assert.deepEqual([...avg.values], [2, 5]);
    assert.throws(
      () => rollupStepAggregate(r, grid, 20, "max_over_time"),
      /max_over_time needs rollup columns/,
    );
    assert.throws(() => rollupStepAggregate(r, grid, 40, "rate"), /rate needs rollup columns/);
  });

  it("reports requests past the deadline as timeout outcomes, keeping what was served before", async () => {
    let clock = 0;
    let reads = 0;
    const mem = storage();
    const slow = (readMs: number) =>
      createMetricsBackend({
        storage: {
          querier() {
            const q = mem.querier();
            return {
              select: (...a: Parameters<typeof q.select>) => {
                reads++;
                clock += readMs;
                return q.select(...a);
              },
              labelNames: (...a: Parameters<typeof q.labelNames>) => q.labelNames(...a),
              labelValues: (...a: Parameters<typeof q.labelValues>) => q.labelValues(...a),
            };
          },
        },
        // Each look at the clock costs 3 s: the sweeps themselves run into the deadline.
        now: () => (clock += 3_000),
      });
    const req = (metric: string) => ({ metric, fn: "avg_over_time" as const, windowMs: 60 * S });
    const reqs = [req("svc_vm_cpu_utilization_pct"), req("svc_vm_memory_used_bytes"), req("svc_vm_vcpus")];
    const call = (b: MetricsBackend) =>
      b.windowAggregates("p", [{ type: "=", name: "vm", value: VM }], reqs, T0, T0 + 3600 * S, 60 * S, {
        timeoutMs: 10_000,
      });
    const status = (out: Awaited<ReturnType<typeof call>>) => out.map((o) => (o.ok ? "ok" : o.error.name));
    // Deadline at 13 s; checks at 6 s (read), 9 s, 12 s, 15 s.
    assert.deepEqual(status(await call(slow(0))), ["ok", "ok", "QueryTimeoutError"]);
    assert.equal(reads, 1, "one store read for all metrics");
    // A read that overruns the deadline stops every request.
    clock = 0;
    assert.deepEqual(status(await call(slow(11_000))), [
      "QueryTimeoutError",
      "QueryTimeoutError",
      "QueryTimeoutError",
    ]);
  });
});

describe("windowAggregates over the TSDB's rollups", () => {
  it("gives the PromQL range query's values at 30-minute steps from blocks, merged blocks and the head", async (t) => {
    const dir = tempDir();
    t.after(dir.cleanup);
    // Two days of the VM above (samples through T0 + 48 h), cut into blocks and merged.
    const N = 5760;
    let now = T0;
    const db = await openTsdb(dir.dir, { now: () => now, autoCompact: false });
    t.after(() => db.close());
    const rows: [Labels, number, number][] = [];
    fillVm(
      {
        append: (l, ts, v) => rows.push([l, ts, v]),
        appendStale: (l, ts) => rows.push([l, ts, staleNaN()]),
      },
      N,
    );
    rows.sort((x, y) => x[1] - y[1]);
    for (let i = 0; i < rows.length; ) {
      const until = rows[i][1] + 3_600_000;
      now = until;
      const app = db.appender();
      for (; i < rows.length && rows[i][1] < until; i++) app.append(...rows[i]);
      const r = await app.commit();
      assert.deepEqual(r.refused, {});
      await db.compact();
    }
    assert.ok(db.stats().blocks < 24, "blocks were merged");
    const withRollups = createMetricsBackend({ storage: db, rollupResolutionMs: 1_800_000 });
    const reads: string[] = [];
    const spy = createMetricsBackend({
      storage: {
        querier() {
          const q = db.querier();
          return {
            select: (...a: Parameters<typeof q.select>) => {
              reads.push("raw");
              return q.select(...a);
            },
            selectRollups: (...a: Parameters<NonNullable<typeof q.selectRollups>>) => {
              reads.push("rollups");
              return q.selectRollups?.(...a) ?? [];
            },
            labelNames: (...a: Parameters<typeof q.labelNames>) => q.labelNames(...a),
            labelValues: (...a: Parameters<typeof q.labelValues>) => q.labelValues(...a),
          };
        },
      },
      rollupResolutionMs: 1_800_000,
    });
    const stepS = 1800;
    const startMs = T0 + stepS * S;
    const endMs = T0 + N * 30 * S + 2 * stepS * S;
    let compared = 0;
    for (const def of metricIds.values()) {
      const want = await withRollups.rangeQuery(
        "p",
        def.promql(vmSelector(VM), stepS, 30),
        startMs,
        endMs,
        stepS * S,
      );
      const expected = want.value.resultType === "matrix" ? want.value.result : [];
      const got = await viaPlan(spy, def, startMs, endMs, stepS);
      assert.deepEqual(got.map(key).sort(), expected.map(key).sort(), def.id);
      for (const e of expected) {
        const g = got.find((s) => key(s) === key(e));
        assert.ok(g);
        assert.deepEqual([...g.timestamps], [...e.timestamps], `${def.id} step times`);
        for (let i = 0; i < e.values.length; i++) {
          // Averages of fractional values to rounding (storage/rollups.ts); the rest bit for bit.
          const fractional = def.id === "cpu_utilization_pct" || def.id === "memory_used_pct";
          const ok = fractional
            ? Math.abs(g.values[i] - e.values[i]) <= 1e-12 * Math.abs(e.values[i]) ||
              (Number.isNaN(g.values[i]) && Number.isNaN(e.values[i]))
            : Object.is(g.values[i], e.values[i]);
          assert.ok(ok, `${def.id} at ${e.timestamps[i]}: ${g.values[i]} vs ${e.values[i]}`);
          compared++;
        }
      }
    }
    assert.ok(compared > 500, `compared ${compared} points`);
    assert.ok(reads.includes("rollups") && !reads.includes("raw"), reads.join());
  });
});
