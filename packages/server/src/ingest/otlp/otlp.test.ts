import assert from "node:assert/strict";
import { existsSync, readFileSync, statfsSync } from "node:fs";
import { cpus } from "node:os";
import { after, before, describe, it } from "node:test";
import { gzipSync } from "node:zlib";
import { fromJson, toBinary } from "@bufbuild/protobuf";
import { type DiagLogger, DiagLogLevel, diag } from "@opentelemetry/api";
import { OTLPMetricExporter } from "@opentelemetry/exporter-metrics-otlp-proto";
import { HostMetrics } from "@opentelemetry/host-metrics";
import {
  AggregationTemporality,
  MeterProvider,
  MetricReader,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import { buildAgentPackage } from "../../../testing/agent-package.ts";
import { testDialects } from "../../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../../testing/harness.ts";
import { generateSecret } from "../../iam/secrets.ts";
import { labelValue, type SeriesData } from "../../storage/interface.ts";
import { ExportMetricsServiceRequestSchema } from "./gen/opentelemetry/proto/collector/metrics/v1/metrics_service_pb.ts";

/**
 * A real sender: the OpenTelemetry JS SDK with @opentelemetry/host-metrics (CPU, memory, network) and,
 * as that package has none, filesystem and disk instruments named by the host-metrics conventions,
 * exported by @opentelemetry/exporter-metrics-otlp-proto (protobuf, gzip) with a guest-agent token.
 * Then the answers the OTLP specification asks for to bad input.
 */
const [sqlite] = await testDialects();
const S = 1000;

function procStat(): { busy: number; softirq: number } {
  const f = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
  return { busy: (f[0]! + f[1]! + f[2]! + f[5]! + f[6]!) / 100, softirq: f[6]! / 100 };
}

function meminfo(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const l of readFileSync("/proc/meminfo", "utf8").split("\n")) {
    const m = /^(\w+):\s+(\d+) kB/.exec(l);
    if (m) out[m[1]!] = Number(m[2]) * 1024;
  }
  return out;
}

/** The mount source of `/` (its `device`), from /proc/self/mounts. */
function rootDevice(): string {
  const line = readFileSync("/proc/self/mounts", "utf8")
    .split("\n")
    .map((l) => l.split(" "))
    .filter((f) => f[1] === "/")
    .pop();
  return line?.[0] ?? "rootfs";
}

function wholeDisks(): Map<string, { read: number; written: number }> {
  const out = new Map<string, { read: number; written: number }>();
  for (const l of readFileSync("/proc/diskstats", "utf8").trim().split("\n")) {
    const f = l.trim().split(/\s+/);
    if (existsSync(`/sys/block/${f[2]}`))
      out.set(f[2]!, { read: Number(f[5]) * 512, written: Number(f[9]) * 512 });
  }
  return out;
}

/** Filesystem and disk instruments as the host-metrics conventions name them (the JS package has none). */
function addFilesystemAndDisk(provider: MeterProvider): void {
  const meter = provider.getMeter("svc-test-host");
  meter.createObservableUpDownCounter("system.filesystem.usage", { unit: "By" }).addCallback((r) => {
    const s = statfsSync("/");
    const base = {
      "system.device": rootDevice(),
      "system.filesystem.mountpoint": "/",
      "system.filesystem.type": "ext4",
      "system.filesystem.mode": "rw",
    };
    r.observe((s.blocks - s.bfree) * s.bsize, { ...base, "system.filesystem.state": "used" });
    r.observe(s.bavail * s.bsize, { ...base, "system.filesystem.state": "free" });
    r.observe((s.bfree - s.bavail) * s.bsize, { ...base, "system.filesystem.state": "reserved" });
  });
  meter.createObservableCounter("system.disk.io", { unit: "By" }).addCallback((r) => {
    for (const [device, d] of wholeDisks()) {
      r.observe(d.read, { "system.device": device, "disk.io.direction": "read" });
      r.observe(d.written, { "system.device": device, "disk.io.direction": "write" });
    }
  });
}

/** Collects on demand (for the delta case: the SDK's own serialization of one collection). */
class OnDemandReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

