/**
 * Alert evaluation benchmark (not a test; issue 15): svc's evaluator cycle against Prometheus
 * evaluating the equivalent alerting rules over the same samples, in the same run.
 *
 *   npm run bench:alerts              1,000 VMs × 1 h at 30 s, 10 rules = 10,000 instances, 30 cycles
 *   npm run bench:alerts -- --quick   100 VMs (1,000 instances), 10 cycles
 *   flags: --no-peer (svc only), --no-svc (data and Prometheus only), --prom-for
 *
 * Data: per VM the 10 stored series the rules read (CPU utilization, memory used and total, disk
 * read/written counters of two devices, network receive/transmit counters of one interface, the
 * last-observation time), 1 h at 30 s, each VM on its own offset within the 30 s. Written straight
 * into the TSDB appender (as bench/vm-query does) with the labels ingest stores (`vm`, `vm_id`,
 * `location`, `project_id`, `source="hypervisor"`, plus `device`/`interface`), and the same samples
 * remote-written to Prometheus. Some VMs breach: sustained high CPU starting at staggered times,
 * others recovering or flapping, memory ramps, hot disks and NICs, a counter reset, and VMs that stop
 * reporting (telemetry age; their other instances go without data), so cycles make transitions.
 *
 * Timestamps end a little in the future (`dataEnd`, the time Prometheus's measured evaluations will
 * have finished plus a margin): Prometheus evaluates at the wall clock, and every evaluation must
 * find its whole window in the data, as svc's cycles do. svc's clock is set to `dataEnd`; its cycles
 * run at t = dataEnd − (N − 1 − k) × 30 s (a live evaluator's 30 s steps over the last minutes of
 * data), back to back, after warm-up cycles at earlier 30 s steps.
 *
 * Equal work. svc's "holds for S seconds" (alerts/condition.ts) is decided from the stored samples at
 * every cycle: the run of breaching samples ending with the newest one began at least S before t,
 * i.e. with 30 s sampling every sample in [t − S − 30 s, t] breaches; the evaluator reads
 * (t − S − 120 s, t] of every series of the rule's metric for it (one store read per rule). Prometheus's
 * `for: 5m` does less per evaluation: it reads the newest sample per series and keeps the pending time
 * in memory (measured too with --prom-for, as information). The equivalent that reads the same
 * series over the same window, and so decides from the data as svc does, is a range function over
 * S + 30 s without `for` (the goal's ratio is against this group):
 *   gauge > X for S        min_over_time(m[S+30s]) > X
 *   ratio > X for S        100 * min_over_time(num[S+30s]) / max_over_time(den[S+30s]) > X (the same
 *                          two series over the same window; with a constant total, as here, the same
 *                          condition as the minimum of the ratio)
 *   rate > X for S         sum without (device) (rate(counter[S+30s])) > X (the same samples; svc
 *                          requires every 30 s interval's rate to breach, Prometheus the window's
 *                          average: the exact form would be a subquery, S/30 evaluations)
 *   telemetry age > X      time() - max_over_time(last_observation[390s]) > X (svc's read window:
 *                          X + 90 s; Prometheus does not see a VM silent for longer than that, svc
 *                          still does from the inventory)
 *
 * Prometheus's duration is its rule group's `evaluationTime` (/api/v1/rules) over N evaluations at
 * a 3 s `evaluation_interval`, after warm-up evaluations; svc's is the wall time of
 * `evaluator.runCycle(t)`, and process CPU per cycle (process.cpuUsage, all threads), with the GC
 * pauses that fell inside the cycles. Prometheus's CPU per evaluation is its process CPU over the
 * measured evaluations / their number, minus its idle CPU rate (measured before, with the same
 * polling). Each side runs alone: svc is idle during Prometheus's phase, and Prometheus is paused
 * (SIGSTOP) during svc's. The first cycle after the rules are applied (every breaching instance's
 * first state written) is shown apart. At the end, each rule's firing/pending/no-data instances in svc
 * are printed beside the series Prometheus's expression selects at the last cycle's time, and a
 * "machine speed" line as bench/vm-query prints it (this machine's speed moves between runs).
 *
 * Env: BENCH_VMS, BENCH_CYCLES (measured svc cycles and Prometheus evaluations: 30, 10 with --quick),
 * BENCH_WARM (warm-up cycles/evaluations: 3), BENCH_PROM_INTERVAL_S (3),
 * BENCH_CPU_PROFILE=<file.cpuprofile> records a V8 CPU profile of the measured svc cycles and prints
 * the functions and files with the most self time.
 */

