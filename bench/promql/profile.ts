/**
 * In-process profile of the bench:promql suite: the bench's data shape (1,000 VMs × 21 series plus
 * svc's derived series, 30 s samples, svc's stored labels) appended straight into a TSDB directory
 * (kept between runs), then each suite query run repeatedly through MetricsBackend.rangeQuery and
 * through the query_range handler (JSON body included). Run it under `node --cpu-prof` to see where
 * time goes without HTTP, auth or a second process in the picture.
 *
 * With --pool the queries go through a worker pool of two (promql/pool), as in the server: the engine
 * column then includes the hand-off, and the handler's body is built in the worker.
 *
 *   node --import tsx bench/promql/profile.ts [--dir D] [--runs N] [--only name] [--hours H] [--pool]
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createMetricsBackend } from "../../packages/server/src/metrics/backend.ts";
import { createProjectLimiter } from "../../packages/server/src/metrics/concurrency.ts";
import { queryRange } from "../../packages/server/src/promapi/handlers.ts";
import { resolvePromApiOptions } from "../../packages/server/src/promapi/options.ts";
import { Params } from "../../packages/server/src/promapi/params.ts";
import { createQueryPool } from "../../packages/server/src/promql/index.ts";
import type { Label } from "../../packages/server/src/storage/interface.ts";
import { openTsdb } from "../../packages/server/src/tsdb/index.ts";
import { suite } from "./suite.ts";

const arg = (name: string, dflt: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : dflt;
};
const dir = arg("--dir", "/tmp/svc-promql-profile");
const runs = Number(arg("--runs", "10"));
const only = arg("--only", "");
const hours = Number(arg("--hours", "1.5"));
const PROJECT = "bench-0";
const VMS = 1000;
const STEP = 30_000;

const SHAPES: { name: string; extra?: Label; kind: "counter" | "gauge" | "const" }[] = [
  { name: "svc_vm_cpu_seconds_total", kind: "counter" },
  { name: "svc_vm_vcpus", kind: "const" },
  { name: "svc_vm_memory_total_bytes", kind: "const" },
  { name: "svc_vm_memory_free_bytes", kind: "gauge" },
  { name: "svc_vm_memory_cached_bytes", kind: "gauge" },
  ...[
    "svc_vm_disk_read_bytes_total",
    "svc_vm_disk_written_bytes_total",
    "svc_vm_disk_reads_completed_total",
    "svc_vm_disk_writes_completed_total",
  ].flatMap((name) =>
    ["vda", "vdb"].map((d) => ({ name, extra: { name: "device", value: d }, kind: "counter" as const })),
  ),
  ...[
    "svc_vm_network_receive_bytes_total",
    "svc_vm_network_transmit_bytes_total",
    "svc_vm_network_receive_packets_total",
    "svc_vm_network_transmit_packets_total",
  ].flatMap((name) =>
    ["eth0", "eth1"].map((i) => ({ name, extra: { name: "interface", value: i }, kind: "counter" as const })),
  ),
  { name: "svc_vm_cpu_utilization_pct", kind: "gauge" },
  { name: "svc_vm_memory_used_bytes", kind: "gauge" },
  { name: "svc_vm_last_observation_timestamp_seconds", kind: "counter" },
];

function labelsOf(shape: (typeof SHAPES)[number], vm: number): Label[] {
  const ls: Label[] = [
    { name: "__name__", value: shape.name },
    { name: "location", value: "dc-1" },
    { name: "project_id", value: PROJECT },
    { name: "source", value: "hypervisor" },
    { name: "vm", value: `projects/${PROJECT}/locations/dc-1/vms/vm-${vm}` },
    { name: "vm_id", value: `vm-${vm}` },
  ];
  if (shape.extra) ls.push(shape.extra);
  return ls.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

async function load(): Promise<number> {
  const metaPath = join(dir, "profile-meta.json");
  if (existsSync(metaPath)) return (JSON.parse(readFileSync(metaPath, "utf8")) as { endMs: number }).endMs;
  mkdirSync(dir, { recursive: true });
  const endMs = Math.floor((Date.now() - 60_000) / STEP) * STEP;
  const steps = Math.round((hours * 3_600_000) / STEP);
  const db = await openTsdb(dir, { autoCompact: false });
  let seed = 42;
  const rand = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  const labels = Array.from({ length: VMS }, (_, vm) => SHAPES.map((s) => labelsOf(s, vm)));
  const offsets = Array.from({ length: VMS }, () => Math.floor(rand() * STEP));
  const values = Array.from({ length: VMS }, () => SHAPES.map(() => Math.floor(rand() * 1e6)));
  const t0 = performance.now();
  for (let s = 0; s < steps; s++) {
    const base = endMs - (steps - 1 - s) * STEP;
    const app = db.appender();
    for (let vm = 0; vm < VMS; vm++) {
      const t = base - STEP + offsets[vm] + Math.floor(rand() * 40) - 20;
      for (let k = 0; k < SHAPES.length; k++) {
        const kind = SHAPES[k].kind;
        if (kind === "counter") values[vm][k] += Math.floor(rand() * 5000);
        else if (kind === "gauge") values[vm][k] = Math.round(values[vm][k] * (0.99 + rand() * 0.02));
        app.append(labels[vm][k], t, kind === "gauge" ? values[vm][k] * 4096 : values[vm][k]);
      }
    }
    await app.commit();
  }
  await db.close();
  writeFileSync(metaPath, JSON.stringify({ endMs }));
  console.log(`loaded ${steps} steps in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return endMs;
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

const endMs = await load();
const t0 = performance.now();
const db = await openTsdb(dir, { autoCompact: false, now: () => endMs + 60_000 });
console.log(`opened in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
const queryPool = process.argv.includes("--pool") ? createQueryPool({ workers: 2 }) : undefined;
await queryPool?.warm();
const metrics = createMetricsBackend({ storage: db, queryPool });
const options = resolvePromApiOptions({});
const deps = {
  metrics,
  limiter: createProjectLimiter(),
  now: () => endMs + 60_000,
  options,
};
const windows = [
  { name: "1h", ms: 3_600_000, step: 60_000 },
  { name: `${hours}h`, ms: hours * 3_600_000, step: 90_000 },
];
console.log(
  `${"query".padEnd(20)}${"range".padEnd(6)}${"engine p50".padStart(11)}${"http p50".padStart(10)}${"min".padStart(9)}${"min".padStart(9)}${"cpu".padStart(9)}${"cpu".padStart(9)}  series points bytes`,
);
for (const win of windows) {
  const end = Math.floor(endMs / win.step) * win.step;
  const start = end - win.ms;
  for (const q of [{ name: "floor", expr: "vector(1)" }, ...suite]) {
    if (only && q.name !== only) continue;
    const e: number[] = [];
    const h: number[] = [];
    const ec: number[] = [];
    const hc: number[] = [];
    const cpu = () => {
      const u = process.cpuUsage();
      return (u.user + u.system) / 1000;
    };
    let series = 0;
    let points = 0;
    let bytes = 0;
    for (let r = 0; r < runs + 1; r++) {
      let a = performance.now();
      let c = cpu();
      const res = await metrics.rangeQuery(PROJECT, q.expr, start, end, win.step);
      if (r > 0) e.push(performance.now() - a);
      if (r > 0) ec.push(cpu() - c);
      if (res.value.resultType === "matrix") {
        series = res.value.result.length;
        points = res.value.result.reduce((s, x) => s + x.timestamps.length, 0);
      }
      const params = new Params(
        {
          query: q.expr,
          start: String(start / 1000),
          end: String(end / 1000),
          step: String(win.step / 1000),
        },
        {},
      );
      a = performance.now();
      c = cpu();
      const body = await queryRange(deps, { projectId: PROJECT, params, expr: "" });
      if (r > 0) h.push(performance.now() - a);
      if (r > 0) hc.push(cpu() - c);
      bytes = typeof body === "string" ? body.length : body.body.byteLength;
    }
    console.log(
      `${q.name.padEnd(20)}${win.name.padEnd(6)}${pct(e, 50).toFixed(1).padStart(11)}${pct(h, 50).toFixed(1).padStart(10)}${Math.min(
        ...e,
      )
        .toFixed(1)
        .padStart(9)}${Math.min(...h)
        .toFixed(1)
        .padStart(
          9,
        )}${pct(ec, 50).toFixed(1).padStart(9)}${pct(hc, 50).toFixed(1).padStart(9)}  ${series} ${points} ${bytes}`,
    );
  }
}
await queryPool?.close();
await db.close();
