/**
 * Start-up: how long from spawning a server to its readiness answering 200, svc against Prometheus 2.42
 * (Debian's) in the same run, in three situations (issue 31):
 *
 * 1. without data: a fresh data directory each time (svc's production build, `node
 *    packages/server/dist/main.js`, without the demo; Prometheus with an empty storage directory);
 * 2. after ~1 M samples of WAL: each server receives the same remote-write workload (bench/ingest's), is
 *    killed with SIGKILL (no shutdown work: the next start replays every sample from the WAL), and is
 *    started again (the restarts of the servers interleaved, after every server's WAL is written; each
 *    killed again after its check); the samples are checked after the restart (svc: its head holds as
 *    many samples as before the kill; Prometheus: count_over_time over every series);
 * 3. `npm start` without data, as a newcomer runs it after `npm ci` (prestart, the demo and all).
 *
 * Ready is the readiness endpoint answering 200: svc's /readyz (the store is open, its WAL replayed, and
 * the database answers), Prometheus's /-/ready (its TSDB open, WAL replayed). Each figure is the median
 * of `BENCH_STARTUP_RUNS` (default 5) starts, svc and Prometheus interleaved. Needs `npm run build` first.
 *
 * `npm start` is also timed against what it ran before it started from the bundle: the TypeScript sources
 * through tsx (`node --import tsx packages/server/src/main.ts`, without npm and its prestart builds).
 *
 * `--baseline <main.js>` adds another production build (a copy of an earlier commit's packages/server/dist,
 * beside its packages/server/package.json) to the first two parts, interleaved: before and after in one run.
 *
 *   npm run bench:startup [-- --quick] [-- --only empty,wal,npm] [-- --baseline /path/to/dist/main.js]
 *   (--quick: 3 runs and 250 k samples of WAL; --only: some of the three parts)
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createSvcClients } from "@svc/sdk";
import { loadAverageLine, median } from "../common/measure.ts";
import { cpuSeconds, freePort } from "../ingest/proc.ts";
import { buildWorkload, type SendFailures, sendStep, type Workload } from "../ingest/workload.ts";

const root = resolve(import.meta.dirname, "../..");
const PROD_MAIN = join(root, "packages/server/dist/main.js");
const ADMIN_TOKEN = "bench-operator-token-0123456789";
const COLLECTOR_TOKEN = "bench-collector-token-0123456789";
const quick = process.argv.includes("--quick");
const runs = Number(process.env.BENCH_STARTUP_RUNS ?? (quick ? 3 : 5));
const walSamples = Number(process.env.BENCH_STARTUP_WAL_SAMPLES ?? (quick ? 250_000 : 1_000_000));
const only = process.argv.includes("--only")
  ? process.argv[process.argv.indexOf("--only") + 1].split(",")
  : ["empty", "wal", "npm"];
const GOAL_PROD = 3;
const GOAL_NPM_START_MS = 1000;

interface Server {
  readonly name: string;
  /** The readiness path: 200 once the server can serve. */
  readonly ready: string;
  spawn(dir: string, port: number): ChildProcess;
}

const baseline = process.argv.includes("--baseline")
  ? resolve(process.argv[process.argv.indexOf("--baseline") + 1])
  : undefined;

/** svc's production build at `main` (dist/main.js), without the demo. */
const svcBuild = (name: string, main: string): Server => ({
  name,
  ready: "/readyz",
  spawn: (dir, port) =>
    spawn(process.execPath, [...(process.env.BENCH_SVC_NODE_ARGS?.split(" ").filter(Boolean) ?? []), main], {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        ...process.env,
        PORT: String(port),
        HOST: "127.0.0.1",
        SVC_DATA_DIR: dir,
        SVC_DEMO: "false",
        SVC_SIMULATOR: "false",
        SVC_ADMIN_TOKEN: ADMIN_TOKEN,
        SVC_COLLECTOR_TOKEN: COLLECTOR_TOKEN,
        SVC_RETENTION_HOURS: String(7 * 24),
        SVC_LOG_LEVEL: "warn",
        SVC_DATABASE_URL: "",
      },
    }),
});
const svc = svcBuild("svc", PROD_MAIN);
const svcBaseline = baseline ? svcBuild("svc baseline", baseline) : undefined;
const isSvc = (s: Server) => s === svc || s === svcBaseline;