import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PerformanceObserver, performance } from "node:perf_hooks";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { pushRemoteWrite } from "../../packages/remotewrite/src/index.ts";
import type { CycleReport } from "../../packages/server/src/alerts/evaluator.ts";
import { type Labels, labelsFromRecord } from "../../packages/server/src/storage/interface.ts";
import { testDialects } from "../../packages/server/testing/dialects.ts";
import { startTestApp } from "../../packages/server/testing/harness.ts";
import { calibrationMs, profileSummary } from "../common/measure.ts";
import { cpuSeconds, freePort } from "../ingest/proc.ts";
import { type Running, startTarget, stopTarget, type TargetSpec } from "../ingest/targets.ts";

const quick = process.argv.includes("--quick");
const noPeer = process.argv.includes("--no-peer");
const noSvc = process.argv.includes("--no-svc");
const promFor = process.argv.includes("--prom-for");
const num = (name: string, dflt: number) => (process.env[name] ? Number(process.env[name]) : dflt);
const VMS = num("BENCH_VMS", quick ? 100 : 1000);
const CYCLES = num("BENCH_CYCLES", quick ? 10 : 30);
const WARM = num("BENCH_WARM", 3);
const PROM_INTERVAL_S = num("BENCH_PROM_INTERVAL_S", 3);
const STEP_MS = 30_000;
/** 1 h of samples per series: 121 points, both ends included. */
const STEPS = 121;
const MIN = 60_000;
const GIB = 2 ** 30;
/** How far back the telemetry-age rule's PromQL looks for the newest observation. */
const TELEMETRY_WINDOW = "390s";
/** How often the bench reads Prometheus's rule group (each evaluation is seen; a read costs it ~1 ms). */
const POLL_MS = 500;
const out = (s: string) => process.stdout.write(`${s}\n`);

/** One rule: svc's spec and the PromQL alerting rule that reads the same series over the same window. */
interface BenchRule {
  readonly displayName: string;
  readonly metricId: string;
  readonly operator: "GREATER_THAN" | "LESS_THAN";
  readonly threshold: number;
  readonly sustainedSeconds: number;
  readonly severity: "WARNING" | "CRITICAL";
  /** The equivalent that reads the same series over the same window (what the ratio is against). */
  readonly expr: string;
  /** What a Prometheus user would write instead (`for:` sustainedSeconds), measured with --prom-for. */
  readonly forExpr: string;
}

const rules: readonly BenchRule[] = [
  {
    displayName: "CPU above 90% for 5 min",
    metricId: "cpu_utilization_pct",
    operator: "GREATER_THAN",
    threshold: 90,
    sustainedSeconds: 300,
    severity: "CRITICAL",
    expr: "min_over_time(svc_vm_cpu_utilization_pct[330s]) > 90",
    forExpr: "svc_vm_cpu_utilization_pct > 90",
  },
  {
    displayName: "CPU above 75% for 15 min",
    metricId: "cpu_utilization_pct",
    operator: "GREATER_THAN",
    threshold: 75,
    sustainedSeconds: 900,
    severity: "WARNING",
    expr: "min_over_time(svc_vm_cpu_utilization_pct[930s]) > 75",
    forExpr: "svc_vm_cpu_utilization_pct > 75",
  },
  {
    displayName: "Memory above 90% for 5 min",
    metricId: "memory_used_pct",
    operator: "GREATER_THAN",
    threshold: 90,
    sustainedSeconds: 300,
    severity: "CRITICAL",
    expr: "100 * min_over_time(svc_vm_memory_used_bytes[330s]) / max_over_time(svc_vm_memory_total_bytes[330s]) > 90",
    forExpr: "100 * svc_vm_memory_used_bytes / svc_vm_memory_total_bytes > 90",
  },
  {
    displayName: "Memory above 80% for 15 min",
    metricId: "memory_used_pct",
    operator: "GREATER_THAN",
    threshold: 80,
    sustainedSeconds: 900,
    severity: "WARNING",
    expr: "100 * min_over_time(svc_vm_memory_used_bytes[930s]) / max_over_time(svc_vm_memory_total_bytes[930s]) > 80",
    forExpr: "100 * svc_vm_memory_used_bytes / svc_vm_memory_total_bytes > 80",
  },
  {
    displayName: "Memory used above 3.5 GiB for 10 min",
    metricId: "memory_used_bytes",
    operator: "GREATER_THAN",
    threshold: 3.5 * GIB,
    sustainedSeconds: 600,
    severity: "WARNING",
    expr: `min_over_time(svc_vm_memory_used_bytes[630s]) > ${3.5 * GIB}`,
    forExpr: `svc_vm_memory_used_bytes > ${3.5 * GIB}`,
  },
  {
    displayName: "Disk reads above 100 MB/s for 5 min",
    metricId: "disk_read_bytes_per_sec",
    operator: "GREATER_THAN",
    threshold: 100e6,
    sustainedSeconds: 300,
    severity: "WARNING",
    expr: "sum without (device) (rate(svc_vm_disk_read_bytes_total[330s])) > 100e6",
    forExpr: "sum without (device) (irate(svc_vm_disk_read_bytes_total[90s])) > 100e6",
  },
  {
    displayName: "Disk writes above 100 MB/s for 5 min",
    metricId: "disk_write_bytes_per_sec",
    operator: "GREATER_THAN",
    threshold: 100e6,
    sustainedSeconds: 300,
    severity: "WARNING",
    expr: "sum without (device) (rate(svc_vm_disk_written_bytes_total[330s])) > 100e6",
    forExpr: "sum without (device) (irate(svc_vm_disk_written_bytes_total[90s])) > 100e6",
  },
  {
    displayName: "Network receive above 50 MB/s for 5 min",
    metricId: "network_receive_bytes_per_sec",
    operator: "GREATER_THAN",
    threshold: 50e6,
    sustainedSeconds: 300,
    severity: "WARNING",
    expr: "sum without (interface) (rate(svc_vm_network_receive_bytes_total[330s])) > 50e6",
    forExpr: "sum without (interface) (irate(svc_vm_network_receive_bytes_total[90s])) > 50e6",
  },
  {
    displayName: "Network transmit above 50 MB/s for 5 min",
    metricId: "network_transmit_bytes_per_sec",
    operator: "GREATER_THAN",
    threshold: 50e6,
    sustainedSeconds: 300,
    severity: "WARNING",
    expr: "sum without (interface) (rate(svc_vm_network_transmit_bytes_total[330s])) > 50e6",
    forExpr: "sum without (interface) (irate(svc_vm_network_transmit_bytes_total[90s])) > 50e6",
  },
  {
    displayName: "Telemetry older than 5 min",
    metricId: "telemetry_age_seconds",
    operator: "GREATER_THAN",
    threshold: 300,
    sustainedSeconds: 0,
    severity: "CRITICAL",
    expr: `time() - max_over_time(svc_vm_last_observation_timestamp_seconds[${TELEMETRY_WINDOW}]) > 300`,
    forExpr: `time() - max_over_time(svc_vm_last_observation_timestamp_seconds[${TELEMETRY_WINDOW}]) > 300`,
  },
];

