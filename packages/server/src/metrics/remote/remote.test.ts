import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ENGINE_KINDS, engineSkipReason, type RunningEngine, startEngine } from "../../../testing/engines.ts";
import { MemStorage } from "../../../testing/memstorage.ts";
import { createQueryPool, type QueryResult, type QueryValue, type RangeSeries } from "../../promql/index.ts";
import {
  type LabelMatcher,
  type Labels,
  labelsFromRecord,
  type Storage,
  staleNaN,
} from "../../storage/interface.ts";
import {
  createMetricsBackend,
  type LatestSample,
  type MetricsBackend,
  type WindowRequest,
} from "../backend.ts";
import { createRemoteMetricsBackend, type RemoteMetricsBackend } from "./backend.ts";
import { MetricsEngineUnavailableError } from "./errors.ts";
import { createRemoteWriteStorage } from "./forwarder.ts";
import { resolveRemoteMetricsOptions } from "./options.ts";

/**
 * The remote backend against each real engine Debian ships: samples go in through the remote-write
 * forwarder, every MetricsBackend read comes back through the engine, and the answers are the
 * embedded backend's over the same samples.
 */
const S = 1000;
const MIN = 60 * S;
// Whole minutes in the recent past: inside VictoriaMetrics' retention, and one Prometheus head.
const T0 = Math.floor((Date.now() - 6 * 3_600_000) / MIN) * MIN;
const N = 400; // samples per series, 30 s apart (3 h 20 min)
const END = T0 + N * 30 * S;
const vmName = (p: string, vm: string) => `projects/${p}/locations/dc-1/vms/${vm}`;

interface Sample {
  readonly labels: Labels;
  readonly t: number;
  readonly v: number;
}

/** Two projects, two VMs each: gaps, jitter, a counter reset, series that end with a staleness marker. */
function dataset(): Sample[][] {
  const slices: Sample[][] = [];
  const L = (p: string, vm: string, name: string, extra: Record<string, string> = {}) =>
    labelsFromRecord({
      __name__: name,
      project_id: p,
      vm: vmName(p, vm),
      vm_id: vm,
      location: "dc-1",
      source: "hypervisor",
      ...extra,
    });
  let disk = 0;
  for (let i = 0; i < N; i++) {
    const slice: Sample[] = [];
    for (const [p, vm] of [
      ["p", "vm-1"],
      ["p", "vm-2"],
      ["q", "vm-1"],
    ] as const) {
      if (vm === "vm-2" && i >= 100 && i < 130) continue; // samples never delivered
      // A few seconds of jitter; every fifth sample sits exactly on a 30 s boundary.
      const t = T0 + i * 30 * S + ((i * 7919) % 5) * S;
      const k = p === "q" ? 1000 : vm === "vm-2" ? 2 : 1;
      if (i <= 350 || vm !== "vm-1" || p !== "p")
        slice.push({ labels: L(p, vm, "svc_vm_cpu_utilization_pct"), t, v: k * (10 + ((i * 37) % 61) / 3) });
      slice.push({ labels: L(p, vm, "svc_vm_memory_used_bytes"), t, v: k * (2e9 + 1e6 * (i % 17)) });
      disk = i === 250 ? 1234 : disk + 4096 * (1 + (i % 3)); // a counter reset at 250
      slice.push({ labels: L(p, vm, "svc_vm_disk_read_bytes_total", { device: "vda" }), t, v: k * disk });
    }
    // p/vm-1's cpu series ends: a staleness marker 15 s after its last sample.
    if (i === 351)
      slice.push({
        labels: L("p", "vm-1", "svc_vm_cpu_utilization_pct"),
        t: T0 + 350 * 30 * S + 15 * S,
        v: staleNaN(),
      });
    slices.push(slice);
  }
  return slices;
}

/** Appends through an Appender (keeping each series' Labels object, as the ingester does). */
async function write(storage: Storage, slices: readonly Sample[][], per = 20): Promise<void> {
  for (let i = 0; i < slices.length; i += per) {
    const app = storage.appender();
    for (const slice of slices.slice(i, i + per)) for (const s of slice) app.append(s.labels, s.t, s.v);
    await app.commit();
  }
}

function embedded(slices: readonly Sample[][]): MetricsBackend {
  const m = new MemStorage();
  for (const slice of slices) for (const s of slice) m.append(s.labels, s.t, s.v);
  return createMetricsBackend({ storage: m });
}

const key = (l: Labels) => l.map((x) => `${x.name}=${x.value}`).join(",");

function close(a: number, b: number): boolean {
  if (Number.isNaN(a) || Number.isNaN(b)) return Number.isNaN(a) && Number.isNaN(b);
  return a === b || Math.abs(a - b) <= 1e-9 * Math.max(Math.abs(a), Math.abs(b));
}