const prometheus: Server = {
  name: "prometheus",
  ready: "/-/ready",
  spawn: (dir, port) => {
    writeFileSync(join(dir, "prometheus.yml"), "global:\n  scrape_interval: 30s\n");
    return spawn(
      "prometheus",
      [
        `--config.file=${join(dir, "prometheus.yml")}`,
        `--storage.tsdb.path=${join(dir, "data")}`,
        `--web.listen-address=127.0.0.1:${port}`,
        "--web.enable-remote-write-receiver",
        "--storage.tsdb.retention.time=7d",
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
  },
};

/** `npm start` as a newcomer runs it: its own process group, so the stop reaches npm's children too. */
const npmStart: Server = {
  name: "npm start",
  ready: "/readyz",
  spawn: (dir, port) =>
    spawn("npm", ["start"], {
      cwd: root,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, PORT: String(port), SVC_DATA_DIR: dir, SVC_LOG_LEVEL: "warn" },
    }),
};

/** `npm start`'s server before it ran the bundle: the sources through tsx, with the demo. */
const tsxSources: Server = {
  name: "sources through tsx",
  ready: "/readyz",
  spawn: (dir, port) =>
    spawn(process.execPath, ["--import", "tsx", "packages/server/src/main.ts"], {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, PORT: String(port), SVC_DATA_DIR: dir, SVC_LOG_LEVEL: "warn" },
    }),
};

interface Started {
  readonly proc: ChildProcess;
  readonly base: string;
  readonly readyMs: number;
  /** CPU the process used until ready (its threads, not its children): a figure the machine's load moves less. */
  readonly cpuMs: number;
  /** Ms from the spawn to the first output line matching `mark` (when asked for and seen). */
  readonly markMs?: number;
  log(): string;
}

/** Spawns the server and resolves once its readiness answers 200 (polled every 5 ms). */
async function start(s: Server, dir: string, mark?: RegExp): Promise<Started> {
  const port = await freePort();
  const t0 = performance.now();
  const proc = s.spawn(dir, port);
  let log = "";
  let markMs: number | undefined;
  const onData = (d: Buffer) => {
    log = (log + d).slice(-20_000);
    if (mark && markMs === undefined && mark.test(log)) markMs = performance.now() - t0;
  };
  proc.stdout?.on("data", onData);
  proc.stderr?.on("data", onData);
  const base = `http://127.0.0.1:${port}`;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`${s.name} exited: ${log.slice(-2000)}`);
    if (performance.now() - t0 > 300_000)
      throw new Error(`${s.name} not ready after 300 s: ${log.slice(-2000)}`);
    const ok = await fetch(base + s.ready).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    await new Promise((r) => setTimeout(r, 5));
  }
  const readyMs = performance.now() - t0;
  const cpuMs = proc.pid ? cpuSeconds(proc.pid) * 1000 : Number.NaN;
  // The demo's line comes after readiness (the server listens first): wait for it, up to a minute.
  for (const t1 = performance.now(); mark && markMs === undefined && performance.now() - t1 < 60_000; )
    await new Promise((r) => setTimeout(r, 5));
  return { proc, base, readyMs, cpuMs, markMs, log: () => log };
}

/** Stops the server: SIGTERM (a clean stop) or SIGKILL (a crash), its process group for `npm start`. */
async function stop(p: ChildProcess, signal: "SIGTERM" | "SIGKILL", group = false): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return;
  const exited = new Promise((r) => p.once("exit", r));
  if (group && p.pid) process.kill(-p.pid, signal);
  else p.kill(signal);
  const timer = setTimeout(
    () => (group && p.pid ? process.kill(-p.pid, "SIGKILL") : p.kill("SIGKILL")),
    30_000,
  );
  await exited;
  clearTimeout(timer);
}

function tempDir(name: string): string {
  return mkdtempSync(join(tmpdir(), `svc-bench-startup-${name.replace(/\W/g, "")}-`));
}

