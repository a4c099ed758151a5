/**
 * Ingest benchmark (not a test): the same remote-write workload into svc's tsdb, Prometheus and
 * VictoriaMetrics on this machine, printed as a table with ratios against svc.
 * Env: BENCH_SERIES (10000), BENCH_HOURS (2), BENCH_CONCURRENCY (4), BENCH_PEERS (comma list or "none").
 * Peers come from Debian: `flock /tmp/apt.lock apt-get install -y prometheus victoria-metrics`.
 */
import { execFileSync } from "node:child_process";
import { peers, runPeer } from "./peers.ts";
import { runSvc, type TargetResult } from "./svc.ts";
import { buildWorkload } from "./workload.ts";

const series = Number(process.env.BENCH_SERIES ?? 10_000);
const hours = Number(process.env.BENCH_HOURS ?? 2);
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 4);
const wanted = (process.env.BENCH_PEERS ?? peers.map((p) => p.name).join(",")).split(",");

function installed(bin: string): boolean {
  try {
    execFileSync("sh", ["-c", `command -v ${bin}`], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

const w = buildWorkload(series, hours, Date.now());
console.log(
  `workload: ${w.series.toLocaleString()} series × ${hours} h at 30 s = ${w.samples.toLocaleString()} samples ` +
    `in ${w.bodies.length} remote-write requests, ${concurrency} in flight`,
);
const results: TargetResult[] = [await runSvc(w, concurrency)];
for (const p of peers) {
  if (!wanted.includes(p.name)) continue;
  if (!installed(p.name)) {
    console.log(`skipping ${p.name}: not installed`);
    continue;
  }
  results.push(await runPeer(p, w, concurrency));
}
const svc = results[0];
const rows = results.map((r) => [
  r.name,
  r.samplesPerSec.toFixed(0),
  r.rssMiB.toFixed(1),
  (r.diskBytes / 2 ** 20).toFixed(1),
  (r.diskBytes / w.samples).toFixed(2),
  r === svc ? "1.00" : (svc.samplesPerSec / r.samplesPerSec).toFixed(2),
  r === svc ? "1.00" : (svc.rssMiB / r.rssMiB).toFixed(2),
  r === svc ? "1.00" : (svc.diskBytes / r.diskBytes).toFixed(2),
]);
const head = [
  "target",
  "samples/s",
  "RSS Δ MiB",
  "disk MiB",
  "disk B/sample",
  "svc÷ rate",
  "svc÷ RSS",
  "svc÷ disk",
];
const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
const line = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i])).join("  ");
console.log(line(head));
for (const r of rows) console.log(line(r));
for (const r of results) for (const n of r.notes) console.log(`note: ${n}`);
console.log("note: disk = data directory right after ingest (WAL-dominated for all three at 2 h)");
