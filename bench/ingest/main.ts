/**
 * Ingest benchmark (not a test): the same remote-write workload sent to svc's HTTP ingest endpoint,
 * to Prometheus 2.42 and to VictoriaMetrics, each a child process measured through /proc, printed as
 * one table with svc's ratio to both peers.
 *
 *   npm run bench:ingest              10,000 active series × 4 h (≈ 4.8 M samples; the head spans more
 *                                     than 1.5 block ranges, so svc and Prometheus cut a block), 4 senders
 *   npm run bench:ingest -- --quick   4,000 series × 2 h, about a minute in all
 *   Both runs measure svc with and without its own metrics (SVC_SELF_METRICS=false), interleaved
 *   (ABBA rounds, BENCH_SELF_METRICS_ROUNDS pairs, default 2), and the p50/p99 of one /metrics scrape
 *   of the svc with metrics after its ingest (BENCH_SERIES=10000 for the 10,000-series figure).
 *   npm run bench:ingest -- --backend remote [--quick]
 *                                     svc with SVC_METRICS_BACKEND=remote in front of VictoriaMetrics
 *                                     against VictoriaMetrics alone, interleaved (bench/ingest/remote.ts):
 *                                     CPU per million samples of svc + engine ÷ engine alone
 *   npm run bench:ingest -- --guest [--quick]
 *                                     guests sending with their guest-agent tokens: ingest CPU per stored
 *                                     sample of OTLP/HTTP ÷ remote write of node_exporter's series
 *                                     (bench/ingest/guest.ts; goal <= 1.3x)
 *
 * Env: BENCH_SERIES, BENCH_HOURS, BENCH_CONCURRENCY, BENCH_TARGETS (comma list), BENCH_CHURN (share
 * of VMs replaced every 15 min, default 0.02), BENCH_SVC_NODE_ARGS (extra node flags for the svc process,
 * e.g. --cpu-prof), BENCH_KEEP_DIRS=1 (keep the data directories), BENCH_SVC_SOURCES=1 (svc from its
 * sources through tsx instead of the production build, which is built first when a source is newer than
 * it: packages/server/dist/main.js, as bench:startup and providers run it). Peers come from Debian:
 * `flock /tmp/apt.lock apt-get install -y prometheus victoria-metrics`.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { backendArg } from "../common/args.ts";
import { loadAverageLine, median, quantile } from "../common/measure.ts";
import { compareGuestFormats } from "./guest.ts";
import { cpuSeconds, duBytes, freePort, rssBytes } from "./proc.ts";
import { compareRemote } from "./remote.ts";
import { probeAnswers, startTarget, stopTarget, svcRuns, type TargetSpec, targets } from "./targets.ts";
import { buildWorkload, type SendFailures, sendStep, type Workload } from "./workload.ts";

const quick = process.argv.includes("--quick");
const backend = backendArg();
const num = (name: string, dflt: number): number => {
  const v = process.env[name];
  return v === undefined || v === "" ? dflt : Number(v);
};
const concurrency = num("BENCH_CONCURRENCY", 4);
const wanted = (process.env.BENCH_TARGETS ?? targets.map((t) => t.name).join(",")).split(",");

interface Result {
  name: string;
  samplesPerSec: number;
  cpuPerMillion: number;
  diskPerSample: number;
  rssPerSeries: number;
  /** Restart after a clean stop: until the ready endpoint answers, and until a query returns data. */
  replayReadyMs: number;
  replayQueryMs: number | undefined;
  /** Restart of the same server before the ingest (no data), for reference: start-up without replay. */
  emptyReadyMs: number;
  failedRequests: number;
  firstError: string;
  /** One scrape of the target's own metrics after the ingest: p50 and p99 ms, body bytes. */
  scrape?: { p50Ms: number; p99Ms: number; bytes: number; count: number; cpuMsEach: number };
}

