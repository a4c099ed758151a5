/**
 * `npm run bench:ingest -- --guest [--quick]`: ingest CPU per sample of the OTLP/HTTP path against the
 * remote-write path, for guests sending with their guest-agent token (docs/agent.md, "Use the agent you
 * already run"). One svc child process; two sets of VMs whose guests measure exactly the same values:
 * one set sends node_exporter's series as vmagent does after docs/agent.md's `keep` rule (snappy remote
 * write, `instance` and `job` added), the other the OpenTelemetry Collector's hostmetrics receiver's
 * metrics of the same scrapers (protobuf, gzip: the otlphttp exporter's default). Every guest sends one
 * request per 30 s collection, the senders `BENCH_CONCURRENCY` (4) at a time.
 *
 * The arms alternate A B B A (remote write, OTLP, OTLP, remote write), each on its own VMs' timeline, so
 * the machine's drift falls on both. CPU is the svc process's user + system time over the arm; samples
 * are what svc stored (`svc_ingest_samples_accepted_total{source="agent"}`: the mapped svc series, the
 * same rule for both formats; derived series not counted). The ratio OTLP ÷ remote write of CPU per
 * stored sample is the figure (goal ≤ 1.3). Bodies are encoded before the timed part.
 *
 * 200 VMs × 1 h at 30 s per arm (`--quick`: 50 VMs × 20 min); BENCH_GUEST_VMS, BENCH_GUEST_STEPS,
 * BENCH_SVC_NODE_ARGS (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`) as in bench:ingest.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { create, toBinary } from "@bufbuild/protobuf";
import { encodeRemoteWriteBody, type TimeSeries } from "@svc/remotewrite";
import { createSvcClients } from "@svc/sdk";
import { ExportMetricsServiceRequestSchema } from "../../packages/server/src/ingest/otlp/gen/opentelemetry/proto/collector/metrics/v1/metrics_service_pb.ts";
import { AggregationTemporality } from "../../packages/server/src/ingest/otlp/gen/opentelemetry/proto/metrics/v1/metrics_pb.ts";
import { buildAgentPackage } from "../../packages/server/testing/agent-package.ts";
import { seededRandom } from "../../packages/server/testing/seeded-random.ts";
import { loadAverageLine } from "../common/measure.ts";
import { cpuSeconds, freePort } from "./proc.ts";
import { ADMIN_TOKEN, startTarget, stopTarget, targets } from "./targets.ts";

const STEP_MS = 30_000;
const MODES = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"] as const;
/** node_exporter's mode names as the OpenTelemetry conventions spell them. */
const OTEL_MODE: Record<(typeof MODES)[number], string> = {
  user: "user",
  nice: "nice",
  system: "system",
  idle: "idle",
  iowait: "wait",
  irq: "interrupt",
  softirq: "softirq",
  steal: "steal",
};
const FILESYSTEMS = [
  { device: "/dev/vda1", mountpoint: "/", fstype: "ext4" },
  { device: "/dev/vdb", mountpoint: "/data", fstype: "xfs" },
] as const;
const DISKS = ["vda", "vdb"] as const;
const NICS = ["lo", "eth0"] as const;

/** One guest's readings at one collection, in both senders' shapes from the same numbers. */
interface Reading {
  t: number;
  cpu: number[][]; // [cpu][mode] seconds
  mem: { total: number; free: number; available: number; cached: number; buffers: number; slab: number };
  fs: { size: number; free: number; avail: number }[];
  disk: { read: number; written: number; reads: number; writes: number }[];
  net: { rx: number; tx: number; rxp: number; txp: number }[];
}

