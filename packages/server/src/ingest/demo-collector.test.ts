import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import { isStaleMarker, type LabelMatcher } from "../storage/interface.ts";
import { demoLoadSchedule, HOT_SCHEDULE, startDemoCollector } from "./demo-collector.ts";

const [sqlite] = await testDialects();
const eq = (name: string, value: string): LabelMatcher => ({ type: "=", name, value });
const HOUR = 3_600_000;
const MINUTE = 60_000;

/** The longest run of consecutive points above 90 % that a `> 90 sustained 300 s` rule would see. */
function longestHotRunMs(ts: ArrayLike<number>, vs: ArrayLike<number>): number {
  let best = 0;
  let start: number | undefined;
  for (let i = 0; i < ts.length; i++) {
    if (vs[i] > 90) {
      start ??= ts[i];
      best = Math.max(best, ts[i] - start);
    } else start = undefined;
  }
  return best;
}

describe("demo collector (simulator through the remote-write endpoint)", () => {
  let t: TestApp;
  let p: SeededProject;
  const progress: string[] = [];
  before(async () => {
    t = await startTestApp(sqlite.dialect);
    p = await t.seedProject("sim", ["a-1", "b-1", "c-1", "d-1"]);
    const c = await startDemoCollector({
      db: t.app.db.db,
      baseUrl: t.baseUrl,
      collectorToken: t.app.config.collectorToken,
      dataDir: t.app.config.dataDir,
      log: pino({ level: "silent" }),
      now: t.clock.now,
      backfillMs: 4 * HOUR,
      onProgress: (l) => progress.push(l),
    });
    c.stop();
  });
  after(() => t?.close());

  it("backfills history with a progress line", () => {
    assert.match(progress[0], /backfill of simulated telemetry for 4 VMs: \d+%/);
    assert.match(progress.at(-1)!, /done \(240 min\)/);
  });

  it("makes every VM's series readable through MetricsBackend, tenant-scoped", async () => {
    const now = t.clock.now();
    for (const vm of p.vms) {
      const util = await t.app.metrics.select(
        "sim",
        [eq("__name__", "svc_vm_cpu_utilization_pct"), eq("vm", vm)],
        now - 4 * HOUR,
        now,
      );
      assert.equal(util.length, 1, vm);
      assert.ok(util[0].timestamps.length > 300, `${vm}: ${util[0].timestamps.length} points`);
      for (let i = 0; i < util[0].values.length; i++) {
        const v = util[0].values[i];
        assert.ok(isStaleMarker(util[0].values, i) || (v >= 0 && v <= 100), `${vm} utilization ${v}`);
      }
    }
    assert.equal(
      (await t.app.metrics.select("other", [eq("__name__", "svc_vm_vcpus")], now - 4 * HOUR, now)).length,
      0,
    );
  });

  it("shows the resize in svc_vm_vcpus without rewriting earlier utilization", async () => {
    const now = t.clock.now();
    const vcpus = await t.app.metrics.select(
      "sim",
      [eq("__name__", "svc_vm_vcpus"), eq("vm", p.vms[0])],
      now - 4 * HOUR,
      now,
    );
    assert.deepEqual(new Set(vcpus[0].values), new Set([2, 4]));
    // Each stored utilization point equals Δcpu / (Δt × vCPUs of that interval): recompute every
    // point from the raw counter and the vCPU series, on both sides of the resize.
    const cpu = (
      await t.app.metrics.select(
        "sim",
        [eq("__name__", "svc_vm_cpu_seconds_total"), eq("vm", p.vms[0])],
        now - 4 * HOUR,
        now,
      )
    )[0];
    const util = (
      await t.app.metrics.select(
        "sim",
        [eq("__name__", "svc_vm_cpu_utilization_pct"), eq("vm", p.vms[0])],
        now - 4 * HOUR,
        now,
      )
    )[0];
    const vcpuAt = new Map<number, number>();
    for (let i = 0; i < vcpus[0].timestamps.length; i++)
      vcpuAt.set(vcpus[0].timestamps[i], vcpus[0].values[i]);
    const utilAt = new Map<number, number>();
    for (let i = 0; i < util.timestamps.length; i++) utilAt.set(util.timestamps[i], util.values[i]);
    const seen = new Set<number>();
    for (let i = 1; i < cpu.timestamps.length; i++) {
      const t1 = cpu.timestamps[i];
      const got = utilAt.get(t1);
      if (got === undefined || isStaleMarker(cpu.values, i) || isStaleMarker(cpu.values, i - 1)) continue;
      const delta = cpu.values[i] >= cpu.values[i - 1] ? cpu.values[i] - cpu.values[i - 1] : cpu.values[i];
      const n = vcpuAt.get(t1)!;
      seen.add(n);
      assert.ok(Math.abs(got - (delta / ((t1 - cpu.timestamps[i - 1]) / 1000) / n) * 100) < 1e-9, `at ${t1}`);
    }
    assert.deepEqual(seen, new Set([2, 4]), "points on both sides of the resize were checked");
  });

  it("records the simulated unexpected stop in the inventory and ends the series with staleness markers", async () => {
    const events = await t.admin.vms.listVMStateEvents({ vm: p.vms[2] });
    assert.deepEqual(
      events.events.map((e) => [e.state, e.stopReason]),
      [
        ["STOPPED", "UNEXPECTED"],
        ["RUNNING", ""],
      ],
    );
    const now = t.clock.now();
    const cpu = await t.app.metrics.select(
      "sim",
      [eq("__name__", "svc_vm_cpu_seconds_total"), eq("vm", p.vms[2])],
      now - 4 * HOUR,
      now,
    );
    let markers = 0;
    for (let i = 0; i < cpu[0].values.length; i++) if (isStaleMarker(cpu[0].values, i)) markers++;
    assert.equal(markers, 1);
  });
});

