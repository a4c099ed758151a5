import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { encodeRemoteWriteBody, pushRemoteWrite, snappyCompress, type TimeSeries } from "@svc/remotewrite";
import { testDialects } from "../../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../../testing/harness.ts";
import { rwSeries } from "../../../testing/remote-write.ts";
import type { LabelMatcher } from "../../storage/interface.ts";
import { REFUSED_HEADER } from "../http.ts";

const [sqlite] = await testDialects();
const S = 1000;
const STALE_NAN = new Float64Array(new Uint32Array([2, 0x7ff00000]).buffer)[0];
const eq = (name: string, value: string): LabelMatcher => ({ type: "=", name, value });

/**
 * The remote-write endpoint with every body decoded in the worker (inline threshold 0) against the same
 * server decoding inline (no workers): the same answers and the same stored data.
 */
describe("remote write through the decode worker", () => {
  let worker: TestApp;
  let inline: TestApp;
  const projects = new Map<TestApp, SeededProject>();
  let t0: number;
  before(async () => {
    worker = await startTestApp(sqlite.dialect, { ingestDecodeWorkers: 1, ingestInlineBytes: 0 });
    inline = await startTestApp(sqlite.dialect, { ingestDecodeWorkers: 0 });
    for (const t of [worker, inline]) projects.set(t, await t.seedProject("dec", ["vm-a", "vm-b"]));
    assert.ok(worker.app.decodePool, "the worker app has a decode pool");
    assert.equal(inline.app.decodePool, undefined);
    t0 = Math.floor(worker.clock.now() / 30_000) * 30_000 - 20 * 60 * S;
    inline.clock.now = () => worker.clock.now();
  });
  after(async () => {
    await worker?.close();
    await inline?.close();
  });

  const url = (t: TestApp) => `${t.baseUrl}/v1/ingest/prometheus/api/v1/write`;
  const post = (t: TestApp, body: Uint8Array) => pushRemoteWrite(url(t), t.app.config.collectorToken, body);
  /** A step of the two VMs' hypervisor series at t0 + k·30 s (CPU, memory, a disk; a stale marker at k = 9). */
  const step = (k: number): TimeSeries[] => {
    const t = t0 + k * 30 * S;
    return ["vm-a", "vm-b"].flatMap((id, j) => {
      const vm = `projects/dec/locations/dc-1/vms/${id}`;
      return [
        rwSeries("svc_vm_cpu_seconds_total", { vm }, [[t, 100 + k * 7.25 + j]]),
        rwSeries("svc_vm_vcpus", { vm }, [[t, 2]]),
        rwSeries("svc_vm_memory_total_bytes", { vm }, [[t, 8e9]]),
        rwSeries("svc_vm_memory_free_bytes", { vm }, [[t, 2e9 + k * 1e6]]),
        rwSeries("svc_vm_disk_read_bytes_total", { vm, device: "vda" }, [
          [t, k === 9 ? STALE_NAN : 5000 * k],
        ]),
      ];
    });
  };
  const stored = async (t: TestApp, name: string) =>
    (await t.app.metrics.select("dec", [eq("__name__", name)], t0 - 3600 * S, t.clock.now() + 3600 * S)).map(
      (s) => ({
        labels: s.labels,
        timestamps: [...s.timestamps],
        bits: [...new Uint32Array(Float64Array.from(s.values).buffer)],
      }),
    );

  it("stores exactly what the inline path stores, derived series included", async () => {
    for (let k = 0; k < 10; k++) {
      const body = encodeRemoteWriteBody({ timeseries: step(k), metadata: [] });
      for (const t of [worker, inline]) {
        const r = await post(t, body.slice());
        assert.equal(r.status, 204, r.body);
      }
    }
    assert.ok((worker.app.decodePool?.stats().decoded ?? 0) >= 10, "the bodies went through the worker");
    for (const name of [
      "svc_vm_cpu_seconds_total",
      "svc_vm_disk_read_bytes_total",
      "svc_vm_cpu_utilization_pct",
      "svc_vm_memory_used_bytes",
    ]) {
      const w = await stored(worker, name);
      assert.ok(w.length > 0, name);
      assert.deepEqual(w, await stored(inline, name), name);
    }
  });

  it("a bad body answers 400 naming the field, as inline", async () => {
    const bad = snappyCompress(new Uint8Array([0x0a, 4, 0x12, 2, 0x08, 0x05]));
    const [w, i] = [await post(worker, bad.slice()), await post(inline, bad.slice())];
    assert.equal(w.status, 400);
    assert.match(w.body, /Sample\.value has wire type 0/);
    assert.deepEqual([w.status, w.body], [i.status, i.body]);
    assert.equal(w.header(REFUSED_HEADER), "body");
  });

  it("keeps the valid part of a batch and names the refused series, as inline", async () => {
    const ts = [
      rwSeries("svc_vm_cpu_seconds_total", { vm: "projects/dec/locations/dc-1/vms/vm-a" }, [
        [t0 + 600 * S, 999],
      ]),
      rwSeries("not_a_svc_metric", { vm: "projects/dec/locations/dc-1/vms/vm-a" }, [[t0 + 600 * S, 1]]),
      rwSeries("svc_vm_vcpus", { vm: "projects/dec/locations/dc-1/vms/vm-gone" }, [[t0 + 600 * S, 1]]),
    ];
    const body = encodeRemoteWriteBody({ timeseries: ts, metadata: [] });
    const [w, i] = [await post(worker, body.slice()), await post(inline, body.slice())];
    assert.equal(w.status, 400);
    assert.match(w.body, /unknown_metric: 1 series, 1 samples/);
    assert.match(w.body, /unknown_vm: 1 series, 1 samples/);
    assert.deepEqual([w.status, w.body], [i.status, i.body]);
    assert.deepEqual(
      await stored(worker, "svc_vm_cpu_seconds_total"),
      await stored(inline, "svc_vm_cpu_seconds_total"),
    );
  });

  it("a worker crash answers 503 (retryable), loses nothing acknowledged, and the retry is stored once", async () => {
    const pool = worker.app.decodePool!;
    const replaced = pool.stats().replaced;
    const body = (k: number) => encodeRemoteWriteBody({ timeseries: step(k), metadata: [] });
    const acked = await post(worker, body(30));
    assert.equal(acked.status, 204);
    pool.crashNextForTest();
    const lost = await post(worker, body(31));
    assert.equal(lost.status, 503, lost.body);
    assert.match(lost.body, /retry/);
    assert.equal(lost.header("retry-after"), "1");
    assert.equal(pool.stats().replaced, replaced + 1);
    const retried = await post(worker, body(31));
    assert.equal(retried.status, 204, retried.body);
    for (const k of [30, 31]) assert.equal((await post(inline, body(k))).status, 204);
    const w = await stored(worker, "svc_vm_cpu_seconds_total");
    assert.deepEqual(w, await stored(inline, "svc_vm_cpu_seconds_total"));
    const times = w[0].timestamps;
    assert.ok(times.includes(t0 + 30 * 30 * S) && times.includes(t0 + 31 * 30 * S));
    assert.equal(new Set(times).size, times.length, "no sample twice");
  });
});
