/**
 * PromQL query bench: the same VM series loaded into svc (the real server as a child process, through
 * its remote-write endpoint) and into Debian's Prometheus 2.42 (remote-write receiver), then a query
 * suite run as range queries against both HTTP APIs. Prints p50/p99 latency per query with the
 * svc/Prometheus ratio, and how many result points agree value by value. VictoriaMetrics (Debian's
 * victoria-metrics, when installed; --no-vm skips it) gets the same data and queries in the same
 * rounds: svc ÷ VictoriaMetrics over the queries whose answers equal svc's point by point, the
 * others listed (MetricsQL differs from PromQL, e.g. rate without extrapolation).
 *
 *   npm run bench:promql            1,000 VMs, 24 h loaded, 1 h and 24 h windows, 10 runs per query
 *   npm run bench:promql -- --quick 1,000 VMs, 1.5 h loaded, 1 h and 1.5 h windows, 5 runs per query
 *   … -- --prom2-windows             svc runs each subquery window 1 ms wider (see below)
 *
 * Value differences to expect: Prometheus 2.42 selects range and subquery windows closed on the left,
 * [t − r, t]; svc follows Prometheus 3, left-open (t − r, t]. A subquery's grid always has a point
 * exactly at t − r, so `max_over_time(…[30m:1m])` differs whenever that point was the maximum; a raw
 * sample exactly at t − 5m (rare with millisecond jitter) moves a rate. `--prom2-windows` widens
 * svc's subquery windows by 1 ms (`[30m1ms:1m]`), which includes that left edge: the subquery then
 * agrees on every point (checked: 120,000 of 120,000 with --quick).
 *
 * Steps keep the widest answers (1,000 series) under svc's 4 MiB response limit: 61 points for 1 h,
 * 97 for 24 h.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pushRemoteWrite } from "@svc/remotewrite";
import { createSvcClients } from "@svc/sdk";
import { freePort } from "../ingest/proc.ts";
import { type Running, startTarget, stopTarget, targets } from "../ingest/targets.ts";
import { buildWorkload, type Workload } from "../ingest/workload.ts";
import { type Agreement, compareMatrices, type MatrixSeries } from "./compare.ts";
import { SVC_ONLY_LABELS, suite } from "./suite.ts";

const quick = process.argv.includes("--quick");
const prom2Windows = process.argv.includes("--prom2-windows");

/**
 * `[30m:1m]` → `[30m1ms:1m]`: a Prometheus 3 subquery window that includes its left edge. Range
 * selectors stay as they are: widening `[5m]` would change rate's extrapolation (it divides by the range).
 */