describe("demo load schedule (web-2 runs hot)", () => {
  const live = Date.UTC(2026, 10, 1, 12, 0, 17);
  const events = demoLoadSchedule(
    "projects/demo/locations/dc-1/vms/web-2",
    live,
    live - 24 * HOUR,
    live + 7 * 24 * HOUR,
  );
  const loads = events.map((e) => {
    assert.equal(e.kind, "load");
    return e as Extract<typeof e, { kind: "load" }>;
  });

  it("starts an episode within 2 minutes of the live start, so a 300 s rule fires within 7 minutes", () => {
    const first = loads.find((e) => e.fromMs >= live)!;
    assert.ok(first.fromMs - live > 0 && first.fromMs - live <= 2 * MINUTE, `${first.fromMs - live} ms`);
    assert.ok(first.fromMs + 5 * MINUTE + 30_000 <= live + 7 * MINUTE);
    assert.ok(first.toMs - first.fromMs > 5 * MINUTE + 60_000, "long enough to be sustained 300 s");
  });

  it("runs hot (97 %) for 8 minutes every 30 minutes, back through the 24 h history and 7 days ahead", () => {
    for (const e of loads) {
      assert.equal(e.utilization, 0.97);
      assert.equal(e.toMs - e.fromMs, 8 * MINUTE);
    }
    for (let i = 1; i < loads.length; i++) assert.equal(loads[i].fromMs - loads[i - 1].fromMs, 30 * MINUTE);
    assert.ok(loads[0].toMs > live - 24 * HOUR && loads[0].fromMs <= live - 24 * HOUR + 30 * MINUTE);
    assert.equal(loads.filter((e) => e.toMs <= live).length, 48, "48 episodes in the backfilled day");
    const last = loads.at(-1)!;
    assert.ok(last.fromMs <= live + 7 * 24 * HOUR && last.fromMs + 30 * MINUTE > live + 7 * 24 * HOUR);
    assert.equal(loads.length, 48 + 7 * 48);
    assert.equal(HOT_SCHEDULE.periodMs, 30 * MINUTE);
  });

  it("is a function of the start time", () => {
    assert.deepEqual(
      demoLoadSchedule("vm", live, live - HOUR, live + HOUR),
      demoLoadSchedule("vm", live, live - HOUR, live + HOUR),
    );
    const later = demoLoadSchedule("vm", live + 1234, live - HOUR, live + HOUR).map((e) =>
      e.kind === "load" ? e.fromMs : 0,
    );
    assert.ok(later.includes(live + 1234 + HOT_SCHEDULE.firstAfterMs));
  });
});