/** The 10 stored series of one VM, in the order `sampleValues` fills them. */
const SERIES = [
  ["svc_vm_cpu_utilization_pct", {}],
  ["svc_vm_memory_used_bytes", {}],
  ["svc_vm_memory_total_bytes", {}],
  ["svc_vm_disk_read_bytes_total", { device: "vda" }],
  ["svc_vm_disk_read_bytes_total", { device: "vdb" }],
  ["svc_vm_disk_written_bytes_total", { device: "vda" }],
  ["svc_vm_disk_written_bytes_total", { device: "vdb" }],
  ["svc_vm_network_receive_bytes_total", { interface: "eth0" }],
  ["svc_vm_network_transmit_bytes_total", { interface: "eth0" }],
  ["svc_vm_last_observation_timestamp_seconds", {}],
] as const;
const PER_VM = SERIES.length;

/**
 * The workload's shape, per VM i and step k (minutes before the data's end `m`):
 * - CPU: i%10==1 above 90% since 5–24 min before the end (pending → firing during the cycles);
 *   i%10==2 high from 40 min to 2–13 min before the end (firing → resolved); i%10==3 flaps every
 *   4 min; the rest 5–41%.
 * - memory of 4 GiB: i%8==3 at 3.9 GB (90.8%) since 3–27 min before the end, i%8==5 at 3.5 GB
 *   (81%) for the last 20 min; the rest 1.5–2.0 GB.
 * - disk/network counters: hot devices (150 MB/s disk on vda, 67 MB/s NIC) on i%12==5 (reads),
 *   i%12==7 (writes), i%15==4 (receive), i%15==9 (transmit) since 4–18 min before the end; the
 *   rest 67–333 KB/s; i%50==7 resets its counters (a restart) half-way.
 * - i%25==13 stops reporting 6–15 min before the end (telemetry age; no data for its other rules).
 */
function silentFromMin(i: number): number {
  return i % 25 === 13 ? 6 + (Math.floor(i / 25) % 10) : -1;
}