/** Ready ms of a start in a fresh data directory each time. */
async function emptyStart(
  s: Server,
  mark?: RegExp,
): Promise<{ readyMs: number; cpuMs: number; markMs?: number }> {
  const dir = tempDir(s.name);
  try {
    const r = await start(s, dir, mark);
    await stop(r.proc, "SIGTERM", s === npmStart);
    return { readyMs: r.readyMs, cpuMs: r.cpuMs, markMs: r.markMs };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Sends the workload's remote-write bodies step by step (svc first gets the inventory its labels name). */
async function ingest(s: Server, base: string, w: Workload): Promise<SendFailures> {
  const failed: SendFailures = { count: 0, first: "" };
  let url = `${base}/api/v1/write`;
  let token = "unused";
  if (isSvc(s)) {
    const admin = createSvcClients({ baseUrl: base, token: ADMIN_TOKEN, maxRetries: 0 }).admin;
    for (const projectId of new Set(w.vms.map((v) => v.projectId)))
      await admin.projects.createProject({ projectId, displayName: projectId });
    const queue = [...w.vms];
    const worker = async (): Promise<void> => {
      for (let vm = queue.shift(); vm; vm = queue.shift())
        await admin.vms.createVM({
          parent: `projects/${vm.projectId}`,
          vmId: vm.vmId,
          location: vm.location,
          distribution: "debian-12",
          vcpus: 4,
          memoryBytes: 8n << 30n,
        });
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    url = `${base}/v1/ingest/prometheus/api/v1/write`;
    token = COLLECTOR_TOKEN;
  }
  for (const step of w.steps) await sendStep(url, token, step, 4, failed);
  return failed;
}

/** What the store holds, read the same way before the kill and after the restart. */
async function storedSamples(s: Server, base: string): Promise<number> {
  if (isSvc(s)) {
    const res = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    const m = /^svc_tsdb_head_samples (\S+)$/m.exec(await res.text());
    return m ? Number(m[1]) : Number.NaN;
  }
  // Per metric name (count_over_time drops the name, so one query over all would collide).
  const names = (await (await fetch(`${base}/api/v1/label/__name__/values`)).json()) as { data: string[] };
  let n = 0;
  for (const name of names.data) {
    const q = encodeURIComponent(`sum(count_over_time(${name}[1d]))`);
    const res = await fetch(`${base}/api/v1/query?query=${q}`);
    const body = (await res.json()) as { data?: { result?: { value: [number, string] }[] } };
    n += Number(body.data?.result?.[0]?.value[1] ?? Number.NaN);
  }
  return names.data.length > 0 ? n : Number.NaN;
}

interface WalArm {
  readonly dir: string;
  readonly before: number;
  readonly failed: SendFailures;
  readonly readyMs: number[];
  readonly cpuMs: number[];
  readonly after: number[];
}

/** Writes the workload to a fresh data directory and kills the server (SIGKILL): the WAL holds it all. */
async function walPrepare(s: Server, w: Workload): Promise<WalArm> {
  const dir = tempDir(s.name);
  const first = await start(s, dir);
  const failed = await ingest(s, first.base, w);
  // Prometheus appends asynchronously to its WAL; svc acknowledges after fdatasync. A moment for the former.
  await new Promise((r) => setTimeout(r, 1000));
  const before = await storedSamples(s, first.base);
  await stop(first.proc, "SIGKILL");
  return { dir, before, failed, readyMs: [], cpuMs: [], after: [] };
}

/** One timed restart on the arm's directory, checked and killed again. */
async function walRestart(s: Server, arm: WalArm): Promise<void> {
  const r = await start(s, arm.dir);
  arm.readyMs.push(r.readyMs);
  arm.cpuMs.push(r.cpuMs);
  arm.after.push(await storedSamples(s, r.base));
  await stop(r.proc, "SIGKILL");
}

const fmt = (ms: number) => `${ms.toFixed(0)} ms`;
const spread = (xs: number[]) => `${fmt(median(xs))} (${xs.map((x) => x.toFixed(0)).join(", ")})`;

if (!existsSync(PROD_MAIN)) throw new Error("no production build: run `npm run build` first");
execFileSync("prometheus", ["--version"], { stdio: "ignore" });
console.log(`start-up bench: ${runs} starts each, svc and Prometheus interleaved; ${loadAverageLine()}`);
console.log(
  `commit ${execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: root, encoding: "utf8" }).trim()}`,
);

// 1. Without data (Prometheus's figure is also the yardstick of the other two parts).
const arms = svcBaseline ? [svc, svcBaseline, prometheus] : [svc, prometheus];
const empty: Record<string, number[]> = Object.fromEntries(arms.map((s) => [s.name, []]));
const emptyCpu: Record<string, number[]> = Object.fromEntries(arms.map((s) => [s.name, []]));
for (const s of arms) await emptyStart(s); // the page cache warm, as on a machine that ran them before
for (let i = 0; i < runs; i++) {
  for (const s of i % 2 === 0 ? arms : [...arms].reverse())
    if (s === prometheus || only.includes("empty")) {
      const r = await emptyStart(s);
      empty[s.name].push(r.readyMs);
      emptyCpu[s.name].push(r.cpuMs);
    }
}
console.log(`without data, ready: ${arms.map((s) => `${s.name} ${spread(empty[s.name])}`).join("; ")}`);
console.log(`  CPU until ready: ${arms.map((s) => `${s.name} ${spread(emptyCpu[s.name])}`).join("; ")}`);

// 2. After ~1 M samples of WAL: 21 series per VM at 30 s over 2 h (below Prometheus's and svc's 3 h head
// span, so every sample stays in the WAL, none in a block).
const hours = 2;
const w = buildWorkload({
  series: Math.ceil(walSamples / (hours * 120)),
  hours,
  seriesPerRequest: 1000,
  churnShare: 0,
  churnEveryMs: 15 * 60_000,
  projects: 5,
  endMs: Date.now(),
});
console.log(
  `WAL workload: ${w.activeSeries.toLocaleString()} series × ${hours} h at 30 s = ${w.samples.toLocaleString()} samples in ${w.requests} remote-write requests, then SIGKILL and ${runs} restarts`,
);
// Every arm's WAL is written first; then the restarts alternate between the arms (as the starts without
// data do), so a change of the machine's load during the run moves each arm alike.
const wal: Record<string, WalArm> = {};
try {
  for (const s of only.includes("wal") ? arms : []) wal[s.name] = await walPrepare(s, w);
  for (let i = 0; i < (only.includes("wal") ? runs : 0); i++)
    for (const s of i % 2 === 0 ? arms : [...arms].reverse()) await walRestart(s, wal[s.name]);
} finally {
  for (const arm of Object.values(wal)) rmSync(arm.dir, { recursive: true, force: true });
}
for (const s of only.includes("wal") ? arms : []) {
  const r = wal[s.name];
  const kept = r.after.every((a) => a === r.before);
  console.log(
    `  ${s.name}: ready after the kill ${spread(r.readyMs)}, CPU until ready ${spread(r.cpuMs)}; samples stored before the kill ${r.before.toLocaleString()}, ` +
      `after each restart ${kept ? "the same" : r.after.map((a) => a.toLocaleString()).join(", ")}` +
      (r.failed.count > 0 ? `; ${r.failed.count} requests refused, first: ${r.failed.first}` : ""),
  );
}

// 3. `npm start` without data (the demo on), as after `npm ci` on a fresh clone.
// Interleaved with what it ran before (the sources through tsx, without npm).
const npm: Record<string, { readyMs: number; markMs?: number }[]> = {
  "npm start": [],
  "sources through tsx": [],
};
for (let i = 0; i < (only.includes("npm") ? runs : 0); i++) {
  for (const s of i % 2 === 0 ? [npmStart, tsxSources] : [tsxSources, npmStart])
    npm[s.name].push(await emptyStart(s, /demo project: /));
}
for (const [name, list] of Object.entries(npm)) {
  if (list.length === 0) continue;
  console.log(
    `${name} without data: ready ${spread(list.map((r) => r.readyMs))}; demo credentials printed ${spread(list.map((r) => r.markMs ?? Number.NaN))}`,
  );
}
const npmReady = npm["npm start"].map((r) => r.readyMs);
const tsxReady = npm["sources through tsx"].map((r) => r.readyMs);

const verdict = (ok: boolean) => (ok ? "met" : "NOT met");
console.log("");
console.log(`${"figure".padEnd(58)} svc ms   Prometheus ms   svc ÷ Prometheus   goal`);
const row = (label: string, a: number, b: number, goal: string) =>
  console.log(
    `${label.padEnd(58)} ${a.toFixed(0).padStart(6)}   ${b.toFixed(0).padStart(13)}   ${(a / b).toFixed(2).padStart(15)}×   ${goal}`,
  );
if (only.includes("empty") && svcBaseline)
  row("baseline build, no data: ready", median(empty[svcBaseline.name]), median(empty.prometheus), "—");
if (only.includes("empty"))
  row(
    "production build, no data: ready",
    median(empty.svc),
    median(empty.prometheus),
    `≤ ${GOAL_PROD}×: ${verdict(median(empty.svc) / median(empty.prometheus) <= GOAL_PROD)}`,
  );
if (only.includes("wal") && svcBaseline)
  row(
    `baseline build, ${(w.samples / 1e6).toFixed(2)} M samples of WAL: ready`,
    median(wal[svcBaseline.name].readyMs),
    median(wal.prometheus.readyMs),
    "—",
  );
if (only.includes("wal"))
  row(
    `production build, ${(w.samples / 1e6).toFixed(2)} M samples of WAL: ready`,
    median(wal.svc.readyMs),
    median(wal.prometheus.readyMs),
    `≤ ${GOAL_PROD}×: ${verdict(median(wal.svc.readyMs) / median(wal.prometheus.readyMs) <= GOAL_PROD)}`,
  );
if (only.includes("npm")) {
  row(
    "sources through tsx (npm start before), no data: ready",
    median(tsxReady),
    median(empty.prometheus),
    "—",
  );
  row(
    "npm start, no data: ready",
    median(npmReady),
    median(empty.prometheus),
    `≤ ${GOAL_NPM_START_MS} ms: ${verdict(median(npmReady) <= GOAL_NPM_START_MS)}`,
  );
}
console.log(`end: ${loadAverageLine()}`);
