import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { decodeRemoteWriteBody, encodeRemoteWriteBody, type WriteRequest } from "@svc/remotewrite";
import { isStaleNaNValue } from "../../storage/interface.ts";
import { createSimulator, type ScenarioEvent, SimulatorError, type SimVm } from "./index.ts";

const H = 3_600_000;
const T0 = Date.UTC(2026, 0, 5, 0, 0, 0);
const vm = (i: number, over: Partial<SimVm> = {}): SimVm => ({
  name: `projects/p1/locations/dc-1/vms/vm-${i}`,
  vmId: `vm-${i}`,
  location: "dc-1",
  vcpus: 2,
  memoryBytes: 4 * 1024 ** 3,
  state: "running",
  ...over,
});
const VMS = [vm(1), vm(2), vm(3, { vcpus: 8, memoryBytes: 32 * 1024 ** 3 })];

async function collect(it: AsyncIterable<WriteRequest>): Promise<WriteRequest[]> {
  const out: WriteRequest[] = [];
  for await (const r of it) out.push(r);
  return out;
}

const label = (labels: readonly { name: string; value: string }[], name: string) =>
  labels.find((l) => l.name === name)?.value;

interface Pt {
  t: number;
  v: number;
  batch: number;
}
/** Points of one series (by name, vm and optional device label), in emission order. */
function points(reqs: WriteRequest[], name: string, vmName: string, extra?: [string, string]): Pt[] {
  const out: Pt[] = [];
  reqs.forEach((r, batch) => {
    for (const ts of r.timeseries) {
      if (label(ts.labels, "__name__") !== name || label(ts.labels, "vm") !== vmName) continue;
      if (extra && label(ts.labels, extra[0]) !== extra[1]) continue;
      for (const s of ts.samples) out.push({ t: s.timestampMs, v: s.value, batch });
    }
  });
  return out;
}

const COUNTERS: [string, [string, string]?][] = [
  ["svc_vm_cpu_seconds_total"],
  ["svc_vm_disk_read_bytes_total", ["device", "vda"]],
  ["svc_vm_disk_written_bytes_total", ["device", "vda"]],
  ["svc_vm_disk_reads_completed_total", ["device", "vda"]],
  ["svc_vm_disk_writes_completed_total", ["device", "vda"]],
  ["svc_vm_network_receive_bytes_total", ["interface", "eth0"]],
  ["svc_vm_network_transmit_bytes_total", ["interface", "eth0"]],
  ["svc_vm_network_receive_packets_total", ["interface", "eth0"]],
  ["svc_vm_network_transmit_packets_total", ["interface", "eth0"]],
];

