/**
 * `bench:vm-query --backend remote`: QueryVMMonitoring through svc with SVC_METRICS_BACKEND=remote
 * against the equivalent queries sent straight to the same VictoriaMetrics (testing/engines.ts, the
 * flags docs/deploy.md gives), from the separate load client (load.mjs) as the embedded mode does.
 *
 *   npm run bench:vm-query -- --backend remote              1,000 VMs × 7 days (≈ 123 M samples)
 *   npm run bench:vm-query -- --backend remote --quick      100 VMs × 1 day
 *
 * Data: the embedded mode's samples (data.ts), written straight to the engine by remote write with
 * the labels svc's ingest stores (project_id, vm, vm_id, location, source); svc runs in this process
 * on a clock frozen at the load's end, so its range is the same as the direct queries'. The engine's
 * background merges are waited out before measuring.
 *
 * Each row compares, iteration by iteration (the order of the arms rotating, so that neither always
 * follows the other), three ways of getting one VM's charts:
 * - svc: QueryVMMonitoring (Connect JSON);
 * - engine, PromQL: the metrics' PromQL (metric-ids.ts, with the project_id matcher svc adds) as range
 *   queries sent at once, as a dashboard's panels would be: what a client reading the engine directly
 *   sends for the same charts (VictoriaMetrics evaluates its own `rate`, see docs/decisions.md);
 * - engine, svc's requests: exactly what svc sends for the RPC (metrics/remote/window-aggregates.ts
 *   and query.ts): one range query for the pushed-down max/avg/last_over_time and the pieces `rate`
 *   is computed from, with the export of the newest observations alongside. svc's
 *   latency minus this arm's is svc's own time (HTTP, auth, inventory, decoding, rate, encoding).
 * The figure against the goal (≤ 2 ms added to a query's p50) is svc's p50 − the PromQL arm's, and
 * the median of the paired differences beside it.
 * Env: BENCH_VMS, BENCH_DAYS, BENCH_ITER (iterations per row: 1,000; 100 with --quick), BENCH_WARMUP,
 * BENCH_CPU_PROFILE=<file.cpuprofile> (svc's process over the measured rows, summarized at the end).
 */
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { create, toJsonString } from "@bufbuild/protobuf";
import { pushRemoteWrite, type Sample, type TimeSeries } from "../../packages/remotewrite/src/index.ts";
import { QueryVMMonitoringRequestSchema } from "../../packages/sdk/src/gen/svc/monitoring/v1/monitoring_pb.ts";
import type { WindowRequest } from "../../packages/server/src/metrics/backend.ts";
import { metricIds } from "../../packages/server/src/metrics/metric-ids.ts";
import { victoriaMetricsQueries } from "../../packages/server/src/metrics/remote/window-aggregates.ts";
import { testDialects } from "../../packages/server/testing/dialects.ts";
import { type RunningEngine, startEngine } from "../../packages/server/testing/engines.ts";
import { startTestApp, type TestApp } from "../../packages/server/testing/harness.ts";
import {
  calibrationMs,
  loadAverageLine,
  median,
  profileSummary,
  quantile,
  waitForIdle,
} from "../common/measure.ts";
import { cpuSeconds } from "../ingest/proc.ts";
import { DAYS, ITER, observed, SIX_METRICS, STEP_MS, VMS, valuesAt, vmSeriesLabels, WARMUP } from "./data.ts";
import { type LoadItem, type LoadRequest, type LoadRow, runLoad, type Span } from "./run-load.ts";

const SAMPLING_S = 30;
const S = 1000;
/** The issue's goal: svc adds at most this to a query's p50, ms. */
const GOAL_P50_MS = 2;
const out = (s: string) => process.stdout.write(`${s}\n`);

