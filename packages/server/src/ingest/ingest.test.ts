import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  decodeWriteRequestCompact,
  encodeWriteRequest,
  pushRemoteWrite,
  snappyCompress,
  type TimeSeries,
} from "@svc/remotewrite";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import { rwSeries } from "../../testing/remote-write.ts";
import { parseVmName } from "../inventory/names.ts";
import { type LabelMatcher, labelValue, staleNaN } from "../storage/interface.ts";
import { issueAgentToken } from "./credentials.ts";
import { createIngester } from "./ingest.ts";

const [sqlite] = await testDialects();
const S = 1000;

const eq = (name: string, value: string): LabelMatcher => ({ type: "=", name, value });

describe("remote-write ingest", () => {
  let t: TestApp;
  let p: SeededProject;
  let other: SeededProject;
  let url: string;
  let t0: number;
  before(async () => {
    t = await startTestApp(sqlite.dialect);
    p = await t.seedProject("ing", ["vm-a", "vm-b"]);
    other = await t.seedProject("ing-other", ["vm-x"]);
    url = `${t.baseUrl}/v1/ingest/prometheus/api/v1/write`;
    t0 = Math.floor(t.clock.now() / 30_000) * 30_000 - 10 * 60 * S;
  });
  after(() => t?.close());

  const push = (token: string, ts: TimeSeries[]) =>
    pushRemoteWrite(url, token, { timeseries: ts, metadata: [] });
  const read = (projectId: string, name: string, vm: string) =>
    t.app.metrics.select(projectId, [eq("__name__", name), eq("vm", vm)], t0 - 3600 * S, t.clock.now());
  /** A decoded remote-write request of `vm`'s CPU counter, for an ingester called directly. */
  const cpuRequest = (vm: string, points: [number, number][]) =>
    decodeWriteRequestCompact(
      encodeWriteRequest({
        timeseries: [rwSeries("svc_vm_cpu_seconds_total", { vm }, points)],
        metadata: [],
      }),
    );

  it("stores hypervisor series with the VM labels and derives utilization and memory used", async () => {
    const vm = p.vms[0];
    const res = await push(t.app.config.collectorToken, [
      rwSeries("svc_vm_cpu_seconds_total", { vm }, [
        [t0, 100],
        [t0 + 30 * S, 130],
        [t0 + 60 * S, 145],
      ]),
      rwSeries("svc_vm_vcpus", { vm }, [
        [t0, 2],
        [t0 + 30 * S, 2],
        [t0 + 60 * S, 2],
      ]),
      rwSeries("svc_vm_memory_total_bytes", { vm, vm_id: "vm-a", location: "dc-1" }, [[t0, 4000]]),
      rwSeries("svc_vm_memory_free_bytes", { vm }, [[t0, 1000]]),
      rwSeries("svc_vm_disk_read_bytes_total", { vm, device: "vda" }, [[t0, 5]]),
    ]);
    assert.equal(res.status, 204, res.body);
    const util = await read("ing", "svc_vm_cpu_utilization_pct", vm);
    assert.equal(util.length, 1);
    assert.deepEqual([...util[0].timestamps], [t0 + 30 * S, t0 + 60 * S]);
    assert.deepEqual([...util[0].values], [50, 25]);
    const labels = util[0].labels;
    assert.equal(labelValue(labels, "project_id"), "", "the tenant label is never returned");
    assert.equal(labelValue(labels, "vm_id"), "vm-a");
    assert.equal(labelValue(labels, "location"), "dc-1");
    assert.equal(labelValue(labels, "source"), "hypervisor");
    const used = await read("ing", "svc_vm_memory_used_bytes", vm);
    assert.deepEqual([...used[0].values], [3000]);
    const obs = await read("ing", "svc_vm_last_observation_timestamp_seconds", vm);
    assert.deepEqual([...obs[0].values], [(t0 + 60 * S) / 1000]);
    // Another project's reader sees nothing of it.
    assert.equal((await read("ing-other", "svc_vm_cpu_utilization_pct", vm)).length, 0);
  });

  it("a restarted replica or one a writer moved to reads the previous CPU sample back: no derived point is lost (issue 48)", async () => {
    const vm = p.vms[1];
    const cpu = (points: [number, number][]) => cpuRequest(vm, points);
    // The writer's first two samples reach the app's replica, the third a fresh one (a restart, or the
    // balancer moved the writer) on the same store; a fresh one without the read loses that point.
    const base = t0 + 120 * S;
    await push(t.app.config.collectorToken, [
      rwSeries("svc_vm_cpu_seconds_total", { vm }, [
        [base, 10],
        [base + 30 * S, 25],
      ]),
    ]);
    const moved = createIngester({ db: t.app.db.db, storage: t.app.tsdb, readBack: t.app.metrics });
    const res = await moved.ingest({ kind: "collector" }, cpu([[base + 60 * S, 55]]));
    assert.deepEqual(res.refused, {});
    const memoryOnly = createIngester({ db: t.app.db.db, storage: t.app.tsdb });
    await memoryOnly.ingest({ kind: "collector" }, cpu([[base + 90 * S, 70]]));
    const util = await read("ing", "svc_vm_cpu_utilization_pct", vm);
    assert.deepEqual(
      [...util[0].timestamps].map((x) => (x - base) / S),
      [30, 60],
      "the point after the move derived from the stored sample; without the read the next is lost",
    );
    // vm-b has 2 vCPUs: 15 s in 30 s is 25 %, 30 s in 30 s is 50 %.
    assert.deepEqual([...util[0].values], [25, 50]);
  });

  it("a replica a writer comes back to after writing through another reads the newer sample back: the point is the interval's own", async () => {
    const vm = p.vms[1];
    const cpu = (points: [number, number][]) => cpuRequest(vm, points);
    const base = t0 + 400 * S;
    const here = createIngester({ db: t.app.db.db, storage: t.app.tsdb, readBack: t.app.metrics });
    const elsewhere = createIngester({ db: t.app.db.db, storage: t.app.tsdb, readBack: t.app.metrics });
    await here.ingest({ kind: "collector" }, cpu([[base, 10]]));
    await here.ingest({ kind: "collector" }, cpu([[base + 30 * S, 25]]));
    await elsewhere.ingest({ kind: "collector" }, cpu([[base + 60 * S, 55]]));
    // Back here 60 s after its last sample here, within 90 s: memory alone would average 60 s.
    await here.ingest({ kind: "collector" }, cpu([[base + 90 * S, 70]]));
    const util = await read("ing", "svc_vm_cpu_utilization_pct", vm);
    const at = (s: number) => util[0].values[[...util[0].timestamps].indexOf(base + s * S)];
    // vm-b has 2 vCPUs: 15 s, 30 s and 15 s of CPU in 30 s.
    assert.deepEqual([at(30), at(60), at(90)], [25, 50, 25]);
  });

  it("keeps the valid part of a batch and says which series were refused and how many", async () => {
    const vm = p.vms[1];
    const res = await push(t.app.config.collectorToken, [
      rwSeries("svc_vm_vcpus", { vm }, [[t0, 4]]),
      rwSeries("svc_vm_vcpus", { vm: "projects/ing/locations/dc-1/vms/nope" }, [
        [t0, 1],
        [t0 + 30 * S, 1],
      ]),
      rwSeries("svc_vm_vcpus", { vm, colour: "blue" }, [[t0, 1]]),
      rwSeries("svc_vm_vcpus", { vm, vm_id: "vm-a" }, [[t0, 1]]),
      rwSeries("node_cpu_seconds_total", { vm }, [[t0, 1]]),
      rwSeries("svc_vm_cpu_utilization_pct", { vm }, [[t0, 1]]),
      rwSeries("svc_vm_vcpus", { vm }, [[t0 - 8 * 24 * 3600 * S, 4]]),
    ]);
    assert.equal(res.status, 400);
    assert.equal(res.header("Svc-Ingest-Refused"), "samples", "the agent's sign that the 400 is final");
    assert.match(res.body, /accepted 1 samples/);
    assert.match(res.body, /unknown_vm: 1 series, 2 samples/);
    assert.match(res.body, /bad_labels: 2 series, 2 samples/);
    assert.match(res.body, /unknown_metric: 1 series, 1 samples/);
    assert.match(res.body, /derived_series: 1 series, 1 samples/);
    assert.match(res.body, /out_of_bounds: 1 samples/);
    const kept = await read("ing", "svc_vm_vcpus", vm);
    assert.deepEqual([...kept[0].values], [4]);
  });

  it("accepts late buffered samples inside the out-of-order window with their original times", async () => {
    const vm = p.vms[1];
    const late = t0 - 20 * 60 * S;
    assert.equal(
      (
        await push(t.app.config.collectorToken, [
          rwSeries("svc_vm_network_receive_bytes_total", { vm, interface: "eth0" }, [[t0, 900]]),
        ])
      ).status,
      204,
    );
    const res = await push(t.app.config.collectorToken, [
      rwSeries("svc_vm_network_receive_bytes_total", { vm, interface: "eth0" }, [
        [late, 100],
        [late + 30 * S, 200],
      ]),
    ]);
    assert.equal(res.status, 204, res.body);
    const s = await read("ing", "svc_vm_network_receive_bytes_total", vm);
    assert.deepEqual([...s[0].timestamps], [late, late + 30 * S, t0]);
    const tooLate = await push(t.app.config.collectorToken, [
      rwSeries("svc_vm_network_receive_bytes_total", { vm, interface: "eth0" }, [[t0 - 2 * 3600 * S, 1]]),
    ]);
    assert.equal(tooLate.status, 400);
    assert.match(tooLate.body, /out_of_order: 1 samples/);
  });

  it("keeps a staleness marker exact", async () => {
    const vm = p.vms[0];
    // The marker is built into the sample object directly: an all-number JS array would quiet its NaN.
    const ts = rwSeries("svc_vm_disk_written_bytes_total", { vm, device: "vda" }, [[t0, 10]]);
    const res = await push(t.app.config.collectorToken, [
      { labels: ts.labels, samples: [...ts.samples, { timestampMs: t0 + 30 * S, value: staleNaN() }] },
    ]);
    assert.equal(res.status, 204);
    assert.equal(
      (
        await t.app.metrics.latest(
          "ing",
          [eq("__name__", "svc_vm_disk_written_bytes_total")],
          t0 + 60 * S,
          300 * S,
        )
      ).length,
      0,
    );
    assert.equal(
      (
        await t.app.metrics.latest(
          "ing",
          [eq("__name__", "svc_vm_disk_written_bytes_total")],
          t0 + 10 * S,
          300 * S,
        )
      ).length,
      1,
    );
  });

  it("lets a guest agent write only its own VM's guest series", async () => {
    const token = await issueAgentToken(t.app.db.db, parseVmName(p.vms[0]), t.clock.now());
    assert.match(token, /^svca_/);
    const mine = p.vms[0];
    const res = await push(token, [
      rwSeries(
        "svc_vm_filesystem_used_bytes",
        { vm: mine, mountpoint: "/", fstype: "ext4", device: "/dev/vda1" },
        [[t0, 50]],
      ),
      rwSeries(
        "svc_vm_filesystem_used_bytes",
        { vm: p.vms[1], mountpoint: "/", fstype: "ext4", device: "/dev/vda1" },
        [[t0, 50]],
      ),
      rwSeries("svc_vm_cpu_seconds_total", { vm: mine }, [[t0, 1]]),
      rwSeries(
        "svc_vm_filesystem_used_bytes",
        { vm: other.vms[0], mountpoint: "/", fstype: "ext4", device: "/dev/vda1" },
        [[t0, 50]],
      ),
    ]);
    assert.equal(res.status, 400);
    assert.equal(res.header("Svc-Ingest-Refused"), "samples", "the agent's sign that the 400 is final");
    assert.match(res.body, /accepted 1 samples/);
    assert.match(res.body, /not_permitted: 3 series/);
    const fs = await read("ing", "svc_vm_filesystem_used_bytes", mine);
    assert.equal(labelValue(fs[0].labels, "source"), "guest_agent");
    // A new token for the VM replaces the old one once it is used (credentials.test.ts: the grace period).
    const next = await issueAgentToken(t.app.db.db, parseVmName(mine), t.clock.now());
    assert.equal((await push(next, [])).status, 204);
    assert.equal((await push(token, [])).status, 401);
  });

  it("refuses bad credentials, and agent tokens on RPCs", async () => {
    assert.equal((await push("nope", [])).status, 401);
    assert.equal((await push("", [])).status, 401);
  });

  it("refuses a body that declares 30 MB without allocating it, and keeps serving", async () => {
    // A snappy preamble claiming 30 MB followed by a few bytes.
    const varint = [0x80, 0x87, 0xa7, 0x0e];
    const body = Buffer.from([...varint, 0x00, 0x01]);
    const res = await fetch(url, {
      method: "POST",
      headers: {
        "Content-Type": "application/x-protobuf",
        "Content-Encoding": "snappy",
        Authorization: `Bearer ${t.app.config.collectorToken}`,
      },
      body,
    });
    assert.equal(res.status, 400);
    assert.equal(res.headers.get("Svc-Ingest-Refused"), "body");
    assert.match(await res.text(), /declares 30000000 bytes/);
    const real = snappyCompress(Buffer.alloc(20 * 1024 * 1024, 0x0a));
    const big = await fetch(url, {
      method: "POST",
      headers: {
        "Content-Type": "application/x-protobuf",
        "Content-Encoding": "snappy",
        Authorization: `Bearer ${t.app.config.collectorToken}`,
      },
      body: real,
    });
    assert.equal(big.status, 400);
    assert.equal((await push(t.app.config.collectorToken, [])).status, 204);
  });
});
