/**
 * The collector against the real stack: libvirtd + QEMU guests (testing/libvirt-guest.ts), svc in
 * process (the server's test harness), checked through svc's own API. The sampling interval is 5 s
 * here (svc's metrics options likewise) so that the outage and staleness checks keep their meaning
 * in seconds instead of minutes.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createLogger } from "@svc/remotewrite";
import { testDialects } from "../../server/testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../server/testing/harness.ts";
import {
  domstats,
  type Guest,
  LIBVIRT_SOCKET,
  libvirtUnavailable,
  sleep,
  startGuests,
  startLibvirt,
  stopLibvirt,
  stopLibvirtd,
  until,
  virsh,
} from "../testing/libvirt-guest.ts";
import { type Collector, createCollector } from "./collector.ts";
import { resolveCollectorOptions } from "./options.ts";

const S = 1000;
const INTERVAL = 5 * S;
const TOKEN = `svcc_test_${randomUUID()}`;
const skip = libvirtUnavailable();

describe("svc-collector on a real libvirt host", { skip, timeout: 300_000 }, () => {
  let t: TestApp;
  let p: SeededProject;
  let g1: Guest | undefined;
  let g2: Guest | undefined;
  let collector: Collector;
  let spoolDir: string;
  const logs: string[] = [];
  const unmapped = `svc-unmapped-${process.pid}`;
  /** A domain whose metadata names a VM svc does not have. */
  const ghost = `svc-ghost-${process.pid}`;
  let token = TOKEN;
  const vm1 = () => p.vms[0];
  const vm2 = () => p.vms[1];
  /** Every cycle's observation bracket for g1: domstats read just before and just after it. */
  const cycles: {
    before: Map<string, string>;
    after: Map<string, string>;
    t0: number;
    tRead: number;
    t1: number;
    ok: boolean;
  }[] = [];

  before(async () => {
    await startLibvirt();
    const dialect = (await testDialects())[0].dialect;
    t = await startTestApp(
      dialect,
      {
        collectorToken: TOKEN,
        simulator: false,
        metrics: { samplingIntervalMs: INTERVAL, minStepSeconds: 5 },
      },
      { wallClock: true },
    );
    p = await t.seedProject("hyper", ["vm-1", "vm-2"]);
    const tag = process.pid % 1000;
    [g1, g2] = await startGuests([
      { name: `svc-hv1-${tag}`, svcVm: vm1(), tap: `svchv1x${tag}`, burnAfterS: 0 },
      { name: `svc-hv2-${tag}`, svcVm: vm2() },
    ]);
    // A domain svc does not know: defined (inactive), no metadata element.
    const dir = mkdtempSync(join(tmpdir(), "svc-unmapped-"));
    writeFileSync(
      join(dir, "d.xml"),
      `<domain type='qemu'><name>${unmapped}</name><memory unit='MiB'>64</memory><vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm</type></os></domain>`,
    );
    virsh("define", join(dir, "d.xml"));
    writeFileSync(
      join(dir, "g.xml"),
      `<domain type='qemu'><name>${ghost}</name><metadata><svc:vm xmlns:svc='urn:svc:collector:1' name='projects/hyper/locations/dc-1/vms/ghost'/></metadata><memory unit='MiB'>64</memory><vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm</type></os></domain>`,
    );
    virsh("define", join(dir, "g.xml"));
    rmSync(dir, { recursive: true });
    spoolDir = mkdtempSync(join(tmpdir(), "svc-collector-spool-"));
    collector = createCollector(
      resolveCollectorOptions({
        server: t.baseUrl,
        token: () => token,
        socketPath: LIBVIRT_SOCKET,
        intervalMs: INTERVAL,
        libvirtTimeoutMs: 5 * S,
        timeoutMs: 3 * S,
        retryMinMs: 200,
        retryMaxMs: 1 * S,
        spoolDir,
        logger: createLogger("debug", (line) => {
          logs.push(line);
        }),
      }),
    );
  });

  after(async () => {
    await collector?.stop();
    // A failed check may have left libvirtd stopped: the domains are removed through it.
    await startLibvirt().catch(() => {});
    g1?.remove();
    g2?.remove();
    for (const d of [unmapped, ghost]) {
      try {
        virsh("undefine", d);
      } catch {}
    }
    stopLibvirt();
    await t?.close();
    if (spoolDir) rmSync(spoolDir, { recursive: true, force: true });
  });

  const drained = async () => {
    await collector.flush();
    return collector.stats().spoolPending === 0;
  };

  /** One collector cycle bracketed by domstats reads of g1; sent unless svc is down. */
  async function cycle(send = true, bracket = true) {
    const t0 = Date.now();
    const before = bracket ? domstats(g1!.name) : new Map<string, string>();
    // When domstats read the counters: the middle of the virsh call.
    const tRead = (t0 + Date.now()) / 2;
    const failedBefore = collector.stats().failedCycles;
    await collector.collectNow();
    const after = bracket ? domstats(g1!.name) : new Map<string, string>();
    cycles.push({
      before,
      after,
      t0,
      tRead,
      t1: Date.now(),
      ok: collector.stats().failedCycles === failedBefore,
    });
    if (send) await until(drained, 30 * S, "the spool to drain");
  }

  async function cyclesFor(n: number, send = true, bracket = true) {
    for (let i = 0; i < n; i++) {
      const start = Date.now();
      await cycle(send, bracket);
      await sleep(Math.max(0, INTERVAL - (Date.now() - start)));
    }
  }

  /** Raw stored samples of one series of vm-1 through svc's Prometheus API: [unix s, value][]. */
  async function raw(series: string, extra = "", vm = vm1()): Promise<[number, number][]> {
    const q = `${series}{vm="${vm}"${extra}}[10m]`;
    const res = await fetch(
      `${t.baseUrl}/v1/monitoring/${p.projectName}/prometheus/api/v1/query?query=${encodeURIComponent(q)}&time=${Date.now() / 1000}`,
      { headers: { Authorization: `Bearer ${p.owner.session}` } },
    );
    const body = (await res.json()) as { data: { result: { values: [number, string][] }[] } };
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.ok(body.data.result.length <= 1, `one series for ${q}`);
    return (body.data.result[0]?.values ?? []).map(([ts, v]) => [ts, Number(v)]);
  }

  async function monitoring(vm: string, metricIds: string[], stepSeconds = 10) {
    const end = Math.floor(Date.now() / 1000);
    return t.clients(p.owner.session).monitoring.queryVMMonitoring({
      name: vm,
      metricIds,
      startTimeUnix: BigInt(end - 600),
      endTimeUnix: BigInt(end),
      stepSeconds,
    });
  }

  const field = (m: Map<string, string>, k: string) => {
    const v = m.get(k);
    assert.ok(v !== undefined, `domstats has ${k}`);
    return Number(v);
  };

  it("stores libvirt's counters as svc's series, and svc's CPU, memory, rates and filesystem agree with them", async () => {
    await cyclesFor(6);
    // Each stored counter lies between the domstats reads just before and after its cycle.
    const counters: [string, string, string, number][] = [
      ["svc_vm_cpu_seconds_total", "", "cpu.time", 1e-9],
      ["svc_vm_disk_read_bytes_total", ',device="vda"', "block.0.rd.bytes", 1],
      ["svc_vm_disk_written_bytes_total", ',device="vda"', "block.0.wr.bytes", 1],
      [
        "svc_vm_network_receive_bytes_total",
        `,interface="${g1!.name.replace("svc-hv1-", "svchv1x")}"`,
        "net.0.rx.bytes",
        1,
      ],
      [
        "svc_vm_network_transmit_bytes_total",
        `,interface="${g1!.name.replace("svc-hv1-", "svchv1x")}"`,
        "net.0.tx.bytes",
        1,
      ],
    ];
    assert.equal(domstats(g1!.name).get("block.0.name"), "vda");
    for (const [series, labels, libvirtField, scale] of counters) {
      const stored = await raw(series, labels);
      assert.equal(stored.length, cycles.length, `${series}: one sample per cycle`);
      stored.forEach(([, v], i) => {
        const lo = field(cycles[i].before, libvirtField) * scale;
        const hi = field(cycles[i].after, libvirtField) * scale;
        assert.ok(v >= lo - 1e-9 && v <= hi + 1e-9, `${series} sample ${i}: ${v} within [${lo}, ${hi}]`);
      });
    }
    const vcpus = await raw("svc_vm_vcpus");
    assert.deepEqual(new Set(vcpus.map(([, v]) => v)), new Set([1]));

    const r = await monitoring(vm1(), [
      "cpu_utilization_pct",
      "memory_used_bytes",
      "disk_read_bytes_per_sec",
      "disk_write_bytes_per_sec",
      "network_receive_bytes_per_sec",
      "filesystem_used_bytes",
    ]);
    const points = (id: string, label?: [string, string]) => {
      const s = r.series.filter((x) => x.metricId === id && (!label || x.labels[label[0]] === label[1]));
      assert.equal(s.length, 1, `one ${id} series: ${JSON.stringify(r.quality?.errors)}`);
      return s[0].points.filter((pt) => !Number.isNaN(pt.value));
    };

    // CPU: each 10 s point averages the utilizations of the intervals whose end sample lies in its
    // window. Over all the intervals the points cover, their mean is compared with domstats' own
    // Δcpu.time ÷ Δt over the same cycles (reads just before each cycle's), which a single 5 s interval
    // would blur with the few hundred ms between the two reads on a busy host.
    const cpu = points("cpu_utilization_pct");
    const cpuStored = await raw("svc_vm_cpu_seconds_total");
    let sum = 0;
    const covered: number[] = [];
    for (const pt of cpu) {
      const endS = Number(pt.timeUnix);
      const ks = cpuStored
        .map((_, k) => k)
        .filter((k) => k > 0 && cpuStored[k][0] > endS - 10 && cpuStored[k][0] <= endS);
      sum += pt.value * ks.length;
      covered.push(...ks);
    }
    assert.ok(covered.length >= 4, `intervals with a CPU point: ${covered.join(",")}`);
    const [k0, k1] = [Math.min(...covered) - 1, Math.max(...covered)];
    assert.equal(covered.length, k1 - k0, "every interval between counted once");
    const dCpu = (field(cycles[k1].before, "cpu.time") - field(cycles[k0].before, "cpu.time")) / 1e9;
    const expected = (100 * dCpu) / ((cycles[k1].tRead - cycles[k0].tRead) / 1000);
    const actual = sum / covered.length;
    assert.ok(
      Math.abs(actual - expected) <= 2,
      `CPU ${actual.toFixed(2)} % vs domstats ${expected.toFixed(2)} %`,
    );
    assert.ok(
      cpu.some((pt) => pt.value > 1),
      `the burning guest shows CPU: ${cpu.map((pt) => pt.value.toFixed(1)).join(" ")}`,
    );

    // Memory: balloon available − unused at each sample (KiB), averaged over the point's window.
    const total = await raw("svc_vm_memory_total_bytes");
    const free = await raw("svc_vm_memory_free_bytes");
    total.forEach(([, v], i) => {
      const [lo, hi] = [
        field(cycles[i].before, "balloon.available"),
        field(cycles[i].after, "balloon.available"),
      ];
      assert.ok(
        v / 1024 === lo || v / 1024 === hi,
        `memory total ${v / 1024} KiB is balloon.available ${lo}/${hi}`,
      );
      const [flo, fhi] = [
        field(cycles[i].before, "balloon.unused"),
        field(cycles[i].after, "balloon.unused"),
      ];
      assert.ok(free[i][1] / 1024 === flo || free[i][1] / 1024 === fhi, `memory free is balloon.unused`);
    });
    for (const pt of points("memory_used_bytes")) {
      const endS = Number(pt.timeUnix);
      const inWindow = total.map((_, i) => i).filter((i) => total[i][0] > endS - 10 && total[i][0] <= endS);
      const expected = inWindow.reduce((a, i) => a + total[i][1] - free[i][1], 0) / inWindow.length;
      assert.ok(
        Math.abs(pt.value - expected) < 1,
        `memory used ${pt.value} = available − unused ${expected}`,
      );
    }

    // Rates: the 10 s window's rate is PromQL's rate of the stored counters in it: their delta over their
    // span, extrapolated towards the window's edges as Prometheus does (fully when an edge is within 1.1
    // sampling intervals, else by half an interval), so a cycle that ran late on a loaded machine moves
    // the expected figure with it instead of failing the test.
    const promRate = (w: [number, number][], startS: number, endS: number): number => {
      const delta = w[1][1] - w[0][1];
      const span = w[1][0] - w[0][0];
      const threshold = span * 1.1;
      let toStart = w[0][0] - startS;
      let toEnd = endS - w[1][0];
      if (toStart >= threshold) toStart = span / 2;
      if (delta > 0 && w[0][1] >= 0) toStart = Math.min(toStart, span * (w[0][1] / delta));
      if (toEnd >= threshold) toEnd = span / 2;
      return (delta * ((span + toStart + toEnd) / span)) / (endS - startS);
    };
    for (const [id, series, labels] of [
      ["disk_read_bytes_per_sec", "svc_vm_disk_read_bytes_total", ',device="vda"'],
      ["disk_write_bytes_per_sec", "svc_vm_disk_written_bytes_total", ',device="vda"'],
    ] as const) {
      const stored = await raw(series, labels);
      let n = 0;
      for (const pt of points(id, ["device", "vda"])) {
        const endS = Number(pt.timeUnix);
        const w = stored.filter(([ts]) => ts > endS - 10 && ts <= endS);
        if (w.length !== 2) continue;
        const expected = promRate(w, endS - 10, endS);
        assert.ok(
          Math.abs(pt.value - expected) <= 1e-6 * Math.max(1, expected),
          `${id} ${pt.value} = the stored counters' rate ${expected} (Δ/Δt ${(w[1][1] - w[0][1]) / (w[1][0] - w[0][0])})`,
        );
        n++;
      }
      assert.ok(n >= 1, `${id}: a point with two samples in its window`);
    }
    assert.ok(points("network_receive_bytes_per_sec").length >= 1, "network rate points");

    // Filesystem: the guest agent's reading equals the guest's own df for /data.
    const df = (await g1!.exec("/bin/df", ["-P", "-B1", "/data"])).trim().split("\n").at(-1)!.split(/\s+/);
    const fs = points("filesystem_used_bytes", ["mountpoint", "/data"]);
    assert.ok(fs.length >= 1, "filesystem points");
    assert.equal(fs.at(-1)!.value, Number(df[2]), `df: ${df.join(" ")}`);
    assert.equal(r.series.find((s) => s.metricId === "filesystem_used_bytes")?.labels.fstype, "ext2");

    // svc took each batch at once: after the first cycle (its state changes are written ahead) every
    // cycle's samples went from memory, with no spool write (docs/hypervisor.md, "Outages").
    assert.ok(
      collector.stats().directBatches >= cycles.length - 1,
      `sent from memory: ${collector.stats().directBatches} of ${cycles.length} cycles`,
    );
  });

  it("counts a domain svc does not know, logs it once and sends nothing for it", async () => {
    // Other domains on the host count too: at least this test's own.
    assert.ok(collector.stats().unmappedDomains >= 1);
    assert.ok(collector.stats().mappedDomains >= 2);
    const lines = logs.filter((l) => l.includes("domain maps to no svc VM") && l.includes(unmapped));
    assert.equal(lines.length, 1, lines.join("\n"));
    assert.match(lines[0], new RegExp(unmapped));
  });

  it("a domain naming a VM svc does not have: svc refuses that item, the collector logs it and goes on", () => {
    assert.ok(collector.stats().partiallyRefusedBatches >= 1);
    const refused = logs.filter((l) => l.includes("svc refused part of a batch"));
    assert.ok(
      refused.some((l) => l.includes("ghost") && l.includes("not found")),
      refused.join("\n"),
    );
  });

  it("a refused token keeps the batch in the spool and says why; it is sent once the token is right", async () => {
    const before = (await raw("svc_vm_cpu_seconds_total")).length;
    token = "svcc_not_the_collector_token";
    await cyclesFor(1, false);
    await collector.flush();
    assert.ok(collector.stats().spoolPending >= 1, "kept");
    const why = logs.filter((l) => l.includes("svc did not take a batch"));
    assert.ok(
      why.some((l) => l.includes('"status":401')),
      why.join("\n"),
    );
    assert.ok(
      !logs.some((l) => l.includes("svcc_not_the_collector_token") || l.includes(TOKEN)),
      "no token in the log",
    );
    assert.equal((await raw("svc_vm_cpu_seconds_total")).length, before);
    token = TOKEN;
    await until(drained, 30 * S, "the kept batch to be sent");
    assert.equal((await raw("svc_vm_cpu_seconds_total")).length, before + 1);
  });

  it("svc down while the collector runs: the spooled samples arrive afterwards, none lost, none duplicated", async () => {
    const n0 = cycles.length;
    const restarting = t.restart(3 * INTERVAL);
    await sleep(200);
    // The third cycle's check right after it (~10 s into the 15 s outage), not after its interval's sleep,
    // when svc may be back and a retry may already have drained the spool.
    await cyclesFor(2, false);
    await cycle(false);
    assert.ok(
      collector.stats().spoolPending >= 3,
      `spooled during the outage: ${collector.stats().spoolPending}`,
    );
    await restarting;
    await until(drained, 60 * S, "the backlog to drain");
    await cyclesFor(1);
    const stored = await raw("svc_vm_cpu_seconds_total");
    assert.equal(
      stored.length,
      cycles.length,
      `one sample per cycle (${n0} before the outage, ${cycles.length} now)`,
    );
    for (let i = 1; i < stored.length; i++)
      assert.ok(stored[i][0] > stored[i - 1][0], "times strictly increase");
    // Each sample is still the one observed in its own cycle.
    for (const [i, [ts]] of stored.entries()) {
      assert.ok(ts * 1000 >= cycles[i].t0 - 1 && ts * 1000 <= cycles[i].t1 + 1, `sample ${i} time`);
    }
  });

  it("libvirtd stopped: the collector logs it and retries, the VMs' data goes stale and they stay running", async () => {
    await stopLibvirtd();
    const failed0 = collector.stats().failedCycles;
    await cyclesFor(4, false, false);
    assert.equal(collector.stats().failedCycles - failed0, 4);
    assert.equal(logs.filter((l) => l.includes("libvirt unreadable")).length, 1, "logged once per outage");
    const r = await monitoring(vm1(), ["cpu_utilization_pct"], 5);
    assert.equal(r.quality?.stale, true, "stale after three intervals without a sample");
    for (const vm of [vm1(), vm2()]) assert.equal((await t.admin.vms.getVM({ name: vm })).state, "RUNNING");
    await startLibvirt();
    // A restarted libvirtd reconnects to the running QEMUs first; on a loaded machine that can take a
    // cycle or two, so the collector gets up to six before the data must be fresh again.
    let again = await monitoring(vm1(), ["cpu_utilization_pct"], 5);
    for (let i = 0; i < 6 && again.quality?.stale !== false; i++) {
      await cyclesFor(1);
      again = await monitoring(vm1(), ["cpu_utilization_pct"], 5);
    }
    assert.ok(logs.some((l) => l.includes("libvirt reachable again")));
    assert.equal(again.quality?.stale, false);
  });

  it("a guest shutdown is an intentional stop; a host-side destroy is an unexpected stop and opens an incident", async () => {
    const owner = t.clients(p.owner.session);
    const rule = await owner.alerts.saveAlertRule({
      projectName: p.projectName,
      id: randomUUID(),
      requestId: randomUUID(),
      expectedVersion: "0",
      spec: {
        displayName: "Unexpected stop",
        metricId: "vm_unexpected_stop",
        operator: "GREATER_THAN",
        threshold: 0,
        sustainedSeconds: 0,
        severity: "CRITICAL",
        allVms: true,
      },
    });
    await t.app.evaluator.runCycle();
    virsh("shutdown", "--mode", "agent", g1!.name);
    await until(() => virsh("domstate", g1!.name).trim() === "shut off", 60 * S, "the guest to power off");
    virsh("destroy", g2!.name);
    await cycle();
    const last = async (vm: string) => (await t.admin.vms.listVMStateEvents({ vm })).events.at(-1);
    assert.deepEqual(
      [(await last(vm1()))?.state, (await last(vm1()))?.stopReason],
      ["STOPPED", "USER"],
      "virsh shutdown: the guest shut down",
    );
    assert.deepEqual(
      [(await last(vm2()))?.state, (await last(vm2()))?.stopReason],
      ["STOPPED", "UNEXPECTED"],
    );
    await t.app.evaluator.runCycle();
    const incidents = (
      await owner.incidents.listIncidents({ projectName: p.projectName, rule: rule.name, pageSize: 50 })
    ).incidents;
    assert.deepEqual(
      incidents.map((i) => [i.vmName, i.state]),
      [[vm2(), "OPEN"]],
    );
  });
});