function assertSeriesEqual(got: readonly RangeSeries[], want: readonly RangeSeries[], what: string): void {
  const g = [...got].sort((a, b) => (key(a.metric) < key(b.metric) ? -1 : 1));
  const w = [...want].sort((a, b) => (key(a.metric) < key(b.metric) ? -1 : 1));
  assert.deepEqual(
    g.map((s) => key(s.metric)),
    w.map((s) => key(s.metric)),
    `${what}: series`,
  );
  for (let i = 0; i < w.length; i++) {
    assert.deepEqual(
      [...g[i].timestamps],
      [...w[i].timestamps],
      `${what}: timestamps of ${key(w[i].metric)}`,
    );
    for (let j = 0; j < w[i].values.length; j++)
      assert.ok(
        close(g[i].values[j], w[i].values[j]),
        `${what}: ${key(w[i].metric)} at ${w[i].timestamps[j]}: got ${g[i].values[j]}, want ${w[i].values[j]}`,
      );
  }
}

function asSeries(v: QueryValue): RangeSeries[] {
  if (v.resultType === "matrix") return v.result;
  if (v.resultType === "vector")
    return v.result.map((s) => ({
      metric: s.metric,
      timestamps: Float64Array.of(s.t),
      values: Float64Array.of(s.v),
    }));
  if (v.resultType === "scalar")
    return [{ metric: [], timestamps: Float64Array.of(v.result.t), values: Float64Array.of(v.result.v) }];
  return [];
}

function assertResultEqual(got: QueryResult, want: QueryResult, what: string): void {
  assert.equal(got.value.resultType, want.value.resultType, `${what}: result type`);
  assertSeriesEqual(asSeries(got.value), asSeries(want.value), what);
}

const QUERIES = [
  "svc_vm_cpu_utilization_pct",
  "rate(svc_vm_disk_read_bytes_total[5m])",
  "sum by (vm) (rate(svc_vm_disk_read_bytes_total[2m]))",
  "avg_over_time(svc_vm_memory_used_bytes[7m] offset 5m)",
  "max_over_time(rate(svc_vm_disk_read_bytes_total[2m])[30m:1m])",
  "svc_vm_cpu_utilization_pct / on(vm) group_left svc_vm_memory_used_bytes",
  'count(svc_vm_cpu_utilization_pct{project_id="q"})',
  'svc_vm_memory_used_bytes{project_id="p", vm=~".*vm-2"}',
];

const WINDOWS: WindowRequest[] = [
  { metric: "svc_vm_cpu_utilization_pct", fn: "avg_over_time", windowMs: 60 * S },
  { metric: "svc_vm_cpu_utilization_pct", fn: "max_over_time", windowMs: 5 * MIN },
  { metric: "svc_vm_memory_used_bytes", fn: "last_over_time", windowMs: 90 * S },
  { metric: "svc_vm_disk_read_bytes_total", fn: "rate", windowMs: 5 * MIN },
  { metric: "svc_vm_disk_read_bytes_total", fn: "max_over_time", windowMs: 30 * S },
];