describe("OTLP/HTTP metrics from the OpenTelemetry JS SDK", () => {
  let t: TestApp;
  let p: SeededProject;
  let url: string;
  const tokens: string[] = [];
  const warnings: string[] = [];
  let provider: MeterProvider | undefined;
  before(async () => {
    t = await startTestApp(sqlite.dialect, { agentPackageDir: buildAgentPackage() }, { wallClock: true });
    p = await t.seedProject("otl", ["sdk", "delta", "bad"]);
    for (const vm of p.vms) {
      tokens.push(
        (await t.clients(p.owner.session).monitoring.enableExpandedMonitoring({ name: vm })).agentToken,
      );
    }
    url = `${t.baseUrl}/v1/ingest/otlp/v1/metrics`;
    const logger: DiagLogger = {
      error: () => {},
      warn: (...a: unknown[]) => warnings.push(a.map(String).join(" ")),
      info: () => {},
      debug: () => {},
      verbose: () => {},
    };
    diag.setLogger(logger, DiagLogLevel.WARN);
  });
  after(async () => {
    await provider?.shutdown();
    diag.disable();
    await t?.close();
  });

  const read = (vm: string, name: string, fromMs: number): Promise<SeriesData[]> =>
    t.app.metrics.select(
      "otl",
      [
        { type: "=", name: "__name__", value: name },
        { type: "=", name: "vm", value: vm },
      ],
      fromMs,
      Date.now(),
    );

  it("host metrics through the protobuf exporter (gzip) land on the token's VM within tolerance of /proc and statfs", async () => {
    const vm = p.vms[0]!;
    const from = Date.now();
    const exporter = new OTLPMetricExporter({
      url,
      headers: { Authorization: `Bearer ${tokens[0]}` },
      compression: "gzip" as never, // the CompressionAlgorithm enum's value
    });
    provider = new MeterProvider({
      readers: [new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3000 })],
    });
    new HostMetrics({ meterProvider: provider, name: "svc-test" }).start();
    addFilesystemAndDisk(provider);
    const deadline = Date.now() + 120 * S;
    for (;;) {
      const cpu = await read(vm, "svc_vm_guest_cpu_seconds_total", from);
      const first = cpu[0]?.timestamps[0] ?? Number.POSITIVE_INFINITY;
      if ((cpu[0]?.timestamps.length ?? 0) >= 3 && first <= Math.floor(Date.now() / 30_000) * 30_000) break;
      assert.ok(Date.now() < deadline, "three exports stored (one before a 30 s step) within 120 s");
      await new Promise((r) => setTimeout(r, 1000));
    }

    const host = procStat();
    const cpu = (await read(vm, "svc_vm_guest_cpu_seconds_total", from))[0]!;
    const last = cpu.values[cpu.values.length - 1]!;
    const lag = (Date.now() - cpu.timestamps[cpu.timestamps.length - 1]!) / S;
    const n = cpus().length;
    // Node's os.cpus() counts user, nice, sys and irq (no softirq): within softirq and the lag of /proc/stat.
    assert.ok(last <= host.busy + 1, `guest CPU ${last} s ≤ /proc/stat's ${host.busy} s`);
    assert.ok(
      host.busy - last <= host.softirq + n * (lag + 2),
      `guest CPU ${last} s against /proc/stat's ${host.busy} s`,
    );
    const vcpus = (await read(vm, "svc_vm_guest_vcpus", from))[0]!;
    assert.equal(vcpus.values[vcpus.values.length - 1], n);

    const res = await t.clients(p.owner.session).monitoring.queryVMMonitoring({
      name: vm,
      metricIds: [
        "memory_total_bytes",
        "memory_used_bytes",
        "filesystem_size_bytes",
        "filesystem_used_bytes",
      ],
      startTimeUnix: BigInt(Math.floor(from / S) - 30),
      endTimeUnix: BigInt(Math.floor(Date.now() / S)),
      stepSeconds: 30,
    });
    const latest = (id: string) => {
      const s = res.series.find((x) => x.metricId === id && x.source === "GUEST_AGENT");
      assert.ok(s && s.points.length > 0, `QueryVMMonitoring has ${id}`);
      return s.points[s.points.length - 1]!.value;
    };
    const mem = meminfo();
    assert.equal(latest("memory_total_bytes"), mem.MemTotal);
    // The JS package's "free" state is Node's os.freemem(), i.e. MemAvailable (docs/agent.md).
    const used = latest("memory_used_bytes");
    assert.ok(
      Math.abs(used - (mem.MemTotal! - mem.MemAvailable!)) <= 0.1 * mem.MemTotal!,
      `memory used ${used}`,
    );
    const s = statfsSync("/");
    assert.equal(latest("filesystem_size_bytes"), s.blocks * s.bsize);
    const fsUsed = latest("filesystem_used_bytes");
    const avail = (await read(vm, "svc_vm_filesystem_avail_bytes", from))[0]!;
    const pct = (fsUsed / (fsUsed + avail.values[avail.values.length - 1]!)) * 100;
    const dfPct = ((s.blocks - s.bfree) / (s.blocks - s.bfree + s.bavail)) * 100;
    assert.ok(Math.abs(pct - dfPct) <= 1, `used ÷ (used + available) ${pct} % against statfs' ${dfPct} %`);

    const disks = (await read(vm, "svc_vm_guest_disk_read_bytes_total", from)).map((x) =>
      labelValue(x.labels, "device"),
    );
    assert.ok(disks.length > 0 && !disks.some((d) => /^(loop|zram)/.test(d)), `whole disks only: ${disks}`);
    const nics = (await read(vm, "svc_vm_guest_network_receive_bytes_total", from)).map((x) =>
      labelValue(x.labels, "interface"),
    );
    assert.ok(!nics.includes("lo") && !nics.some((x) => x.startsWith("ifb")), `no lo or ifb: ${nics}`);
    for (const nic of readFileSync("/proc/net/dev", "utf8").split("\n").slice(2)) {
      const name = nic.split(":")[0]!.trim();
      if (name && !existsSync(`/sys/devices/virtual/net/${name}`))
        assert.ok(nics.includes(name), `physical ${name}`);
    }
    // The metrics svc does not map (system.cpu.utilization, process.*) came back as a partial success
    // the SDK decoded and logged.
    assert.ok(
      warnings.some(
        (w) => /Partial Success/.test(w) && /unknown_metric/.test(w) && /system\.cpu\.utilization/.test(w),
      ),
      `the SDK logged the partial success: ${warnings.join(" | ").slice(0, 400)}`,
    );
    assert.equal(
      (await read(p.vms[1]!, "svc_vm_guest_cpu_seconds_total", from)).length,
      0,
      "nothing on another VM",
    );
    // The VM's page names the sender (by the exporter's User-Agent) and when svc last took its samples.
    const list = await t.clients(p.owner.session).monitoring.listVMMonitoring({
      projectName: p.projectName,
      inventoryOnly: true,
    });
    const sender = list.vms.find((v) => v.name === vm)?.guestSender;
    assert.equal(sender?.name, "OpenTelemetry JavaScript SDK (OTLP)");
    const seen = Number(sender.lastSeenUnix) * S;
    assert.ok(seen >= from - S && seen <= Date.now(), `last seen ${seen} after the exporter started`);
  });

  it("a delta-temporality export is answered 400 naming it, the SDK does not retry, the cumulative rest is stored", async () => {
    const reader = new OnDemandReader({ aggregationTemporalitySelector: () => AggregationTemporality.DELTA });
    const deltaProvider = new MeterProvider({ readers: [reader] });
    new HostMetrics({ meterProvider: deltaProvider, name: "svc-delta" }).start();
    const { resourceMetrics } = await reader.collect();
    const exporter = new OTLPMetricExporter({ url, headers: { Authorization: `Bearer ${tokens[1]}` } });
    const result = await new Promise<{ code: number; error?: Error & { code?: number; data?: string } }>(
      (r) => exporter.export(resourceMetrics, r),
    );
    await deltaProvider.shutdown();
    assert.equal(result.error?.code, 400, String(result.error));
    assert.match(
      result.error?.data ?? "",
      /system\.cpu\.time has delta temporality; svc takes cumulative sums only/,
    );
    // Gauges (memory) have no temporality: stored.
    assert.equal((await read(p.vms[1]!, "svc_vm_memory_total_bytes", Date.now() - 60 * S)).length, 1);
    assert.equal((await read(p.vms[1]!, "svc_vm_guest_cpu_seconds_total", Date.now() - 60 * S)).length, 0);
  });

  it("bad input: each a clear 4xx or partial success naming the reason, the valid rest stored", async () => {
    const vm = p.vms[2]!;
    const now = Date.now();
    const post = (body: Buffer | string, type: string, token = tokens[2]!, encoding?: string) =>
      fetch(url, {
        method: "POST",
        headers: {
          "Content-Type": type,
          Authorization: `Bearer ${token}`,
          ...(encoding ? { "Content-Encoding": encoding } : {}),
        },
        body,
      });
    type Pt = { attrs: Record<string, string>; v: number };
    const gauge = (name: string, points: Pt[], t = now) => ({
      name,
      gauge: {
        dataPoints: points.map((pt) => ({
          attributes: Object.entries(pt.attrs).map(([key, value]) => ({
            key,
            value: { stringValue: value },
          })),
          timeUnixNano: String(BigInt(t) * 1_000_000n),
          asInt: String(pt.v),
        })),
      },
    });
    const sum = (name: string, points: Pt[], t = now) => {
      const g = gauge(name, points, t);
      return { name, sum: { dataPoints: g.gauge.dataPoints, aggregationTemporality: 2, isMonotonic: true } };
    };
    const json = {
      resourceMetrics: [
        {
          resource: { attributes: [{ key: "host.name", value: { stringValue: "someone-else" } }] },
          scopeMetrics: [
            {
              metrics: [
                gauge("system.memory.usage", [
                  { attrs: { "system.memory.state": "used" }, v: 3000 },
                  { attrs: { "system.memory.state": "free" }, v: 1000 },
                ]),
                gauge("system.load.average.1m", [{ attrs: {}, v: 1 }]),
                sum(
                  "system.network.io",
                  Array.from({ length: 40 }, (_, i) => ({
                    attrs: { "system.device": `eth${i}`, "network.io.direction": "receive" },
                    v: 100 + i,
                  })),
                ),
              ],
            },
          ],
        },
      ],
    };
    const res = await post(gzipSync(JSON.stringify(json)), "application/json", undefined, "gzip");
    assert.equal(res.status, 200);
    const answer = (await res.json()) as {
      partialSuccess?: { rejectedDataPoints?: string; errorMessage?: string };
    };
    assert.equal(answer.partialSuccess?.rejectedDataPoints, "9");
    assert.match(answer.partialSuccess?.errorMessage ?? "", /unknown_metric: 1 series, 1 samples/);
    assert.match(
      answer.partialSuccess?.errorMessage ?? "",
      /too_many_series: 8 series.*more than 32 network devices/,
    );
    const used = await read(vm, "svc_vm_memory_used_bytes", now - S);
    assert.deepEqual([...used[0]!.values], [3000], "capacity 4000 − free 1000, on the token's VM");
    assert.equal((await read(vm, "svc_vm_guest_network_receive_bytes_total", now - S)).length, 32);

    // Full success: the empty ExportMetricsServiceResponse — no bytes in protobuf, `{}` in JSON.
    const disk = (t: number) => ({
      resourceMetrics: [
        {
          scopeMetrics: [
            {
              metrics: [
                sum(
                  "system.disk.io",
                  [
                    { attrs: { "system.device": "vda", "disk.io.direction": "read" }, v: 512 },
                    { attrs: { "system.device": "vda", "disk.io.direction": "write" }, v: 1024 },
                  ],
                  t,
                ),
              ],
            },
          ],
        },
      ],
    });
    const whole = await post(JSON.stringify(disk(now - 30 * S)), "application/json");
    assert.equal(whole.status, 200);
    assert.equal(await whole.text(), "{}");
    const wholePb = await post(
      Buffer.from(
        toBinary(ExportMetricsServiceRequestSchema, fromJson(ExportMetricsServiceRequestSchema, disk(now))),
      ),
      "application/x-protobuf",
    );
    assert.equal(wholePb.status, 200);
    assert.equal(wholePb.headers.get("content-type"), "application/x-protobuf");
    assert.equal((await wholePb.arrayBuffer()).byteLength, 0);
    assert.equal((await read(vm, "svc_vm_guest_disk_read_bytes_total", now - 60 * S))[0]?.values.length, 2);

    const big = await post(Buffer.alloc(10 * 1024 * 1024, 0x0a), "application/x-protobuf");
    assert.equal(big.status, 413);
    assert.match(Buffer.from(await big.arrayBuffer()).toString("latin1"), /at most 4194304 bytes \(4 MiB\)/);
    const malformed = await post(
      Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01]),
      "application/x-protobuf",
    );
    assert.equal(malformed.status, 400);
    assert.match(
      Buffer.from(await malformed.arrayBuffer()).toString("latin1"),
      /not an OTLP ExportMetricsServiceRequest \(protobuf\)/,
    );
    const notJson = await post("{", "application/json");
    assert.equal(notJson.status, 400);
    assert.match(
      ((await notJson.json()) as { message: string }).message,
      /not an OTLP ExportMetricsServiceRequest \(json\)/,
    );
    const stranger = generateSecret("agent");
    const unknown = await post(JSON.stringify(json), "application/json", stranger);
    assert.equal(unknown.status, 401);
    const body = await unknown.text();
    assert.match(body, /unknown or revoked/);
    assert.equal(body.includes(stranger), false, "the token is never echoed");
    const collector = await post(JSON.stringify(json), "application/json", t.app.config.collectorToken);
    assert.equal(collector.status, 403);
  });
});