function sampleValues(i: number, k: number, counters: Float64Array, outv: Float64Array, tsMs: number): void {
  const m = (STEPS - 1 - k) * 0.5;
  const base = 20 + 15 * Math.sin((k + i) / 20) + (i % 7);
  let cpu = base;
  const c10 = i % 10;
  if (c10 === 1 && m < 5 + (Math.floor(i / 10) % 20)) cpu = 92 + (i % 5);
  else if (c10 === 2 && m <= 40 && m >= 2 + (Math.floor(i / 10) % 12)) cpu = 95;
  else if (c10 === 3 && Math.floor(m / 4) % 2 === 0) cpu = 96;
  let used = 1.5e9 + 1e6 * ((k * 7 + i) % 500);
  if (i % 8 === 3 && m < 3 + (Math.floor(i / 8) % 25)) used = 3.9e9;
  else if (i % 8 === 5 && m < 20) used = 3.5e9;
  const hotSince = 4 + (Math.floor(i / 12) % 15);
  const normal = 2e6 * (1 + (i % 5));
  const nicNormal = 1e5 * (1 + (i % 7));
  const incs = [
    i % 12 === 5 && m < hotSince ? 4.5e9 : normal,
    normal / 2,
    i % 12 === 7 && m < hotSince ? 4.5e9 : normal,
    normal / 3,
    i % 15 === 4 && m < hotSince ? 2e9 : nicNormal,
    i % 15 === 9 && m < hotSince ? 2e9 : nicNormal,
  ];
  const reset = i % 50 === 7 && k === 60;
  for (let c = 0; c < 6; c++) counters[c] = reset ? incs[c] : counters[c] + incs[c];
  outv[0] = cpu;
  outv[1] = used;
  outv[2] = 4 * GIB;
  for (let c = 0; c < 6; c++) outv[3 + c] = counters[c];
  outv[9] = tsMs / 1000;
}

function prometheusInstalled(): boolean {
  if (spawnSync("prometheus", ["--version"]).status === 0) return true;
  out("installing Debian prometheus …");
  spawnSync("flock", ["/tmp/apt.lock", "apt-get", "install", "-y", "-qq", "prometheus"], {
    stdio: "inherit",
  });
  return spawnSync("prometheus", ["--version"]).status === 0;
}

/** Debian's Prometheus with a rule file, reloaded (SIGHUP) once the data is in. */
function prometheusSpec(): TargetSpec {
  return {
    name: "prometheus",
    bin: "prometheus",
    start: (dir, port) => {
      writeFileSync(
        join(dir, "prometheus.yml"),
        `global:\n  scrape_interval: 30s\n  evaluation_interval: ${PROM_INTERVAL_S}s\nrule_files:\n  - ${join(dir, "rules.yml")}\n`,
      );
      writeFileSync(join(dir, "rules.yml"), "groups: []\n");
      return {
        cmd: "prometheus",
        argv: [
          `--config.file=${join(dir, "prometheus.yml")}`,
          `--storage.tsdb.path=${join(dir, "data")}`,
          `--web.listen-address=127.0.0.1:${port}`,
          "--web.enable-remote-write-receiver",
          "--storage.tsdb.retention.time=1d",
        ],
      };
    },
    ready: "/-/ready",
    write: "/api/v1/write",
    token: "unused",
    dataDir: (dir) => join(dir, "data"),
  };
}

function rulesYaml(which: "expr" | "forExpr"): string {
  const lines = ["groups:", "  - name: svc-bench", "    rules:"];
  for (const [n, r] of rules.entries()) {
    lines.push(`      - alert: rule_${n}`);
    lines.push(`        expr: ${JSON.stringify(r[which])}`);
    if (which === "forExpr" && r.sustainedSeconds > 0) lines.push(`        for: ${r.sustainedSeconds}s`);
    lines.push(`        labels: { severity: ${r.severity.toLowerCase()} }`);
  }
  return `${lines.join("\n")}\n`;
}

interface PromGroup {
  name: string;
  evaluationTime: number;
  lastEvaluation: string;
  rules: {
    name: string;
    /** `for:`, seconds. */
    duration: number;
    evaluationTime: number;
    health: string;
    lastError?: string;
    alerts?: unknown[];
  }[];
}

async function promGroup(base: string): Promise<PromGroup | undefined> {
  const res = await fetch(`${base}/api/v1/rules?type=alert`);
  const body = (await res.json()) as { data: { groups: PromGroup[] } };
  return body.data.groups.find((g) => g.name === "svc-bench");
}

/** Number of series an instant query returns at `atMs`. */
async function promCount(base: string, expr: string, atMs: number): Promise<number> {
  const res = await fetch(
    `${base}/api/v1/query?${new URLSearchParams({ query: expr, time: String(atMs / 1000) })}`,
  );
  const body = (await res.json()) as { status: string; error?: string; data?: { result: unknown[] } };
  if (body.status !== "success") throw new Error(`${expr}: ${body.error}`);
  return body.data!.result.length;
}