for (const kind of ENGINE_KINDS) {
  describe(`remote metrics backend on ${kind}`, { skip: engineSkipReason(kind) }, () => {
    let engine: RunningEngine;
    let remote: RemoteMetricsBackend;
    let want: MetricsBackend;
    const slices = dataset();

    before(async () => {
      engine = await startEngine(kind);
      const options = resolveRemoteMetricsOptions({
        remoteWriteUrl: engine.remoteWriteUrl,
        queryUrl: engine.queryUrl,
      });
      await write(createRemoteWriteStorage(options), slices);
      await engine.flush();
      remote = createRemoteMetricsBackend({ options });
      want = embedded(slices);
    });
    after(async () => {
      await engine?.stop();
    });

    it("instantQuery answers as the embedded backend, for each query and time", async () => {
      for (const expr of QUERIES)
        for (const at of [T0 + 37 * MIN, T0 + 175 * MIN + 15 * S, T0 + 178 * MIN, END + 2 * MIN]) {
          const [g, w] = await Promise.all([
            remote.instantQuery("p", expr, at),
            want.instantQuery("p", expr, at),
          ]);
          assertResultEqual(g, w, `${expr} at T0+${(at - T0) / S}s`);
        }
    });

    it("rangeQuery answers as the embedded backend (rate, subquery, a series that ended)", async () => {
      for (const expr of QUERIES) {
        const args = [T0 + 10 * MIN, END, 60 * S] as const;
        const [g, w] = await Promise.all([
          remote.rangeQuery("p", expr, ...args),
          want.rangeQuery("p", expr, ...args),
        ]);
        assertResultEqual(g, w, expr);
      }
    });

    it("rangeQuery through the worker pool answers as inline", async () => {
      const pool = createQueryPool({ workers: 1 });
      try {
        const pooled = createRemoteMetricsBackend({
          options: resolveRemoteMetricsOptions({
            remoteWriteUrl: engine.remoteWriteUrl,
            queryUrl: engine.queryUrl,
          }),
          queryPool: pool,
        });
        const expr = "sum by (vm) (rate(svc_vm_disk_read_bytes_total[5m]))";
        const [g, w] = await Promise.all([
          pooled.rangeQuery("p", expr, T0, END, 120 * S),
          want.rangeQuery("p", expr, T0, END, 120 * S),
        ]);
        assertResultEqual(g, w, expr);
      } finally {
        await pool.close();
      }
    });

    it("windowAggregates equal the embedded sweep, with gaps and steps on sample timestamps", async () => {
      const m: LabelMatcher[] = [{ type: "=~", name: "vm", value: ".*" }];
      for (const [start, step] of [
        [T0, 60 * S],
        [T0 + 30 * S, 30 * S],
        [T0 + 7 * S, 300 * S],
      ] as const) {
        const [g, w] = await Promise.all([
          remote.windowAggregates("p", m, WINDOWS, start, END, step),
          want.windowAggregates("p", m, WINDOWS, start, END, step),
        ]);
        g.forEach((o, i) => {
          const wo = w[i];
          assert.ok(o.ok, `${WINDOWS[i].fn}: ${o.ok ? "" : o.error.message}`);
          assert.ok(wo.ok);
          assertSeriesEqual(o.series, wo.series, `${WINDOWS[i].fn}(${WINDOWS[i].metric}) step ${step}`);
        });
      }
    });

    it("select, series, labelNames and labelValues answer as the embedded backend", async () => {
      const m: LabelMatcher[] = [{ type: "=", name: "__name__", value: "svc_vm_cpu_utilization_pct" }];
      const [gs, ws] = await Promise.all([
        remote.select("p", m, T0 + 170 * MIN, END),
        want.select("p", m, T0 + 170 * MIN, END),
      ]);
      assertSeriesEqual(
        gs.map((s) => ({ metric: s.labels, timestamps: s.timestamps, values: s.values })),
        ws.map((s) => ({ metric: s.labels, timestamps: s.timestamps, values: s.values })),
        "select",
      );
      const sets = [m, [{ type: "=", name: "device", value: "vda" } as const]];
      assert.deepEqual(await remote.series("p", sets, T0, END), await want.series("p", sets, T0, END));
      assert.deepEqual(await remote.labelNames("p", [], T0, END), await want.labelNames("p", [], T0, END));
      assert.deepEqual(
        await remote.labelNames("p", sets, T0, END),
        await want.labelNames("p", sets, T0, END),
      );
      for (const name of ["vm", "__name__", "device", "project_id"])
        assert.deepEqual(
          await remote.labelValues("p", name, [], T0, END),
          await want.labelValues("p", name, [], T0, END),
          name,
        );
    });

    it("latest never reports a series that ended with a staleness marker", async () => {
      const m: LabelMatcher[] = [{ type: "=", name: "__name__", value: "svc_vm_cpu_utilization_pct" }];
      for (const at of [T0 + 175 * MIN, T0 + 175 * MIN + 20 * S, END]) {
        const [g, w] = await Promise.all([
          remote.latest("p", m, at, 5 * MIN),
          want.latest("p", m, at, 5 * MIN),
        ]);
        // As series, compared with assertSeriesEqual's tolerance: VictoriaMetrics keeps 12 significant digits.
        const series = (x: LatestSample[]) =>
          x.map((s) => ({
            metric: s.labels,
            timestamps: Float64Array.of(s.timestampMs),
            values: Float64Array.of(s.value),
          }));
        assertSeriesEqual(series(g), series(w), `latest at T0+${(at - T0) / S}s`);
      }
      const ended = await remote.latest("p", m, T0 + 175 * MIN + 20 * S, 5 * MIN);
      assert.deepEqual(
        ended.map((s) => s.labels.find((l) => l.name === "vm")?.value),
        [vmName("p", "vm-2")],
      );
    });

    it("never returns another project's series; a project_id matcher only narrows", async () => {
      const r = await remote.instantQuery("p", '{__name__=~"svc_vm_.*"}', END);
      assert.ok(r.value.resultType === "vector" && r.value.result.length > 0);
      for (const s of asSeries(r.value)) {
        assert.ok(!s.metric.some((l) => l.name === "project_id"), "the tenant label is stripped");
        assert.match(s.metric.find((l) => l.name === "vm")?.value ?? "", /^projects\/p\//);
      }
      const other = await remote.instantQuery("p", '{__name__=~"svc_vm_.*", project_id="q"}', END);
      assert.deepEqual(asSeries(other.value), []);
      const orQ = await remote.rangeQuery(
        "p",
        "svc_vm_memory_used_bytes or on() vector(1)",
        END - MIN,
        END,
        MIN,
      );
      for (const s of asSeries(orQ.value)) assert.doesNotMatch(key(s.metric), /projects\/q\//);
      assert.deepEqual(
        await remote.series("p", [[{ type: "=", name: "project_id", value: "q" }]], T0, END),
        [],
      );
      assert.deepEqual(
        await remote.select("p", [{ type: "=", name: "vm", value: vmName("q", "vm-1") }], T0, END),
        [],
      );
      assert.deepEqual(await remote.labelValues("q", "vm", [], T0, END), [vmName("q", "vm-1")]);
      const wq = await remote.windowAggregates("q", [], WINDOWS.slice(0, 1), T0, END, 300 * S);
      assert.ok(wq[0].ok);
      for (const s of wq[0].series) assert.match(key(s.metric), /projects\/q\//);
    });

    it("a query over the sample budget is refused as the embedded engine refuses it", async () => {
      const small = createRemoteMetricsBackend({
        options: resolveRemoteMetricsOptions({
          remoteWriteUrl: engine.remoteWriteUrl,
          queryUrl: engine.queryUrl,
          maxSamples: 100,
        }),
      });
      await assert.rejects(small.instantQuery("p", "max_over_time(svc_vm_memory_used_bytes[1h])", END), {
        name: "TooManySamplesError",
      });
    });
  });

  describe(`remote metrics backend on ${kind} while the engine is down`, {
    skip: engineSkipReason(kind),
  }, () => {
    let engine: RunningEngine;
    let storage: Storage;
    let remote: RemoteMetricsBackend;
    const labels = labelsFromRecord({
      __name__: "svc_vm_vcpus",
      project_id: "p",
      vm: vmName("p", "vm-9"),
      vm_id: "vm-9",
      location: "dc-1",
      source: "hypervisor",
    });
    const t = Math.floor(Date.now() / S) * S - 10 * MIN;

    before(async () => {
      engine = await startEngine(kind);
      const options = resolveRemoteMetricsOptions({
        remoteWriteUrl: engine.remoteWriteUrl,
        queryUrl: engine.queryUrl,
        writeRetryBudgetMs: 300,
        writeBackoffMs: 50,
        readTimeoutMs: 2_000,
      });
      storage = createRemoteWriteStorage(options);
      remote = createRemoteMetricsBackend({ options });
      await remote.ready();
      await engine.down();
    });
    after(async () => {
      await engine?.stop();
    });

    it("does not acknowledge a batch, answers reads with a clear unavailable error, and takes the retried batch once", async () => {
      const batch = () => {
        const app = storage.appender();
        app.append(labels, t, 2);
        app.append(labels, t + 30 * S, 4);
        return app.commit();
      };
      await assert.rejects(batch(), (err: Error) => {
        assert.ok(err instanceof MetricsEngineUnavailableError);
        assert.match(err.message, /did not take the samples/);
        return true;
      });
      const unavailable = (err: Error) => {
        assert.ok(err instanceof MetricsEngineUnavailableError, `${err.name}: ${err.message}`);
        assert.match(err.message, /metrics engine at http:\/\/127\.0\.0\.1:\d+ is unavailable/);
        return true;
      };
      await assert.rejects(remote.instantQuery("p", "svc_vm_vcpus", t), unavailable);
      await assert.rejects(remote.series("p", [[]], t - MIN, t + MIN), unavailable);
      await assert.rejects(remote.latest("p", [], t + MIN, 5 * MIN), unavailable);
      await assert.rejects(remote.ready(), unavailable);
      const w = await remote.windowAggregates("p", [], WINDOWS.slice(0, 1), t, t + MIN, MIN);
      assert.ok(!w[0].ok && w[0].error instanceof MetricsEngineUnavailableError);

      await engine.up();
      await remote.ready();
      await batch(); // the writer's retry
      await batch(); // and once more, as if the first acknowledgement had been lost
      await engine.flush();
      const got = await remote.select(
        "p",
        [{ type: "=", name: "__name__", value: "svc_vm_vcpus" }],
        t - MIN,
        t + MIN,
      );
      assert.equal(got.length, 1);
      assert.deepEqual([...got[0].timestamps], [t, t + 30 * S]);
      assert.deepEqual([...got[0].values], [2, 4]);
    });
  });
}