let engine: RunningEngine | undefined;
let t: TestApp | undefined;
try {
  out(`remote backend: ${loadAverageLine()}`);
  engine = await startEngine("victoria-metrics");
  const [sqlite] = await testDialects();
  t = await startTestApp(sqlite.dialect, {
    metricsBackend: "remote",
    remoteMetrics: { remoteWriteUrl: engine.remoteWriteUrl, queryUrl: engine.queryUrl, headers: {} },
  });
  // Frozen at a whole minute of the real time: the engine keeps real time (retention), and svc's
  // ranges must be the direct queries' for the whole run.
  t.clock.ms = Math.floor(Date.now() / 60_000) * 60_000;
  const nowMs = t.clock.ms;
  const vmIds = Array.from({ length: VMS }, (_, i) => `vm-${String(i).padStart(4, "0")}`);
  const p = await t.seedProject("bench", vmIds);
  await load(engine, p.vms, vmIds, nowMs);

  const key = await t.clients(p.owner.session).keys.createKey({
    parent: p.projectName,
    displayName: "bench",
    capabilities: ["monitoring.read"],
    requestId: randomUUID(),
  });
  const six = [...SIX_METRICS];
  const check = await t
    .clients(key.secret)
    .monitoring.queryVMMonitoring(queryReq(p.vms[0], six, DAYS * 86_400, 1800, nowMs));
  if (check.series.length < 6 || check.quality?.partial)
    throw new Error(
      `unexpected response: ${check.series.map((s) => s.metricId)} ${JSON.stringify(check.quality?.errors)}`,
    );

  const svcBase = t.baseUrl;
  const engineBase = engine.queryUrl;
  const vmAt = (i: number) => p.vms[(i * 7919) % VMS];
  const iterations = Math.min(ITER, VMS);
  const svcRpc = (i: number, ids: string[], rangeS: number, stepS: number): LoadRequest => ({
    url: `${svcBase}/svc.monitoring.v1.MonitoringService/QueryVMMonitoring`,
    method: "POST",
    headers: {
      Authorization: `Bearer ${key.secret}`,
      "Connect-Protocol-Version": "1",
      "Content-Type": "application/json",
    },
    body: toJsonString(QueryVMMonitoringRequestSchema, queryReq(vmAt(i), ids, rangeS, stepS, nowMs)),
  });
  const arms = (ids: string[], rangeS: number, stepS: number) => [
    { name: "svc QueryVMMonitoring", item: (i: number): LoadItem => svcRpc(i, ids, rangeS, stepS) },
    {
      name: "engine, the PromQL at once",
      item: (i: number): LoadItem => ({
        group: enginePromql(engineBase, vmAt(i), ids, rangeS, stepS, nowMs),
      }),
    },
    {
      name: "engine, svc's own requests",
      item: (i: number): LoadItem => svcsRequests(engineBase, vmAt(i), ids, rangeS, stepS, nowMs),
    },
  ];
  const rows: PairedRow[] = [
    paired("floor: GET /healthz of svc vs GET /health of the engine", iterations, [
      { name: "svc /healthz", item: () => ({ url: `${svcBase}/healthz`, method: "GET", headers: {} }) },
      { name: "engine /health", item: () => ({ url: `${engineBase}/health`, method: "GET", headers: {} }) },
    ]),
    paired(`${DAYS} d @1800 s, 6 metrics`, iterations, arms(six, DAYS * 86_400, 1800)),
    paired("1 h @30 s, 6 metrics", iterations, arms(six, 3600, 30)),
    paired("1 h @30 s, cpu only", iterations, arms(["cpu_utilization_pct"], 3600, 30)),
  ];
  const serverMs: Span[] = [];
  t.app.server.server.on("request", (_req: unknown, res: import("node:http").ServerResponse) => {
    const start = performance.now();
    res.on("finish", () => serverMs.push({ start, end: performance.now() }));
  });
  calibrationMs();
  const calibration0 = calibrationMs();
  const load0 = loadAverageLine();
  const profileTo = process.env.BENCH_CPU_PROFILE;
  const inspector = profileTo ? new Session() : undefined;
  if (inspector) {
    inspector.connect();
    await inspector.post("Profiler.enable");
    await inspector.post("Profiler.start");
  }
  const results = await runLoad(
    rows.map((r) => r.row),
    serverMs,
  );
  if (inspector && profileTo) {
    const { profile } = await inspector.post("Profiler.stop");
    writeFileSync(profileTo, JSON.stringify(profile));
    inspector.disconnect();
    out(profileSummary(profile).join("\n"));
  }
  const calibration1 = calibrationMs();
  out(
    `\n${VMS} VMs, ${DAYS} d of data in VictoriaMetrics; ${iterations} iterations per row, arms interleaved`,
  );
  out(`before the load: ${load0}; after: ${loadAverageLine()}`);
  out(
    `machine speed: a fixed CPU workload took ${calibration0.toFixed(1)} ms before the load and ${calibration1.toFixed(1)} ms after (lower is faster)`,
  );
  out("| row | arm | n | p50 ms | p90 ms | p99 ms | max ms | svc CPU ms/req | in svc p50 ms |");
  out("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
  const goals: string[] = [];
  results.forEach((r, k) => {
    const row = rows[k];
    const byArm = row.split(r.latenciesMs);
    byArm.forEach((lat, a) => {
      const sorted = [...lat].sort((x, y) => x - y);
      const q = (f: number) => quantile(sorted, f).toFixed(2);
      const inSvc = r.serverMs.map((s) => s.end - s.start).sort((x, y) => x - y);
      const svcArm = a === 0;
      out(
        `| ${row.row.name} | ${row.arms[a]} | ${lat.length} | ${q(0.5)} | ${q(0.9)} | ${q(0.99)} | ${sorted[sorted.length - 1].toFixed(2)} | ` +
          `${svcArm ? (r.serverCpuMs / lat.length).toFixed(2) : ""} | ${svcArm ? quantile(inSvc, 0.5).toFixed(2) : ""} |`,
      );
    });
    const p50 = byArm.map((lat) =>
      quantile(
        [...lat].sort((x, y) => x - y),
        0.5,
      ),
    );
    for (let a = 1; a < byArm.length; a++) {
      const pairs = byArm[0].map((x, m) => x - byArm[a][m]);
      const line = `${row.row.name}: svc − ${row.arms[a]}: p50 ${(p50[0] - p50[a]).toFixed(2)} ms, median of paired differences ${median(pairs).toFixed(2)} ms`;
      out(line);
      if (a === 1 && k > 0)
        goals.push(
          `  ${row.row.name}: ${p50[0] - p50[a] <= GOAL_P50_MS ? "met" : "NOT met"} (${(p50[0] - p50[a]).toFixed(2)} ms; paired ${median(pairs).toFixed(2)} ms)`,
        );
    }
  });
  out(
    `\ngoal: svc adds ≤ ${GOAL_P50_MS} ms to a query's p50 (svc's p50 − the PromQL sent straight to the engine):`,
  );
  for (const g of goals) out(g);
  out(
    "note: svc CPU = this process (svc in-process) over the row ÷ svc requests; the engine's arms do not touch it. " +
      "Responses: the load client asks for gzip/br as a browser does, from svc and from the engine.",
  );
} finally {
  await t?.close();
  await engine?.stop();
}

function queryReq(vm: string, ids: string[], rangeS: number, stepS: number, nowMs: number) {
  return create(QueryVMMonitoringRequestSchema, {
    name: vm,
    metricIds: ids,
    startTimeUnix: BigInt(nowMs / S - rangeS),
    endTimeUnix: BigInt(nowMs / S),
    stepSeconds: stepS,
  });
}

/** The RPC's range as query.ts plans it (start rounded up, end down to the step), ms. */
function plannedRange(rangeS: number, stepS: number, nowMs: number): { startMs: number; endMs: number } {
  const nowS = Math.floor(nowMs / S);
  return {
    startMs: Math.ceil((nowS - rangeS) / stepS) * stepS * S,
    endMs: Math.floor(nowS / stepS) * stepS * S,
  };
}

/** `{…, vm="<vm>", project_id="bench"}`: the selector svc sends (the tenant matcher it adds). */
function tenantSelector(vm: string, extra: string[] = []): string {
  return `{${[...extra, `vm=${JSON.stringify(vm)}`, 'project_id="bench"'].join(",")}}`;
}

/** The metrics' PromQL (metric-ids.ts) with the project's matcher, as range queries sent at once. */
function enginePromql(
  base: string,
  vm: string,
  ids: string[],
  rangeS: number,
  stepS: number,
  nowMs: number,
): LoadRequest[] {
  const { startMs, endMs } = plannedRange(rangeS, stepS, nowMs);
  return ids.map((id) => ({
    url: `${base}/api/v1/query_range?${new URLSearchParams({
      query: metricIds.get(id)!.promql(tenantSelector(vm), stepS, SAMPLING_S),
      start: String(startMs / S),
      end: String(endMs / S),
      step: String(stepS),
      nocache: "1",
    })}`,
    method: "GET",
    headers: {},
  }));
}

/**
 * What svc sends to the engine for QueryVMMonitoring (query.ts runQuery → window-aggregates.ts, then
 * readNewest): one range query for every aggregate (victoriaMetricsQueries; `rate` as its per-window
 * pieces: the bench's counters never reset, so svc never falls back to raw exports) and, alongside
 * it, the export of the newest observations.
 */
function svcsRequests(
  base: string,
  vm: string,
  ids: string[],
  rangeS: number,
  stepS: number,
  nowMs: number,
): LoadItem {
  const requests: WindowRequest[] = [];
  const stored = new Set(["svc_vm_last_observation_timestamp_seconds"]);
  for (const id of ids) {
    const def = metricIds.get(id)!;
    for (const s of def.series) stored.add(s);
    const plan = def.plan(stepS, SAMPLING_S);
    for (const r of plan.kind === "window" ? [plan.request] : [plan.num, plan.den])
      if (!requests.some((x) => x.metric === r.metric && x.fn === r.fn && x.windowMs === r.windowMs))
        requests.push(r);
  }
  const { startMs, endMs } = plannedRange(rangeS, stepS, nowMs);
  const sel = (metric: string) => tenantSelector(vm, [`__name__=${JSON.stringify(metric)}`]);
  const exportOf = (selector: string, mint: number, maxt: number): LoadRequest => ({
    url: `${base}/api/v1/export?${new URLSearchParams([
      ["match[]", selector],
      ["start", (mint / S).toFixed(3)],
      ["end", (maxt / S).toFixed(3)],
    ])}`,
    method: "GET",
    headers: {},
  });
  const windows: LoadRequest[] = victoriaMetricsQueries(requests, sel).map((query) => ({
    url: `${base}/api/v1/query_range`,
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams([
      ["query", query],
      ["start", (startMs / S).toFixed(3)],
      ["end", (endMs / S).toFixed(3)],
      ["step", stepS.toFixed(3)],
      ["nocache", "1"],
    ]).toString(),
  }));
  const recentMs = Math.min(3_600_000, endMs - startMs + stepS * S);
  const latest = exportOf(
    tenantSelector(vm, [`__name__=~${JSON.stringify([...stored].join("|"))}`]),
    endMs - recentMs,
    endMs,
  );
  return { group: [...windows, latest] };
}

interface PairedRow {
  row: LoadRow;
  arms: string[];
  /** The row's latencies by arm, iteration m of every arm at index m. */
  split(latenciesMs: number[]): number[][];
}

/**
 * A row whose iterations send one request of each arm, the arms' order rotating by iteration; the
 * load client cycles through the list, so measured request j is arm order[j % length].
 */
function paired(
  name: string,
  iterations: number,
  arms: { name: string; item: (i: number) => LoadItem }[],
): PairedRow {
  const requests: LoadItem[] = [];
  const armOf: number[] = [];
  for (let i = 0; i < iterations; i++)
    for (let k = 0; k < arms.length; k++) {
      const a = (i + k) % arms.length;
      requests.push(arms[a].item(i));
      armOf.push(a);
    }
  return {
    row: { name, n: iterations * arms.length, warmup: WARMUP, warmupMaxMs: 15_000, requests },
    arms: arms.map((a) => a.name),
    split(latenciesMs) {
      const byArm: number[][] = arms.map(() => []);
      latenciesMs.forEach((ms, j) => {
        byArm[armOf[j % armOf.length]].push(ms);
      });
      return byArm;
    },
  };
}

/**
 * Writes the samples to the engine by remote write, a day of one VM's seven series per request, four
 * requests in flight, then waits for the engine's background merges to finish.
 */
async function load(e: RunningEngine, vms: string[], vmIds: string[], nowMs: number): Promise<void> {
  const t0 = performance.now();
  const steps = Math.floor((DAYS * 86_400_000) / STEP_MS) - 2;
  const start = nowMs - steps * STEP_MS;
  const chunk = 2880;
  const jobs: [number, number][] = [];
  for (let k0 = 0; k0 <= steps; k0 += chunk) for (let i = 0; i < vms.length; i++) jobs.push([i, k0]);
  let samples = 0;
  let next = 0;
  const worker = async () => {
    for (let j = next++; j < jobs.length; j = next++) {
      const [i, k0] = jobs[j];
      const labels = vmSeriesLabels(vms[i], vmIds[i]);
      const series: (TimeSeries & { samples: Sample[] })[] = labels.map((l) => ({
        labels: Object.entries(l)
          .map(([name, value]) => ({ name, value }))
          .sort((a, b) => (a.name < b.name ? -1 : 1)),
        samples: [],
      }));
      for (let k = k0; k < Math.min(k0 + chunk, steps + 1); k++) {
        const ts = start + k * STEP_MS;
        const v = valuesAt(i, k, ts);
        for (let s = 0; s < 6; s++) series[s].samples.push({ value: v[s], timestampMs: ts });
        if (observed(k, steps)) series[6].samples.push({ value: v[6], timestampMs: ts });
      }
      for (const s of series) samples += s.samples.length;
      const r = await pushRemoteWrite(e.remoteWriteUrl, "unused", { timeseries: series });
      if (r.status >= 300) throw new Error(`the engine refused a write: ${r.status} ${r.body.slice(0, 300)}`);
    }
  };
  await Promise.all(Array.from({ length: 4 }, worker));
  await e.flush();
  const loadS = (performance.now() - t0) / 1000;
  out(
    `loaded ${samples.toLocaleString("en")} samples into VictoriaMetrics by remote write in ${loadS.toFixed(1)} s`,
  );
  const waited = await waitForIdle(() => cpuSeconds(e.pid!), {
    intervalMs: 2000,
    idleCpuS: 0.1,
    maxMs: 300_000,
  });
  out(`  the engine settled (background merges) after ${(waited / 1000).toFixed(0)} s`);
}