/** `steps` collections of one guest with 4 vCPUs, ending at `endMs` (deterministic per `seed`). */
export function guestReadings(seed: number, steps: number, endMs: number): Reading[] {
  const rand = seededRandom(seed);
  const offset = Math.floor(rand() * STEP_MS);
  const cpu = Array.from({ length: 4 }, () => MODES.map(() => Math.floor(rand() * 1e5) / 100));
  const total = 8 * 2 ** 30;
  const disk = DISKS.map(() => ({ read: 1e9, written: 2e9, reads: 1e5, writes: 2e5 }));
  const net = NICS.map(() => ({ rx: 1e9, tx: 5e8, rxp: 1e6, txp: 8e5 }));
  const out: Reading[] = [];
  for (let s = 0; s < steps; s++) {
    for (const c of cpu)
      for (let m = 0; m < c.length; m++) c[m] = Math.round((c[m]! + rand() * 7.5) * 100) / 100;
    const free = Math.round(((0.2 + rand() * 0.1) * total) / 4096) * 4096;
    const cached = Math.round(((0.3 + rand() * 0.05) * total) / 4096) * 4096;
    for (const d of disk) {
      d.read += Math.floor(rand() * 1e6) * 512;
      d.written += Math.floor(rand() * 1e6) * 512;
      d.reads += Math.floor(rand() * 100);
      d.writes += Math.floor(rand() * 200);
    }
    for (const n of net) {
      n.rx += Math.floor(rand() * 1e6);
      n.tx += Math.floor(rand() * 1e6);
      n.rxp += Math.floor(rand() * 1e3);
      n.txp += Math.floor(rand() * 1e3);
    }
    out.push({
      t: endMs - (steps - 1 - s) * STEP_MS - offset,
      cpu: cpu.map((c) => [...c]),
      mem: { total, free, available: free + cached, cached, buffers: 64 << 20, slab: 128 << 20 },
      fs: FILESYSTEMS.map((_, i) => {
        const size = (i + 1) * 50 * 2 ** 30;
        const fsFree = Math.round(((0.4 + rand() * 0.01) * size) / 4096) * 4096;
        return { size, free: fsFree, avail: fsFree - size * 0.05 };
      }),
      disk: disk.map((d) => ({ ...d })),
      net: net.map((n) => ({ ...n })),
    });
  }
  return out;
}

/** vmagent's remote-write body for one scrape after docs/agent.md's `keep` rule. */
export function remoteWriteBody(r: Reading): Uint8Array {
  const ts: TimeSeries[] = [];
  const add = (name: string, labels: Record<string, string>, value: number) => {
    ts.push({
      labels: [
        { name: "__name__", value: name },
        ...Object.entries(labels).map(([n, v]) => ({ name: n, value: v })),
        { name: "instance", value: "127.0.0.1:9100" },
        { name: "job", value: "node" },
      ].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
      samples: [{ value, timestampMs: r.t }],
    });
  };
  r.cpu.forEach((c, i) => {
    for (const [m, mode] of MODES.entries()) add("node_cpu_seconds_total", { cpu: String(i), mode }, c[m]!);
  });
  add("node_memory_MemTotal_bytes", {}, r.mem.total);
  add("node_memory_MemFree_bytes", {}, r.mem.free);
  add("node_memory_MemAvailable_bytes", {}, r.mem.available);
  add("node_memory_Cached_bytes", {}, r.mem.cached);
  add("node_memory_Buffers_bytes", {}, r.mem.buffers);
  FILESYSTEMS.forEach((f, i) => {
    const l = { device: f.device, fstype: f.fstype, mountpoint: f.mountpoint };
    add("node_filesystem_size_bytes", l, r.fs[i]!.size);
    add("node_filesystem_free_bytes", l, r.fs[i]!.free);
    add("node_filesystem_avail_bytes", l, r.fs[i]!.avail);
    add("node_filesystem_readonly", l, 0);
  });
  DISKS.forEach((device, i) => {
    const d = r.disk[i]!;
    add("node_disk_read_bytes_total", { device }, d.read);
    add("node_disk_written_bytes_total", { device }, d.written);
    add("node_disk_reads_completed_total", { device }, d.reads);
    add("node_disk_writes_completed_total", { device }, d.writes);
  });
  NICS.forEach((device, i) => {
    const n = r.net[i]!;
    add("node_network_receive_bytes_total", { device }, n.rx);
    add("node_network_transmit_bytes_total", { device }, n.tx);
    add("node_network_receive_packets_total", { device }, n.rxp);
    add("node_network_transmit_packets_total", { device }, n.txp);
  });
  return encodeRemoteWriteBody({ timeseries: ts, metadata: [] });
}

const BOOT_NS = BigInt(Date.now() - 86_400_000) * 1_000_000n;