describe("demo collector: web-2 of the demo project runs hot on schedule", () => {
  let t: TestApp;
  let p: SeededProject;
  const progress: string[] = [];
  before(async () => {
    t = await startTestApp(sqlite.dialect);
    p = await t.seedProject("demo", ["web-1", "web-2"]);
    const c = await startDemoCollector({
      db: t.app.db.db,
      baseUrl: t.baseUrl,
      collectorToken: t.app.config.collectorToken,
      dataDir: t.app.config.dataDir,
      log: pino({ level: "silent" }),
      now: t.clock.now,
      backfillMs: 3 * HOUR,
      onProgress: (l) => progress.push(l),
    });
    c.stop();
  });
  after(() => t?.close());

  const utilization = async (vm: string) => {
    const now = t.clock.now();
    const s = await t.app.metrics.select(
      "demo",
      [eq("__name__", "svc_vm_cpu_utilization_pct"), eq("vm", vm)],
      now - 3 * HOUR,
      now,
    );
    return s[0];
  };

  it("shows the episodes in the backfilled svc_vm_cpu_utilization_pct, and only there", async () => {
    const now = t.clock.now();
    const [web1, web2] = p.vms;
    const episodes = demoLoadSchedule(web2, now, now - 3 * HOUR, now).map((e) =>
      e.kind === "load" ? e : assert.fail(e.kind),
    );
    assert.equal(episodes.length, 6);
    const u = await utilization(web2);
    for (const e of episodes) {
      const inside = u.values.filter((_, i) => u.timestamps[i] >= e.fromMs && u.timestamps[i] < e.toMs);
      assert.equal(inside.length, 16);
      assert.ok(
        inside.every((v) => v > 90 && v <= 100),
        inside.join(" "),
      );
    }
    // Outside the episodes neither VM stays above 90 % for 300 s.
    const outside = u.timestamps.map((ts, i) =>
      episodes.some((e) => ts >= e.fromMs && ts < e.toMs) ? 0 : u.values[i],
    );
    assert.ok(longestHotRunMs(u.timestamps, outside) < 5 * MINUTE);
    const w1 = await utilization(web1);
    assert.ok(longestHotRunMs(w1.timestamps, w1.values) < 5 * MINUTE);
    assert.ok(longestHotRunMs(u.timestamps, u.values) >= 7 * MINUTE);
  });

  it("says when the next episode starts", () => {
    assert.match(progress.at(-1)!, /web-2 runs at 97% CPU for 8 min every 30 min, next from /);
    assert.ok(progress.at(-1)!.endsWith(new Date(t.clock.now() + MINUTE).toISOString()));
  });
});

describe("demo collector restarts", () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp(sqlite.dialect);
  });
  after(() => t?.close());

  it("continues its counters after a restart instead of dropping them (no reset spike in rate())", async () => {
    await t.seedProject("resume", ["r-1"]);
    const start = () =>
      startDemoCollector({
        db: t.app.db.db,
        baseUrl: t.baseUrl,
        collectorToken: t.app.config.collectorToken,
        dataDir: t.app.config.dataDir,
        log: pino({ level: "silent" }),
        now: t.clock.now,
        backfillMs: HOUR,
      });
    (await start()).stop();
    t.clock.advance(10 * MINUTE);
    (await start()).stop();
    const now = t.clock.now();
    for (const name of ["svc_vm_network_receive_bytes_total", "svc_vm_disk_read_bytes_total"]) {
      const series = await t.app.metrics.select("resume", [eq("__name__", name)], now - 2 * HOUR, now);
      assert.ok(series.length > 0, name);
      for (const s of series) {
        assert.ok(s.timestamps.at(-1)! > now - 5 * MINUTE, "the second run sent samples");
        for (let i = 1; i < s.values.length; i++)
          assert.ok(
            s.values[i] >= s.values[i - 1],
            `${name} drops at ${new Date(s.timestamps[i]).toISOString()}`,
          );
      }
    }
  });
});