function installed(bin: string): boolean {
  try {
    execFileSync("sh", ["-c", `command -v ${bin}`], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

async function measure(spec: TargetSpec, w: Workload): Promise<Result> {
  const dir = mkdtempSync(join(tmpdir(), `svc-bench-${spec.name}-`));
  let running: Awaited<ReturnType<typeof startTarget>>["running"] | undefined;
  try {
    // Start, stop, start again: the second start is the "restart without data" reference (runtime,
    // migrations and caches warm), so the restart after the ingest differs from it by the replay.
    const first = await startTarget(spec, dir, await freePort());
    await stopTarget(first.running);
    const empty = await startTarget(spec, dir, await freePort());
    running = empty.running;
    await spec.prepare?.(running.base, w);
    const pid = running.proc.pid!;
    const rss0 = rssBytes(pid);
    const cpu0 = cpuSeconds(pid);
    const t0 = performance.now();
    const failed: SendFailures = { count: 0, first: "" };
    const url = running.base + spec.write;
    for (const step of w.steps) await sendStep(url, spec.token, step, concurrency, failed);
    if (spec.flush) await fetch(running.base + spec.flush);
    const seconds = (performance.now() - t0) / 1000;
    const cpu = cpuSeconds(pid) - cpu0;
    const rss = rssBytes(pid) - rss0;
    const disk = duBytes(spec.dataDir(dir));
    const scrape = spec.selfScrape ? await timeScrapes(running.base, spec.selfScrape, pid) : undefined;
    await stopTarget(running);
    running = undefined;
    const t1 = performance.now();
    const again = await startTarget(spec, dir, await freePort());
    running = again.running;
    const replayQueryMs = await probeAnswers(spec, running, t1);
    return {
      name: spec.name,
      samplesPerSec: w.samples / seconds,
      cpuPerMillion: cpu / (w.samples / 1e6),
      diskPerSample: disk / w.samples,
      rssPerSeries: rss / w.activeSeries,
      replayReadyMs: again.readyMs,
      replayQueryMs,
      emptyReadyMs: empty.readyMs,
      failedRequests: failed.count,
      firstError: failed.first,
      scrape,
    };
  } finally {
    if (running) await stopTarget(running);
    if (process.env.BENCH_KEEP_DIRS) console.log(`kept ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

/** Times `n` scrapes one after another (after 20 to warm up), as Prometheus makes them. */
async function timeScrapes(
  base: string,
  s: { path: string; token: string },
  pid: number,
  n = 500,
): Promise<{ p50Ms: number; p99Ms: number; bytes: number; count: number; cpuMsEach: number }> {
  const headers = { authorization: `Bearer ${s.token}`, "accept-encoding": "identity" };
  let bytes = 0;
  const ms: number[] = [];
  let cpu0 = 0;
  for (let i = 0; i < n + 20; i++) {
    if (i === 20) cpu0 = cpuSeconds(pid);
    const t0 = performance.now();
    const res = await fetch(base + s.path, { headers });
    const body = await res.arrayBuffer();
    if (!res.ok) throw new Error(`${s.path} answered ${res.status}`);
    if (i >= 20) ms.push(performance.now() - t0);
    bytes = body.byteLength;
  }
  // The server's CPU per scrape: what a scrape costs whatever else the machine runs.
  const cpuMsEach = ((cpuSeconds(pid) - cpu0) * 1000) / n;
  ms.sort((a, b) => a - b);
  return { p50Ms: quantile(ms, 0.5), p99Ms: quantile(ms, 0.99), bytes, count: n, cpuMsEach };
}

if (process.argv.includes("--guest")) {
  await compareGuestFormats({ quick, concurrency });
  process.exit(0);
}

const w = buildWorkload({
  series: num("BENCH_SERIES", quick ? 4_000 : 10_000),
  hours: num("BENCH_HOURS", quick ? 2 : 4),
  seriesPerRequest: 1000,
  churnShare: num("BENCH_CHURN", 0.02),
  churnEveryMs: 15 * 60_000,
  projects: 5,
  endMs: Date.now(),
});
console.log(
  `workload: ${w.activeSeries.toLocaleString()} active series (${w.vms.length} VMs over the run, ` +
    `${w.totalSeries.toLocaleString()} series), ${w.opts.hours} h at 30 s with ms jitter = ` +
    `${w.samples.toLocaleString()} samples in ${w.requests} requests, ${concurrency} senders; ${svcRuns()}`,
);
if (backend === "remote") await compareRemote(w, { concurrency, quick });
else await compareTargets();

/** The default run: svc (embedded store), Prometheus and VictoriaMetrics one after another. */
async function compareTargets(): Promise<void> {
  const results: Result[] = [];
  const run = async (spec: TargetSpec): Promise<Result> => {
    process.stdout.write(`${spec.name}: ingest, restart … `);
    const r = await measure(spec, w);
    console.log(`${(r.samplesPerSec / 1000).toFixed(0)}k samples/s, ${r.cpuPerMillion.toFixed(2)} CPU s/M`);
    return r;
  };
  // svc with and without its own metrics, interleaved A B B A … so the machine's drift falls on both.
  const on = targets.find((t) => t.name === "svc")!;
  const off = targets.find((t) => t.name === "svc-no-self-metrics")!;
  const pairs =
    wanted.includes(on.name) && wanted.includes(off.name) ? num("BENCH_SELF_METRICS_ROUNDS", 2) : 0;
  const arms: { on: Result[]; off: Result[] } = { on: [], off: [] };
  for (let i = 0; i < pairs; i++) {
    for (const spec of i % 2 === 0 ? [on, off] : [off, on])
      (spec === on ? arms.on : arms.off).push(await run(spec));
  }
  for (const spec of targets) {
    if (!wanted.includes(spec.name)) continue;
    if (pairs > 0 && (spec === on || spec === off)) {
      // The table shows each arm's median round by CPU per sample.
      const list = spec === on ? arms.on : arms.off;
      const m = median(list.map((r) => r.cpuPerMillion));
      results.push(
        list.reduce((a, b) => (Math.abs(b.cpuPerMillion - m) < Math.abs(a.cpuPerMillion - m) ? b : a)),
      );
      continue;
    }
    if (spec.bin && !installed(spec.bin)) {
      console.log(`skipping ${spec.name}: not installed`);
      continue;
    }
    results.push(await run(spec));
  }

  const svc = results.find((r) => r.name === "svc");
  const peersOf = results.filter((r) => r !== svc && r.name !== "svc-no-self-metrics");
  type Row = [string, (r: Result) => number | undefined, number];
  const rowsSpec: Row[] = [
    ["samples/s (higher is better)", (r) => r.samplesPerSec, 0],
    ["CPU s per 1M samples", (r) => r.cpuPerMillion, 2],
    ["disk bytes per sample", (r) => r.diskPerSample, 2],
    ["RSS bytes per active series", (r) => r.rssPerSeries, 0],
    ["restart after ingest: ready (ms)", (r) => r.replayReadyMs, 0],
    ["restart after ingest: query data (ms)", (r) => r.replayQueryMs, 0],
    ["restart without data: ready (ms)", (r) => r.emptyReadyMs, 0],
    ["WAL replay ≈ difference (ms)", (r) => r.replayReadyMs - r.emptyReadyMs, 0],
  ];
  const head = ["figure", ...results.map((r) => r.name), ...peersOf.map((p) => `svc÷${p.name}`)];
  const table = rowsSpec.map(([label, get, digits]) => {
    const cells = results.map((r) => {
      const v = get(r);
      return v === undefined ? "n/a" : v.toLocaleString("en-US", { maximumFractionDigits: digits });
    });
    const ratios = peersOf.map((p) => {
      const a = svc ? get(svc) : undefined;
      const b = get(p);
      return a === undefined || b === undefined || b === 0 ? "n/a" : (a / b).toFixed(2);
    });
    return [label, ...cells, ...ratios];
  });
  const widths = head.map((h, i) => Math.max(h.length, ...table.map((r) => r[i].length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
  console.log(line(head));
  for (const r of table) console.log(line(r));
  if (pairs > 0) {
    const cpuOn = arms.on.map((r) => r.cpuPerMillion);
    const cpuOff = arms.off.map((r) => r.cpuPerMillion);
    const ratio = median(cpuOn) / median(cpuOff);
    const paired = arms.on.map((r, i) => r.cpuPerMillion / arms.off[i].cpuPerMillion);
    console.log(
      `self-metrics: CPU s per 1M samples with ${cpuOn.map((v) => v.toFixed(2)).join(", ")} ` +
        `(median ${median(cpuOn).toFixed(2)}), without ${cpuOff.map((v) => v.toFixed(2)).join(", ")} ` +
        `(median ${median(cpuOff).toFixed(2)}): with ÷ without = ${ratio.toFixed(3)} ` +
        `(${((ratio - 1) * 100).toFixed(1)} %; per pair ${paired.map((x) => x.toFixed(3)).join(", ")}); ${loadAverageLine()}`,
    );
  }
  for (const r of results) {
    if (r.scrape)
      console.log(
        `${r.name}: one /metrics scrape after the ingest (${w.activeSeries.toLocaleString()} active series stored): ` +
          `p50 ${r.scrape.p50Ms.toFixed(2)} ms, p99 ${r.scrape.p99Ms.toFixed(2)} ms over ${r.scrape.count} scrapes, ` +
          `server CPU ${r.scrape.cpuMsEach.toFixed(2)} ms per scrape, ${(r.scrape.bytes / 1024).toFixed(0)} KiB; ${loadAverageLine()}`,
      );
  }
  for (const r of results) {
    if (r.failedRequests > 0)
      console.log(`note: ${r.name}: ${r.failedRequests} requests failed, first: ${r.firstError}`);
  }
  console.log(
    "note: CPU = utime+stime of the server process (/proc/<pid>/stat) over the ingest; RSS = growth over the ingest ÷ active series; " +
      "disk = store directory after the ingest (svc: <data>/tsdb, not its SQLite inventory); restart = clean stop (SIGTERM), then spawn → ready " +
      "(svc opens the store, replaying the WAL, before it listens; it has no HTTP query API, so no query figure).",
  );
  console.log(
    "note: svc also stores what it derives per VM (CPU utilization, memory used, last observation) and adds VM labels; " +
      "figures are per sample/series sent.",
  );
}