function quantile(sorted: readonly number[], f: number): number {
  return sorted.length === 0
    ? Number.NaN
    : sorted[Math.min(sorted.length - 1, Math.floor(f * sorted.length))];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A full, compacting garbage collection without --expose-gc on the command line. */
function fullGc(): void {
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  gc();
  gc();
}

interface PromResult {
  /** Group evaluation times, ms, sorted. */
  durations: number[];
  /** Process CPU per evaluation, ms, with its idle CPU over the interval subtracted. */
  cpuPerEval: number;
  /** Per rule, its evaluation times, ms. */
  ruleMs: number[][];
  /** Alerts (pending + firing) per rule at the last evaluation. */
  alerts: number[];
}

/**
 * Loads the rule group (`which` of every rule's PromQL) by SIGHUP and reads its evaluation times
 * from /api/v1/rules until CYCLES evaluations after WARM warm-up ones were seen.
 */
async function measurePromGroup(
  prom: Running,
  rulesFile: string,
  which: "expr" | "forExpr",
  dataEnd: number,
  idleMsPerS: number,
): Promise<PromResult> {
  const pid = prom.proc.pid!;
  writeFileSync(rulesFile, rulesYaml(which));
  prom.proc.kill("SIGHUP");
  const seen = new Set<string>();
  const durations: number[] = [];
  const ruleMs: number[][] = rules.map(() => []);
  let alerts: number[] = [];
  let cpu0 = 0;
  let first = 0;
  let lastAt = 0;
  let late = 0;
  const w0 = performance.now();
  while (durations.length < CYCLES) {
    if (performance.now() - w0 > (WARM + CYCLES + 10) * PROM_INTERVAL_S * 1000 + 30_000)
      throw new Error(`Prometheus made ${seen.size} evaluations of the group in time`);
    await sleep(POLL_MS);
    const g = await promGroup(prom.base);
    // A reload keeps the group (same name and file): the new rules show by their queries.
    if (!g || g.rules[0]?.duration !== (which === "forExpr" ? rules[0].sustainedSeconds : 0)) continue;
    if (g.lastEvaluation.startsWith("0001") || seen.has(g.lastEvaluation)) continue;
    const bad = g.rules.find((r) => r.health === "err");
    if (bad) throw new Error(`Prometheus rule ${bad.name}: ${bad.lastError ?? ""}`);
    // After a reload the group keeps its last evaluation time until the new rules have run once.
    if (g.rules.some((r) => r.health !== "ok")) continue;
    seen.add(g.lastEvaluation);
    lastAt = Date.parse(g.lastEvaluation);
    if (seen.size === WARM) {
      cpu0 = cpuSeconds(pid);
      first = lastAt;
    }
    if (seen.size <= WARM) continue;
    if (lastAt > dataEnd) late++;
    durations.push(g.evaluationTime * 1000);
    for (const [n, r] of g.rules.entries()) ruleMs[n].push(r.evaluationTime * 1000);
    alerts = g.rules.map((r) => r.alerts?.length ?? 0);
  }
  // Evaluations between the two CPU readings, from their timestamps (a poll may miss one).
  const evals = Math.round((lastAt - first) / (PROM_INTERVAL_S * 1000));
  const cpuPerEval = ((cpuSeconds(pid) - cpu0) * 1000) / evals;
  const net = cpuPerEval - idleMsPerS * PROM_INTERVAL_S;
  if (evals !== CYCLES) out(`  (${evals} evaluations in the CPU window, ${CYCLES} seen)`);
  if (late > 0) out(`  warning: ${late} of Prometheus's evaluations were after the data's end`);
  durations.sort((a, b) => a - b);
  out(
    `Prometheus (${which === "expr" ? "range functions over S" : "`for:` forms"}): ${CYCLES} evaluations: ` +
      `p50 ${quantile(durations, 0.5).toFixed(1)} ms, p99 ${quantile(durations, 0.99).toFixed(1)} ms, ` +
      `process CPU ${cpuPerEval.toFixed(0)} ms per evaluation (idle: ${idleMsPerS.toFixed(1)} ms/s, so ` +
      `${net.toFixed(0)} ms net); alerts (pending + firing) at the last: ${alerts.reduce((a, b) => a + b, 0)}`,
  );
  return { durations, cpuPerEval: net, ruleMs, alerts };
}

// ---------------------------------------------------------------------------------------------------

out(
  `bench:alerts: ${VMS} VMs × 1 h at 30 s, ${rules.length} rules (${(VMS * rules.length).toLocaleString("en")} instances), ${CYCLES} measured cycles`,
);
const [sqlite] = await testDialects();
const t = await startTestApp(sqlite.dialect);
const peerDir = mkdtempSync(join(tmpdir(), "svc-bench-alerts-"));
let prom: Running | undefined;
try {
  let promVersion = "";
  if (!noPeer && prometheusInstalled()) {
    promVersion =
      /version (\S+)/.exec(spawnSync("prometheus", ["--version"], { encoding: "utf8" }).stdout)?.[1] ?? "?";
    prom = (await startTarget(prometheusSpec(), join(peerDir, "prometheus"), await freePort())).running;
    out(`peer: Prometheus ${promVersion} (Debian), evaluation_interval ${PROM_INTERVAL_S} s`);
  } else out("peer: Prometheus skipped (--no-peer, or `apt-get install prometheus` failed)");

  calibrationMs(); // once unmeasured, so the figure is of compiled code
  const calibration0 = calibrationMs();
  const vmIds = Array.from({ length: VMS }, (_, i) => `vm-${String(i).padStart(4, "0")}`);
  let p0 = performance.now();
  const p = await t.seedProject("bench", vmIds);
  out(`seeded ${VMS} VMs in ${((performance.now() - p0) / 1000).toFixed(1)} s`);

  // The data ends when Prometheus's measured evaluations will be over, plus a margin (see the header).
  const loadEstimateS = 10 + (VMS / 1000) * 40;
  const promPhaseS = prom ? ((WARM + CYCLES + 4) * PROM_INTERVAL_S + 10) * (promFor ? 2 : 1) + 10 : 0;
  const dataEnd = Math.ceil((Date.now() + (loadEstimateS + promPhaseS + 30) * 1000) / STEP_MS) * STEP_MS;
  t.clock.ms = dataEnd;
  const dataStart = dataEnd - (STEPS - 1) * STEP_MS;

  // The series' labels as ingest stores them, for the store and for remote write.
  const storeLabels: Labels[] = [];
  const wireLabels: { name: string; value: string }[][] = [];
  for (const [i, vm] of p.vms.entries()) {
    const base = { project_id: "bench", vm, vm_id: vmIds[i], location: "dc-1", source: "hypervisor" };
    for (const [name, extra] of SERIES) {
      const ls = labelsFromRecord({ ...base, ...extra, __name__: name });
      storeLabels.push(ls);
      wireLabels.push(ls.map((l) => ({ name: l.name, value: l.value })));
    }
  }
  // Each VM reports at its own offset within the 30 s (the newest sample is dataEnd − offset).
  const offsetMs = (i: number) => (i * 7919) % STEP_MS;
  const counters = Array.from({ length: VMS }, () => new Float64Array(6));
  const values = new Float64Array(PER_VM);
  let promBatch = wireLabels.map((labels) => ({
    labels,
    samples: [] as { value: number; timestampMs: number }[],
  }));
  let samples = 0;
  let promMs = 0;
  p0 = performance.now();
  for (let k = 0; k < STEPS; k++) {
    const app = t.app.tsdb.appender();
    const m = (STEPS - 1 - k) * 0.5;
    for (let i = 0; i < VMS; i++) {
      const ts = dataStart + k * STEP_MS - offsetMs(i);
      sampleValues(i, k, counters[i], values, ts);
      const silent = silentFromMin(i);
      if (silent >= 0 && m < silent) continue;
      for (let s = 0; s < PER_VM; s++) {
        if (!app.append(storeLabels[i * PER_VM + s], ts, values[s]))
          throw new Error(`svc refused a sample at ${ts}`);
        if (prom) promBatch[i * PER_VM + s].samples.push({ value: values[s], timestampMs: ts });
      }
      samples += PER_VM;
    }
    await app.commit();
    if (prom && (k % 10 === 9 || k === STEPS - 1)) {
      const a = performance.now();
      await pushRemoteWrite(`${prom.base}/api/v1/write`, "unused", {
        timeseries: promBatch.filter((x) => x.samples.length > 0),
      });
      promMs += performance.now() - a;
      promBatch = promBatch.map((x) => ({ labels: x.labels, samples: [] }));
    }
  }
  out(
    `loaded ${samples.toLocaleString("en")} samples (${(VMS * PER_VM).toLocaleString("en")} series) into svc's TSDB in ` +
      `${((performance.now() - p0 - promMs) / 1000).toFixed(1)} s` +
      (prom ? `, and into Prometheus by remote write in ${(promMs / 1000).toFixed(1)} s` : ""),
  );
  out(
    `data: ${new Date(dataStart).toISOString()} .. ${new Date(dataEnd).toISOString()} (ends ${((dataEnd - Date.now()) / 1000).toFixed(0)} s from now)`,
  );
  await t.app.tsdb.compact();
  fullGc();

  // --- Prometheus: the rule group over N evaluations ---------------------------------------------
  let promRes: PromResult | undefined;
  let promForRes: PromResult | undefined;
  if (prom) {
    const pid = prom.proc.pid!;
    // Let its head settle (GC of the load) before the rules start.
    for (let last = cpuSeconds(pid), w0 = performance.now(); performance.now() - w0 < 60_000; ) {
      await sleep(1000);
      const now = cpuSeconds(pid);
      if (now - last < 0.05) break;
      last = now;
    }
    const series = await promCount(prom.base, "svc_vm_cpu_utilization_pct", dataEnd - 30 * MIN);
    if (series !== VMS) throw new Error(`Prometheus has ${series} CPU series, not ${VMS}`);
    // Its CPU when idle, polled as during the measurement (subtracted from the CPU per evaluation).
    const idle0 = cpuSeconds(pid);
    const i0 = performance.now();
    for (let j = 0; j < 10; j++) {
      await sleep(POLL_MS);
      await promGroup(prom.base);
    }
    const idleMsPerS = ((cpuSeconds(pid) - idle0) * 1e6) / (performance.now() - i0);
    const file = join(peerDir, "prometheus", "rules.yml");
    promRes = await measurePromGroup(prom, file, "expr", dataEnd, idleMsPerS);
    if (promFor) promForRes = await measurePromGroup(prom, file, "forExpr", dataEnd, idleMsPerS);
    prom.proc.kill("SIGSTOP");
  }

  // --- svc: N cycles ----------------------------------------------------------------------------
  let svcWall: number[] = [];
  let svcCpu: number[] = [];
  const reports: CycleReport[] = [];
  let gcMs = 0;
  const agreement: string[] = [];
  let firstCycle: { ms: number; cpuMs: number; transitions: number } | undefined;
  let readShare = Number.NaN;
  if (noSvc) out("svc: skipped (--no-svc)");
  else {
    const evaluator = t.app.evaluator;
    // The owner logs in again: the session seedProject made is from before the clock moved to dataEnd.
    const { sessionToken } = await t
      .clients()
      .sessions.login({ email: p.owner.email, password: p.owner.password });
    const owner = t.clients(sessionToken).alerts;
    for (const r of rules) {
      await owner.saveAlertRule({
        projectName: p.projectName,
        id: randomUUID(),
        requestId: randomUUID(),
        expectedVersion: "0",
        spec: {
          displayName: r.displayName,
          metricId: r.metricId,
          operator: r.operator,
          threshold: r.threshold,
          sustainedSeconds: r.sustainedSeconds,
          severity: r.severity,
          allVms: true,
          repeatIntervalSeconds: 0,
          destinationNames: [],
          vmNames: [],
        },
      });
    }
    const at = (k: number) => dataEnd - (CYCLES - 1 - k) * STEP_MS;
    p0 = performance.now();
    await evaluator.applyPending(at(-WARM));
    out(`svc: ${rules.length} rules saved and applied in ${((performance.now() - p0) / 1000).toFixed(2)} s`);
    for (let k = -WARM; k < 0; k++) {
      const c0 = process.cpuUsage();
      const w = performance.now();
      const r = await evaluator.runCycle(at(k));
      const ms = performance.now() - w;
      const c = process.cpuUsage(c0);
      // The first cycle after the rules were applied writes every breaching instance's first state.
      if (k === -WARM) firstCycle = { ms, cpuMs: (c.user + c.system) / 1000, transitions: r.transitions };
      out(
        `  warm-up cycle at ${new Date(r.atMs).toISOString()}: ${ms.toFixed(0)} ms (store reads ` +
          `${r.readMs.toFixed(0)}), CPU ${((c.user + c.system) / 1000).toFixed(0)} ms; ${r.instances} instances, ` +
          `${r.transitions} transitions, ${r.errors} read errors`,
      );
    }
    fullGc();
    // GC pauses inside the measured cycles (entries can arrive late, e.g. of the full GC above).
    const cycleSpans: [number, number][] = [];
    const gcPauses: [number, number][] = [];
    const gcObserver = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) gcPauses.push([e.startTime, e.startTime + e.duration]);
    });
    gcObserver.observe({ entryTypes: ["gc"] });
    const profileTo = process.env.BENCH_CPU_PROFILE;
    const inspector = profileTo ? new Session() : undefined;
    if (inspector) {
      inspector.connect();
      await inspector.post("Profiler.enable");
      await inspector.post("Profiler.setSamplingInterval", { interval: 200 });
      await inspector.post("Profiler.start");
    }
    for (let k = 0; k < CYCLES; k++) {
      await sleep(20);
      const c0 = process.cpuUsage();
      const w = performance.now();
      const r = await evaluator.runCycle(at(k));
      cycleSpans.push([w, performance.now()]);
      svcWall.push(performance.now() - w);
      const c = process.cpuUsage(c0);
      svcCpu.push((c.user + c.system) / 1000);
      reports.push(r);
    }
    await sleep(50);
    gcObserver.disconnect();
    for (const [a, b] of cycleSpans)
      for (const [x, y] of gcPauses) gcMs += Math.max(0, Math.min(b, y) - Math.max(a, x));
    if (inspector && profileTo) {
      const { profile } = await inspector.post("Profiler.stop");
      writeFileSync(profileTo, JSON.stringify(profile));
      out(`CPU profile of the measured cycles written to ${profileTo}`);
      for (const l of profileSummary(profile as never)) out(l);
      inspector.disconnect();
    }
    for (const [k, r] of reports.entries())
      out(
        `  cycle ${k} at ${new Date(r.atMs).toISOString()}: ${svcWall[k].toFixed(0)} ms (store reads ` +
          `${r.readMs.toFixed(0)}), CPU ${svcCpu[k].toFixed(0)} ms; ${r.rules} rules, ${r.instances} instances, ` +
          `${r.transitions} transitions, ${r.errors} read errors`,
      );
    readShare = reports.reduce((a, r) => a + r.readMs, 0) / reports.reduce((a, r) => a + r.durationMs, 0);
    // What fired, beside what Prometheus's equivalent expressions select at the same time (the last cycle's).
    const list = await owner.listAlertRules({ projectName: p.projectName, pageSize: 100 });
    if (prom) prom.proc.kill("SIGCONT");
    for (const r of rules) {
      const got = list.rules.find((x) => x.spec?.displayName === r.displayName);
      const c = got?.instanceCounts;
      const promN = prom ? await promCount(prom.base, r.expr, at(CYCLES - 1)) : Number.NaN;
      agreement.push(
        `| ${r.displayName} | ${c?.firing ?? "?"} | ${c?.pending ?? "?"} | ${c?.noData ?? "?"} | ${prom ? promN : "—"} |`,
      );
    }
    if (prom) prom.proc.kill("SIGSTOP");
    svcWall = [...svcWall].sort((a, b) => a - b);
    svcCpu = [...svcCpu].sort((a, b) => a - b);
  }

  // --- the table ----------------------------------------------------------------------------------
  const calibration1 = calibrationMs();
  out("");
  out(
    `machine speed: a fixed CPU workload took ${calibration0.toFixed(1)} ms before the load and ` +
      `${calibration1.toFixed(1)} ms after (lower is faster; compare runs by it)`,
  );
  out(
    `${VMS} VMs, ${rules.length} rules, ${(VMS * rules.length).toLocaleString("en")} instances, 1 h of data at 30 s; ` +
      `${CYCLES} measured cycles / evaluations`,
  );
  out("| | p50 ms | p99 ms | max ms | CPU ms per cycle |");
  out("| --- | --- | --- | --- | --- |");
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const f1 = (x: number) => x.toFixed(1);
  if (svcWall.length > 0)
    out(
      `| svc evaluator cycle | ${f1(quantile(svcWall, 0.5))} | ${f1(quantile(svcWall, 0.99))} | ${f1(svcWall.at(-1)!)} | ` +
        `${f1(mean(svcCpu))} (GC pauses ${f1(gcMs / svcWall.length)}) |`,
    );
  if (firstCycle)
    out(
      `| svc's first cycle after the rules were applied (${firstCycle.transitions} transitions) | ${f1(firstCycle.ms)} | | | ${f1(firstCycle.cpuMs)} |`,
    );
  for (const [res, what] of [
    [promRes, "rule group (range functions over S)"],
    [promForRes, "rule group, `for:` forms (not equal work)"],
  ] as const) {
    if (!res) continue;
    const d = res.durations;
    out(
      `| Prometheus ${promVersion} ${what} | ${f1(quantile(d, 0.5))} | ${f1(quantile(d, 0.99))} | ${f1(d.at(-1)!)} | ` +
        `${f1(res.cpuPerEval)} (process, idle subtracted) |`,
    );
  }
  if (svcWall.length > 0) out(`svc: store reads were ${(100 * readShare).toFixed(0)}% of the cycles' time`);
  if (agreement.length > 0) {
    out("");
    out("at the last cycle: svc's instances by state, and the series Prometheus's expression selects then");
    out("| rule | svc firing | svc pending | svc no data | Prometheus |");
    out("| --- | --- | --- | --- | --- |");
    for (const l of agreement) out(l);
    out("");
  }
  for (const [res, which] of [
    [promRes, "expr"],
    [promForRes, "forExpr"],
  ] as const) {
    if (!res) continue;
    out(`Prometheus per rule, p50 ms (${which === "expr" ? "range functions" : "`for:` forms"}):`);
    for (const [n, r] of rules.entries()) {
      const xs = [...res.ruleMs[n]].sort((a, b) => a - b);
      out(`  ${quantile(xs, 0.5).toFixed(2).padStart(7)}  ${r[which]}`);
    }
  }
  if (svcWall.length > 0) {
    const p99 = quantile(svcWall, 0.99);
    out("");
    out(
      `goal: a ${(VMS * rules.length).toLocaleString("en")}-instance cycle ≤ 1 s: ` +
        `${p99 <= 1000 ? "met" : "NOT met"} (p99 ${p99.toFixed(0)} ms)`,
    );
    if (promRes) {
      const d = promRes.durations;
      const r50 = quantile(svcWall, 0.5) / quantile(d, 0.5);
      const r99 = p99 / quantile(d, 0.99);
      out(
        `goal: ≤ 1.0× Prometheus's rule-group time: ${r50 <= 1 && r99 <= 1 ? "met" : "NOT met"} ` +
          `(svc / Prometheus p50 ${r50.toFixed(2)}×, p99 ${r99.toFixed(2)}×; CPU ${(mean(svcCpu) / promRes.cpuPerEval).toFixed(2)}×)`,
      );
    }
  }
} finally {
  if (prom) {
    prom.proc.kill("SIGCONT");
    await stopTarget(prom);
  }
  rmSync(peerDir, { recursive: true, force: true });
  await t.close();
}