function closedOnTheLeft(expr: string): string {
  return expr.replace(/\[(\d+[smhdwy]):/g, (_, range: string) => `[${range}1ms:`);
}
const VMS = 1_000;
const HOURS = quick ? 1.5 : 24;
const RUNS = quick ? 5 : 10;
const PROJECT = "bench-0";
const ADMIN_TOKEN = "bench-operator-token-0123456789";

function ensurePrometheus(): void {
  if (spawnSync("prometheus", ["--version"]).status === 0) return;
  console.log("installing Debian prometheus …");
  const r = spawnSync("flock", ["/tmp/apt.lock", "apt-get", "install", "-y", "prometheus"], {
    stdio: "inherit",
  });
  if (r.status !== 0) throw new Error("could not install prometheus (apt-get failed)");
}

async function load(w: Workload, base: string, path: string, token: string): Promise<number> {
  const t0 = performance.now();
  let failed = 0;
  // Step by step, a few requests in flight: each series' samples arrive in order, as from a collector.
  for (const step of w.steps) {
    const queue = step.map((_, i) => i);
    const worker = async () => {
      for (let i = queue.shift(); i !== undefined; i = queue.shift()) {
        const r = await pushRemoteWrite(base + path, token, step[i], { timeoutMs: 120_000 });
        if (r.status >= 300) failed++;
      }
    };
    await Promise.all(Array.from({ length: 4 }, worker));
  }
  if (failed > 0) console.log(`  ${failed} remote-write requests failed`);
  return (performance.now() - t0) / 1000;
}

/** A console session of the project owner: the svc credential the query API takes. */
async function svcToken(base: string): Promise<string> {
  const admin = createSvcClients({ baseUrl: base, token: ADMIN_TOKEN, maxRetries: 0 }).admin;
  const email = "bench@example.com";
  const password = "bench-password-0123456789";
  const user = await admin.users.createUser({ email, password, displayName: "Bench" });
  await admin.projects.setMember({ project: `projects/${PROJECT}`, user: user.name, role: "owner" });
  const { sessionToken } = await createSvcClients({ baseUrl: base, maxRetries: 0 }).sessions.login({
    email,
    password,
  });
  return sessionToken;
}

interface Endpoint {
  name: string;
  url: string;
  headers: Record<string, string>;
}

async function rangeQuery(e: Endpoint, expr: string, start: number, end: number, step: number) {
  const body = new URLSearchParams({
    query: expr,
    start: String(start / 1000),
    end: String(end / 1000),
    step: String(step / 1000),
  });
  const t0 = performance.now();
  const res = await fetch(e.url, {
    method: "POST",
    headers: { ...e.headers, "content-type": "application/x-www-form-urlencoded" },
    body,
  });
  const text = await res.text();
  const ms = performance.now() - t0;
  if (!res.ok) throw new Error(`${e.name}: ${res.status} ${text.slice(0, 300)}`);
  const json = JSON.parse(text) as { data: { result: MatrixSeries[] } };
  return { ms, result: json.data.result, bytes: text.length };
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

const pad = (s: string, n: number) => s.padEnd(n);
const lpad = (s: string, n: number) => s.padStart(n);

function geomean(xs: readonly number[]): number {
  return Math.exp(xs.reduce((s, r) => s + Math.log(r), 0) / xs.length);
}

function verdict(a: Agreement): string {
  return a.differ === 0 && a.onlyOne === 0
    ? `${a.equal} equal`
    : `${a.equal} equal, ${a.differ} differ, ${a.onlyOne} one-sided`;
}

/** One query of the suite against VictoriaMetrics: p50/p99 of both and svc's agreement with it. */
interface VmRow {
  readonly name: string;
  readonly svc: number;
  readonly svc99: number;
  readonly vm: number;
  readonly vm99: number;
  readonly agree: Agreement;
}

/**
 * The VictoriaMetrics column: MetricsQL is not PromQL (rate without extrapolation, lookback from the
 * samples' interval, …), so a ratio counts only where VictoriaMetrics answers as PromQL does: every
 * point equal to svc's (which agrees with Prometheus). The others are listed with their disagreement.
 */
function printVictoria(rows: readonly VmRow[]): void {
  console.log(
    `\nVictoriaMetrics, same data and queries (run in the same rounds)\n${pad("query", 26)}${lpad("svc p50", 9)}${lpad("p99", 8)}${lpad("vm p50", 9)}${lpad("p99", 8)}${lpad("x p50", 7)}${lpad("x p99", 7)}  agreement with svc (points)`,
  );
  for (const r of rows)
    console.log(
      `${pad(r.name, 26)}${lpad(r.svc.toFixed(1), 9)}${lpad(r.svc99.toFixed(1), 8)}${lpad(r.vm.toFixed(1), 9)}${lpad(r.vm99.toFixed(1), 8)}${lpad((r.svc / r.vm).toFixed(2), 7)}${lpad((r.svc99 / r.vm99).toFixed(2), 7)}  ${verdict(r.agree)}`,
    );
  const same = rows.filter((r) => r.agree.differ === 0 && r.agree.onlyOne === 0 && r.agree.equal > 0);
  const other = rows.filter((r) => !same.includes(r));
  if (same.length > 0)
    console.log(
      `geometric mean of p50 ratios, svc / victoria-metrics, over the ${same.length} queries it answers as PromQL does: ${geomean(same.map((r) => r.svc / r.vm)).toFixed(2)} (goal ≤ 1.00, issue 31)`,
    );
  else console.log("victoria-metrics answered no query of the suite as PromQL does");
  console.log(
    `  (over all ${rows.length} queries, answers aside: ${geomean(rows.map((r) => r.svc / r.vm)).toFixed(2)})`,
  );
  if (other.length > 0) {
    console.log(
      `not answered as PromQL does (left out of the ratio): ${other.map((r) => r.name).join(", ")}`,
    );
    for (const r of other) for (const x of r.agree.examples.slice(0, 1)) console.log(`  ${r.name}: ${x}`);
  }
}

async function main(): Promise<void> {
  ensurePrometheus();
  const endMs = Math.floor((Date.now() - 60_000) / 30_000) * 30_000;
  const w = buildWorkload({
    series: VMS * 21,
    hours: HOURS,
    seriesPerRequest: 2_100,
    churnShare: 0,
    churnEveryMs: 3_600_000,
    projects: 1,
    endMs,
  });
  console.log(
    `workload: ${w.vms.length} VMs, ${w.activeSeries.toLocaleString()} series, ${HOURS} h at 30 s, ${w.samples.toLocaleString()} samples`,
  );
  const root = mkdtempSync(join(tmpdir(), "svc-bench-promql-"));
  const running: Running[] = [];
  try {
    const svcSpec = targets.find((t) => t.name === "svc")!;
    const promSpec = targets.find((t) => t.name === "prometheus")!;
    const vmSpec = targets.find((t) => t.name === "victoria-metrics")!;
    const withVm = !process.argv.includes("--no-vm") && spawnSync(vmSpec.bin!, ["--version"]).status === 0;
    if (!withVm) console.log("VictoriaMetrics: not run (--no-vm, or victoria-metrics not installed)");
    const svc = (await startTarget(svcSpec, join(root, "svc"), await freePort())).running;
    running.push(svc);
    const prom = (await startTarget(promSpec, join(root, "prometheus"), await freePort())).running;
    running.push(prom);
    await svcSpec.prepare!(svc.base, w);
    console.log(`load: svc ${(await load(w, svc.base, svcSpec.write, svcSpec.token)).toFixed(1)} s`);
    console.log(
      `load: prometheus ${(await load(w, prom.base, promSpec.write, promSpec.token)).toFixed(1)} s`,
    );
    const token = await svcToken(svc.base);
    const endpoints: Endpoint[] = [
      {
        name: "svc",
        url: `${svc.base}/v1/monitoring/projects/${PROJECT}/prometheus/api/v1/query_range`,
        headers: { authorization: `Bearer ${token}` },
      },
      { name: "prometheus", url: `${prom.base}/api/v1/query_range`, headers: {} },
    ];
    if (withVm) {
      const vm = (await startTarget(vmSpec, join(root, "victoria-metrics"), await freePort())).running;
      running.push(vm);
      console.log(
        `load: victoria-metrics ${(await load(w, vm.base, vmSpec.write, vmSpec.token)).toFixed(1)} s`,
      );
      await fetch(vm.base + vmSpec.flush!);
      // nocache: every run evaluates (the bench starts VictoriaMetrics with -search.disableCache too).
      endpoints.push({
        name: "victoria-metrics",
        url: `${vm.base}/api/v1/query_range?nocache=1`,
        headers: {},
      });
    }
    const windows = [
      { name: "1h", ms: 3_600_000, step: 60_000 },
      { name: `${HOURS}h`, ms: HOURS * 3_600_000, step: HOURS >= 24 ? 900_000 : 90_000 },
    ];
    console.log(
      `\n${pad("query", 20)}${pad("range", 6)}${lpad("svc p50", 9)}${lpad("p99", 8)}${lpad("prom p50", 10)}${lpad("p99", 8)}${lpad("x p50", 7)}${lpad("x p99", 7)}  agreement (points)`,
    );
    const ratios: number[] = [];
    const total: Agreement = { equal: 0, differ: 0, onlyOne: 0, examples: [] };
    const vmRows: VmRow[] = [];
    for (const win of windows) {
      const end = Math.floor(endMs / win.step) * win.step;
      const start = end - win.ms;
      for (const q of suite) {
        const times: number[][] = endpoints.map(() => []);
        const last: MatrixSeries[][] = endpoints.map(() => []);
        // One warm-up each, then alternate so all see the same machine conditions.
        for (const e of endpoints) await rangeQuery(e, q.expr, start, end, win.step);
        for (let r = 0; r < RUNS; r++) {
          for (let k = 0; k < endpoints.length; k++) {
            const expr = k === 0 && prom2Windows ? closedOnTheLeft(q.expr) : q.expr;
            const a = await rangeQuery(endpoints[k], expr, start, end, win.step);
            times[k].push(a.ms);
            last[k] = a.result;
          }
        }
        const agree = compareMatrices(last[0], last[1], SVC_ONLY_LABELS);
        total.equal += agree.equal;
        total.differ += agree.differ;
        total.onlyOne += agree.onlyOne;
        if (total.examples.length < 6)
          total.examples.push(...agree.examples.map((x) => `${q.name}/${win.name}: ${x}`));
        const [s50, s99, p50, p99] = [
          pct(times[0], 50),
          pct(times[0], 99),
          pct(times[1], 50),
          pct(times[1], 99),
        ];
        ratios.push(s50 / p50);
        if (withVm) {
          const vmAgree = compareMatrices(last[0], last[2], SVC_ONLY_LABELS, "victoria-metrics");
          vmRows.push({
            name: `${q.name}/${win.name}`,
            svc: s50,
            svc99: s99,
            vm: pct(times[2], 50),
            vm99: pct(times[2], 99),
            agree: vmAgree,
          });
        }
        console.log(
          `${pad(q.name, 20)}${pad(win.name, 6)}${lpad(s50.toFixed(1), 9)}${lpad(s99.toFixed(1), 8)}${lpad(p50.toFixed(1), 10)}${lpad(p99.toFixed(1), 8)}${lpad((s50 / p50).toFixed(2), 7)}${lpad((s99 / p99).toFixed(2), 7)}  ${verdict(agree)}`,
        );
      }
    }
    console.log(`\nlatencies in ms over ${RUNS} runs (HTTP round trip, body read); x = svc / prometheus`);
    console.log(`geometric mean of p50 ratios: ${geomean(ratios).toFixed(2)} (goal ≤ 0.60, issue 31)`);
    console.log(
      `agreement: ${total.equal.toLocaleString()} points equal, ${total.differ} differ, ${total.onlyOne} only on one side`,
    );
    for (const x of total.examples) console.log(`  ${x}`);
    if (withVm) printVictoria(vmRows);
  } finally {
    for (const r of running) await stopTarget(r);
    rmSync(root, { recursive: true, force: true });
  }
}

await main();