/** The Collector's hostmetrics export of the same scrape: one scope per scraper, gzip'd protobuf. */
export function otlpBody(r: Reading): Uint8Array {
  const t = BigInt(r.t) * 1_000_000n;
  const kv = (attrs: Record<string, string | number>) =>
    Object.entries(attrs).map(([key, v]) => ({
      key,
      value: {
        value:
          typeof v === "number"
            ? { case: "intValue" as const, value: BigInt(v) }
            : { case: "stringValue" as const, value: v },
      },
    }));
  type Point = [Record<string, string | number>, number, "int" | "double"];
  const sum = (name: string, unit: string, monotonic: boolean, points: Point[]) => ({
    name,
    unit,
    data: {
      case: "sum" as const,
      value: {
        isMonotonic: monotonic,
        aggregationTemporality: AggregationTemporality.CUMULATIVE,
        dataPoints: points.map(([attrs, v, kind]) => ({
          attributes: kv(attrs),
          startTimeUnixNano: BOOT_NS,
          timeUnixNano: t,
          value:
            kind === "int"
              ? { case: "asInt" as const, value: BigInt(Math.round(v)) }
              : { case: "asDouble" as const, value: v },
        })),
      },
    },
  });
  const scope = (scraper: string, metrics: ReturnType<typeof sum>[]) => ({
    scope: {
      name: `github.com/open-telemetry/opentelemetry-collector-contrib/receiver/hostmetricsreceiver/internal/scraper/${scraper}scraper`,
      version: "0.115.0",
    },
    metrics,
  });
  const req = create(ExportMetricsServiceRequestSchema, {
    resourceMetrics: [
      {
        resource: {},
        schemaUrl: "https://opentelemetry.io/schemas/1.9.0",
        scopeMetrics: [
          scope("cpu", [
            sum(
              "system.cpu.time",
              "s",
              true,
              r.cpu.flatMap((c, i) =>
                MODES.map(
                  (m, k): Point => [{ "cpu.logical_number": i, "cpu.mode": OTEL_MODE[m] }, c[k]!, "double"],
                ),
              ),
            ),
          ]),
          scope("memory", [
            sum("system.memory.usage", "By", false, [
              [
                { "system.memory.state": "used" },
                r.mem.total - r.mem.free - r.mem.cached - r.mem.buffers - r.mem.slab,
                "int",
              ],
              [{ "system.memory.state": "free" }, r.mem.free, "int"],
              [{ "system.memory.state": "buffers" }, r.mem.buffers, "int"],
              [{ "system.memory.state": "cached" }, r.mem.cached, "int"],
              [{ "system.memory.state": "slab_reclaimable" }, r.mem.slab, "int"],
              [{ "system.memory.state": "slab_unreclaimable" }, 32 << 20, "int"],
            ]),
          ]),
          scope("filesystem", [
            sum(
              "system.filesystem.usage",
              "By",
              false,
              FILESYSTEMS.flatMap((f, i): Point[] => {
                const a = {
                  "system.device": f.device,
                  "system.filesystem.mode": "rw",
                  "system.filesystem.mountpoint": f.mountpoint,
                  "system.filesystem.type": f.fstype,
                };
                const s = r.fs[i]!;
                return [
                  [{ ...a, "system.filesystem.state": "used" }, s.size - s.free, "int"],
                  [{ ...a, "system.filesystem.state": "free" }, s.avail, "int"],
                  [{ ...a, "system.filesystem.state": "reserved" }, s.free - s.avail, "int"],
                ];
              }),
            ),
          ]),
          scope("disk", [
            sum(
              "system.disk.io",
              "By",
              true,
              DISKS.flatMap((device, i): Point[] => [
                [{ "system.device": device, "disk.io.direction": "read" }, r.disk[i]!.read, "int"],
                [{ "system.device": device, "disk.io.direction": "write" }, r.disk[i]!.written, "int"],
              ]),
            ),
            sum(
              "system.disk.operations",
              "{operation}",
              true,
              DISKS.flatMap((device, i): Point[] => [
                [{ "system.device": device, "disk.io.direction": "read" }, r.disk[i]!.reads, "int"],
                [{ "system.device": device, "disk.io.direction": "write" }, r.disk[i]!.writes, "int"],
              ]),
            ),
          ]),
          scope("network", [
            sum(
              "system.network.io",
              "By",
              true,
              NICS.flatMap((device, i): Point[] => [
                [{ "system.device": device, "network.io.direction": "receive" }, r.net[i]!.rx, "int"],
                [{ "system.device": device, "network.io.direction": "transmit" }, r.net[i]!.tx, "int"],
              ]),
            ),
            sum(
              "system.network.packets",
              "{packet}",
              true,
              NICS.flatMap((device, i): Point[] => [
                [{ "system.device": device, "network.io.direction": "receive" }, r.net[i]!.rxp, "int"],
                [{ "system.device": device, "network.io.direction": "transmit" }, r.net[i]!.txp, "int"],
              ]),
            ),
          ]),
        ],
      },
    ],
  });
  return gzipSync(toBinary(ExportMetricsServiceRequestSchema, req));
}