describe("createSimulator()", () => {
  it("backfills every VM every 30 s with the VM labels and no project_id", async () => {
    const reqs = await collect(createSimulator({ vms: VMS, seed: 7 }).backfill(T0, T0 + 2 * H));
    for (const r of reqs) {
      for (const ts of r.timeseries) {
        const names = ts.labels.map((l) => l.name);
        assert.deepEqual(names, [...names].sort());
        for (const need of ["__name__", "vm", "vm_id", "location"]) assert.ok(names.includes(need));
        assert.ok(!names.includes("project_id"));
      }
    }
    for (const v of VMS) {
      const cpu = points(reqs, "svc_vm_cpu_seconds_total", v.name);
      assert.equal(cpu.length, 240, "2 h at 30 s (both bounds inclusive, phase inside the interval)");
      for (let i = 1; i < cpu.length; i++) assert.equal(cpu[i].t - cpu[i - 1].t, 30_000);
      const total = points(reqs, "svc_vm_memory_total_bytes", v.name);
      assert.ok(total.every((p) => p.v === v.memoryBytes));
      const free = points(reqs, "svc_vm_memory_free_bytes", v.name);
      const cached = points(reqs, "svc_vm_memory_cached_bytes", v.name);
      for (const [i, p] of free.entries()) assert.ok(p.v >= 0 && p.v + cached[i].v <= v.memoryBytes);
      // Utilisation between 0 and 100% of the vCPUs.
      for (let i = 1; i < cpu.length; i++) {
        const u = (cpu[i].v - cpu[i - 1].v) / (30 * v.vcpus);
        assert.ok(u > 0 && u < 1, `utilisation ${u}`);
      }
    }
  });

  it("has a diurnal curve: afternoon busier than the small hours", async () => {
    const reqs = await collect(createSimulator({ vms: VMS, seed: 3 }).backfill(T0, T0 + 24 * H));
    for (const v of VMS) {
      const cpu = points(reqs, "svc_vm_cpu_seconds_total", v.name);
      const used = (fromH: number, toH: number) => {
        const inR = cpu.filter((p) => p.t >= T0 + fromH * H && p.t <= T0 + toH * H);
        return inR.at(-1)!.v - inR[0].v;
      };
      assert.ok(used(13, 17) > used(1, 5), v.name);
    }
  });

  it("keeps counters monotonic except at the restart, where they reset", async () => {
    const restartAt = T0 + H;
    const sim = createSimulator({
      vms: VMS,
      seed: 11,
      scenarios: [{ kind: "restart", vm: VMS[0].name, atMs: restartAt }],
    });
    const reqs = await collect(sim.backfill(T0, T0 + 2 * H));
    for (const v of VMS) {
      for (const [name, extra] of COUNTERS) {
        const pts = points(reqs, name, v.name, extra);
        assert.ok(pts.length > 200, `${name} present`);
        for (let i = 1; i < pts.length; i++) {
          if (v === VMS[0] && pts[i - 1].t < restartAt && pts[i].t >= restartAt) {
            assert.ok(pts[i].v < pts[i - 1].v, `${name} resets at the restart`);
          } else assert.ok(pts[i].v >= pts[i - 1].v, `${v.name} ${name} monotonic at ${i}`);
        }
      }
    }
  });

  it("shows a vCPU resize in svc_vm_vcpus and in the CPU counter's slope", async () => {
    const at = T0 + H;
    const sim = createSimulator({
      vms: [vm(1)],
      seed: 5,
      scenarios: [{ kind: "resize", vm: vm(1).name, atMs: at, vcpus: 16 }],
    });
    const reqs = await collect(sim.backfill(T0, T0 + 2 * H));
    const vc = points(reqs, "svc_vm_vcpus", vm(1).name);
    assert.ok(vc.every((p) => p.v === (p.t >= at ? 16 : 2)));
    assert.ok(vc.some((p) => p.v === 16) && vc.some((p) => p.v === 2));
    const cpu = points(reqs, "svc_vm_cpu_seconds_total", vm(1).name);
    const maxRate = Math.max(...cpu.slice(1).map((p, i) => (p.v - cpu[i].v) / 30));
    assert.ok(maxRate > 2, "more than the old 2 vCPUs' worth of CPU seconds per second after the resize");
  });

  it("stops: staleness markers at the stop for every series, nothing while stopped, reset after", async () => {
    const from = T0 + H;
    const to = T0 + H + 20 * 60_000;
    const v = VMS[1];
    const sim = createSimulator({
      vms: VMS,
      seed: 2,
      scenarios: [{ kind: "stop", vm: v.name, fromMs: from, toMs: to }],
    });
    const reqs = await collect(sim.backfill(T0, T0 + 2 * H));
    const all = reqs.flatMap((r) => r.timeseries).filter((ts) => label(ts.labels, "vm") === v.name);
    const seriesKeys = new Set(all.map((ts) => JSON.stringify(ts.labels)));
    const marked = new Set<string>();
    for (const ts of all) {
      for (const s of ts.samples) {
        if (s.timestampMs >= from && s.timestampMs < to) {
          assert.ok(isStaleNaNValue(s.value), "only markers inside the stop");
          assert.ok(s.timestampMs < from + 30_000, "markers at the first step of the stop");
          marked.add(JSON.stringify(ts.labels));
        }
      }
    }
    assert.deepEqual(marked, seriesKeys, "every series of the VM gets a marker");
    // The marker survives the wire (its NaN payload is kept).
    const wire = decodeRemoteWriteBody(encodeRemoteWriteBody(reqs[0]));
    assert.deepEqual(wire, reqs[0]);
    const cpu = points(reqs, "svc_vm_cpu_seconds_total", v.name).filter((p) => !Number.isNaN(p.v));
    const after = cpu.find((p) => p.t >= to)!;
    const before = cpu.filter((p) => p.t < from).at(-1)!;
    assert.ok(after.v < before.v, "counters start again from zero after the boot");
    assert.ok(
      points(reqs, "svc_vm_cpu_seconds_total", VMS[0].name).every((p) => !Number.isNaN(p.v)),
      "others unaffected",
    );
  });

  it("leaves a telemetry gap without markers", async () => {
    const from = T0 + H;
    const to = T0 + H + 10 * 60_000;
    const sim = createSimulator({
      vms: VMS,
      seed: 2,
      scenarios: [{ kind: "gap", vm: VMS[0].name, fromMs: from, toMs: to }],
    });
    const cpu = points(await collect(sim.backfill(T0, T0 + 2 * H)), "svc_vm_cpu_seconds_total", VMS[0].name);
    assert.ok(cpu.every((p) => (p.t < from || p.t >= to) && !Number.isNaN(p.v)));
    const i = cpu.findIndex((p) => p.t >= to);
    assert.ok(cpu[i].t - cpu[i - 1].t >= 10 * 60_000);
    assert.ok(cpu[i].v > cpu[i - 1].v, "the VM kept running: no reset");
  });

  it("delivers buffered samples late, in a later batch, with their original timestamps", async () => {
    const v = VMS[2];
    const start = T0 + 10 * 60_000;
    const late: ScenarioEvent = {
      kind: "late",
      vm: v.name,
      fromMs: T0 + 60_000,
      toMs: T0 + 4 * 60_000,
      deliverAtMs: T0 + 8 * 60_000,
    };
    const sim = createSimulator({ vms: VMS, seed: 9, scenarios: [late] });
    const ticks: WriteRequest[][] = [];
    for (let now = T0; now <= start; now += 30_000) ticks.push(sim.tick(now));
    const batches = ticks.map((reqs) => reqs.flatMap((r) => r.timeseries));
    const cpuIn = (b: number) =>
      batches[b]
        .filter(
          (ts) =>
            label(ts.labels, "__name__") === "svc_vm_cpu_seconds_total" && label(ts.labels, "vm") === v.name,
        )
        .flatMap((ts) => ts.samples.map((s) => s.timestampMs));
    const heldTimes = ticks.flatMap((_, b) => cpuIn(b)).filter((t) => t >= late.fromMs && t < late.toMs);
    assert.equal(heldTimes.length, 6, "3 minutes of held samples, all delivered");
    for (let b = 0; b < ticks.length; b++) {
      const batchTime = T0 + b * 30_000;
      for (const t of cpuIn(b)) {
        if (t >= late.fromMs && t < late.toMs) {
          assert.ok(batchTime >= late.deliverAtMs, "held samples arrive only at delivery");
          assert.ok(t < batchTime - 4 * 60_000, "with their original (old) timestamps");
        }
      }
    }
    // Each TimeSeries stays ascending; the late run is its own entry.
    for (const b of batches)
      for (const ts of b)
        for (let i = 1; i < ts.samples.length; i++)
          assert.ok(ts.samples[i].timestampMs > ts.samples[i - 1].timestampMs);
  });

  it("runs a VM hot in a load range: > 90 % at every step inside, its usual curve again after", async () => {
    const from = T0 + 14 * H + 7_000; // the afternoon peak of the diurnal curve, off the step grid
    const to = from + 8 * 60_000;
    const v = VMS[0];
    const load: ScenarioEvent = { kind: "load", vm: v.name, fromMs: from, toMs: to, utilization: 0.97 };
    const hot = await collect(
      createSimulator({ vms: VMS, seed: 7, scenarios: [load] }).backfill(T0, T0 + 24 * H),
    );
    const calm = await collect(createSimulator({ vms: VMS, seed: 7 }).backfill(T0, T0 + 24 * H));
    /** Utilisation per step, %, as ingest derives it: Δcpu / (Δt × vCPUs). */
    const util = (reqs: WriteRequest[], name: string, vcpus: number) => {
      const cpu = points(reqs, "svc_vm_cpu_seconds_total", name);
      return new Map(cpu.slice(1).map((p, i) => [p.t, ((p.v - cpu[i].v) / (30 * vcpus)) * 100]));
    };
    const hotU = util(hot, v.name, v.vcpus);
    const calmU = util(calm, v.name, v.vcpus);
    const inside = [...hotU].filter(([t]) => t >= from && t < to);
    assert.equal(inside.length, 16, "8 minutes of 30 s steps");
    for (const [t, u] of inside) assert.ok(u > 90 && u <= 100, `${u} % at ${t}`);
    assert.ok(Math.abs(inside.reduce((n, [, u]) => n + u, 0) / inside.length - 97) < 1, "≈ 97 % on average");
    assert.ok(new Set(inside.map(([, u]) => u.toFixed(2))).size > 8, "with a little noise");
    // Outside the range the VM is exactly as without the scenario (up to the counters' 1 ms rounding):
    // its usual, much lower load (the afternoon peak of this VM stays under 60 %).
    for (const [t, u] of hotU) {
      if (t >= from && t < to) continue;
      assert.ok(Math.abs(u - calmU.get(t)!) < 1e-4, `unchanged at ${t}`);
    }
    const after = [...hotU].filter(([t]) => t >= to && t < to + 30 * 60_000).map(([, u]) => u);
    assert.ok(Math.max(...after) < 60, `normal after the range: max ${Math.max(...after)} %`);
    const before = [...calmU].filter(([t]) => t >= from && t < to).map(([, u]) => u);
    assert.ok(Math.max(...before) < 60, "the same steps without the scenario are not hot");
    // Memory use rises a little under load; other VMs are untouched.
    const used = (reqs: WriteRequest[]) => {
      const free = points(reqs, "svc_vm_memory_free_bytes", v.name).filter((p) => p.t >= from && p.t < to);
      return free.reduce((n, p) => n + (v.memoryBytes - p.v), 0);
    };
    assert.ok(used(hot) > used(calm));
    for (const other of VMS.slice(1))
      assert.deepEqual(
        points(hot, "svc_vm_cpu_seconds_total", other.name),
        points(calm, "svc_vm_cpu_seconds_total", other.name),
      );
  });

  it("validates load scenarios: fromMs < toMs and 0 < utilization <= 1", () => {
    const load = (over: Partial<{ fromMs: number; toMs: number; utilization: number }>): ScenarioEvent => ({
      kind: "load",
      vm: vm(1).name,
      fromMs: T0,
      toMs: T0 + H,
      utilization: 0.5,
      ...over,
    });
    for (const bad of [
      { utilization: 0 },
      { utilization: -0.1 },
      { utilization: 1.01 },
      { utilization: Number.NaN },
      { toMs: T0 },
      { fromMs: T0 + 2 * H },
    ]) {
      assert.throws(
        () => createSimulator({ vms: [vm(1)], scenarios: [load(bad)] }),
        SimulatorError,
        JSON.stringify(bad),
      );
    }
    createSimulator({ vms: [vm(1)], scenarios: [load({ utilization: 1 })] });
  });

  it("is deterministic for a seed, whether backfilled or ticked, and differs across seeds", async () => {
    const scen: ScenarioEvent[] = [{ kind: "restart", vm: VMS[0].name, atMs: T0 + 30 * 60_000 }];
    const a = await collect(createSimulator({ vms: VMS, seed: 42, scenarios: scen }).backfill(T0, T0 + H));
    const b = await collect(createSimulator({ vms: VMS, seed: 42, scenarios: scen }).backfill(T0, T0 + H));
    assert.deepEqual(a, b);
    const c = await collect(createSimulator({ vms: VMS, seed: 43, scenarios: scen }).backfill(T0, T0 + H));
    assert.notDeepEqual(
      points(a, "svc_vm_cpu_seconds_total", VMS[0].name),
      points(c, "svc_vm_cpu_seconds_total", VMS[0].name),
    );

    // Backfill then ticks produce the same samples as one longer backfill.
    const s1 = createSimulator({ vms: VMS, seed: 42, scenarios: scen });
    const part = await collect(s1.backfill(T0, T0 + 30 * 60_000 - 1));
    for (let now = T0 + 30 * 60_000; now <= T0 + H; now += 30_000) part.push(...s1.tick(now));
    for (const v of VMS) {
      const strip = (p: Pt[]) => p.map(({ t, v }) => [t, v]);
      assert.deepEqual(
        strip(points(part, "svc_vm_cpu_seconds_total", v.name)),
        strip(points(a, "svc_vm_cpu_seconds_total", v.name)),
      );
    }
  });

  it("bounds requests by maxSamplesPerRequest and emits nothing for VMs that are not running", async () => {
    const reqs = await collect(
      createSimulator({
        vms: [...VMS, vm(9, { state: "STOPPED" })],
        seed: 1,
        maxSamplesPerRequest: 500,
      }).backfill(T0, T0 + 3 * H),
    );
    assert.ok(reqs.length > 10);
    for (const r of reqs) assert.ok(r.timeseries.reduce((n, ts) => n + ts.samples.length, 0) <= 500);
    assert.equal(points(reqs, "svc_vm_cpu_seconds_total", vm(9).name).length, 0);
  });

  it("refuses bad options and calls out of order with SimulatorError", () => {
    assert.throws(() => createSimulator({ vms: [vm(1), vm(1)] }), SimulatorError);
    assert.throws(
      () => createSimulator({ vms: [vm(1)], scenarios: [{ kind: "restart", vm: "nope", atMs: 0 }] }),
      SimulatorError,
    );
    const sim = createSimulator({ vms: [vm(1)] });
    sim.tick(T0);
    assert.throws(() => sim.tick(T0 - 1), SimulatorError);
  });
});