interface Arm {
  readonly name: "remote write" | "OTLP";
  readonly url: string;
  readonly headers: Record<string, string>;
  /** [step][vm]: each VM's body of that collection, and its token. */
  readonly steps: { body: Uint8Array; token: string }[][];
  cpuS: number;
  samples: number;
  bytes: number;
  failed: number;
  firstError: string;
}

export async function compareGuestFormats(opts: { quick: boolean; concurrency: number }): Promise<void> {
  const num = (name: string, dflt: number) => Number(process.env[name] || dflt);
  const vmsPerArm = num("BENCH_GUEST_VMS", opts.quick ? 50 : 200);
  const steps = num("BENCH_GUEST_STEPS", opts.quick ? 40 : 120);
  const svcSpec = targets.find((t) => t.name === "svc")!;
  const dir = mkdtempSync(join(tmpdir(), "svc-bench-guest-"));
  const spec = {
    ...svcSpec,
    start: (d: string, port: number) => {
      const s = svcSpec.start(d, port);
      return { ...s, env: { ...s.env, SVC_AGENT_PACKAGE_DIR: buildAgentPackage() } };
    },
  };
  const { running } = await startTarget(spec, dir, await freePort());
  try {
    const base = running.base;
    const tokens = await guestTokens(base, 2 * vmsPerArm);
    const endMs = Math.floor(Date.now() / STEP_MS) * STEP_MS - STEP_MS;
    const make = (name: Arm["name"], offset: number): Arm => {
      const byVm = Array.from({ length: vmsPerArm }, (_, i) => guestReadings(1000 + i, steps, endMs));
      return {
        name,
        url: base + (name === "OTLP" ? "/v1/ingest/otlp/v1/metrics" : "/v1/ingest/prometheus/api/v1/write"),
        headers:
          name === "OTLP"
            ? { "content-type": "application/x-protobuf", "content-encoding": "gzip" }
            : {
                "content-type": "application/x-protobuf",
                "content-encoding": "snappy",
                "x-prometheus-remote-write-version": "0.1.0",
              },
        steps: Array.from({ length: steps }, (_, s) =>
          byVm.map((readings, i) => ({
            body: name === "OTLP" ? otlpBody(readings[s]!) : remoteWriteBody(readings[s]!),
            token: tokens[offset + i]!,
          })),
        ),
        cpuS: 0,
        samples: 0,
        bytes: 0,
        failed: 0,
        firstError: "",
      };
    };
    const rw = make("remote write", 0);
    const otlp = make("OTLP", vmsPerArm);
    console.log(
      `guest formats: ${vmsPerArm} VMs per format × ${steps} collections at 30 s, ${opts.concurrency} senders; ` +
        `bodies: remote write ${rw.steps[0]![0]!.body.length} B (snappy), OTLP ${otlp.steps[0]![0]!.body.length} B (gzip)`,
    );
    // Warm-up, not counted: each arm's first collections (JIT, caches, the VMs' first series).
    const warm = Math.max(2, Math.floor(steps / 8));
    for (const arm of [rw, otlp])
      for (let s = 0; s < warm; s++) await sendStep(arm, arm.steps[s]!, opts.concurrency);
    const half = warm + Math.floor((steps - warm) / 2);
    // A B B A: each arm's first half of its timeline, then its second half.
    for (const [arm, from, to] of [
      [rw, warm, half],
      [otlp, warm, half],
      [otlp, half, steps],
      [rw, half, steps],
    ] as const) {
      const s0 = await acceptedAgentSamples(base);
      const c0 = cpuSeconds(running.proc.pid!);
      for (let s = from; s < to; s++) await sendStep(arm, arm.steps[s]!, opts.concurrency);
      const c1 = cpuSeconds(running.proc.pid!);
      const s1 = await acceptedAgentSamples(base);
      arm.cpuS += c1 - c0;
      arm.samples += s1 - s0;
      process.stdout.write(
        `  ${arm.name}: collections ${from}–${to - 1}: ${(((c1 - c0) / (s1 - s0)) * 1e6).toFixed(2)} CPU s per 1M stored samples\n`,
      );
    }
    const per = (a: Arm) => (a.cpuS / a.samples) * 1e6;
    for (const a of [rw, otlp])
      for (const step of a.steps.slice(warm)) for (const r of step) a.bytes += r.body.length;
    const requests = vmsPerArm * (steps - warm);
    for (const a of [rw, otlp]) {
      console.log(
        `${a.name.padEnd(13)} ${per(a).toFixed(2).padStart(8)} CPU s per 1M stored samples ` +
          `(${a.samples.toLocaleString()} samples, ${(a.samples / requests).toFixed(1)} per request, ` +
          `${(a.bytes / requests).toFixed(0)} B per request on the wire, ${((a.cpuS * 1e6) / requests).toFixed(0)} µs CPU per request)` +
          (a.failed > 0 ? `; ${a.failed} requests failed, first: ${a.firstError}` : ""),
      );
    }
    console.log(
      `OTLP ÷ remote write, ingest CPU per stored sample: ${(per(otlp) / per(rw)).toFixed(2)}x (goal <= 1.3x); ${loadAverageLine()}`,
    );
  } finally {
    await stopTarget(running);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Each guest's requests of one collection, `concurrency` at a time; refusals counted. */
async function sendStep(
  arm: Arm,
  step: readonly { body: Uint8Array; token: string }[],
  concurrency: number,
): Promise<void> {
  await Promise.all(
    Array.from({ length: concurrency }, async (_, k) => {
      for (let i = k; i < step.length; i += concurrency) {
        const { body, token } = step[i]!;
        const res = await fetch(arm.url, {
          method: "POST",
          headers: { ...arm.headers, authorization: `Bearer ${token}` },
          body,
        });
        const text = await res.text();
        // OTLP's full success is an empty response; a partial success (points refused) counts as a failure.
        if (res.status >= 300 || (arm.name === "OTLP" && text.length > 0)) {
          arm.failed++;
          arm.firstError ||= `${res.status} ${text.slice(0, 300)}`;
        }
      }
    }),
  );
}

/** svc's count of samples its guest agents' requests stored. */
async function acceptedAgentSamples(base: string): Promise<number> {
  const res = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  const text = await res.text();
  const m = /^svc_ingest_samples_accepted_total\{source="agent"\} (\S+)$/m.exec(text);
  if (!m) throw new Error('svc\'s /metrics has no svc_ingest_samples_accepted_total{source="agent"}');
  return Number(m[1]);
}

/** `n` VMs with expanded monitoring on, through the RPCs an owner uses; their guest-agent tokens. */
async function guestTokens(base: string, n: number): Promise<string[]> {
  const admin = createSvcClients({ baseUrl: base, token: ADMIN_TOKEN, maxRetries: 0 }).admin;
  const project = "guests";
  await admin.projects.createProject({ projectId: project, displayName: project });
  const email = "owner@bench.example";
  const user = await admin.users.createUser({ email, password: "bench-password", displayName: "owner" });
  await admin.projects.setMember({ project: `projects/${project}`, user: user.name, role: "owner" });
  const { sessionToken } = await createSvcClients({ baseUrl: base, maxRetries: 0 }).sessions.login({
    email,
    password: "bench-password",
  });
  const owner = createSvcClients({ baseUrl: base, token: sessionToken, maxRetries: 0 });
  const tokens: string[] = new Array(n);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < n; i = next++) {
      const vm = await admin.vms.createVM({
        parent: `projects/${project}`,
        vmId: `vm-${i}`,
        location: "dc-1",
        distribution: "debian-12",
        vcpus: 4,
        memoryBytes: 8n << 30n,
      });
      tokens[i] = (await owner.monitoring.enableExpandedMonitoring({ name: vm.name })).agentToken;
    }
  };
  await Promise.all(Array.from({ length: 4 }, worker));
  return tokens;
}
