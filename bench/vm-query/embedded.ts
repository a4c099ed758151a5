/**
 * VM query benchmark (not a test): QueryVMMonitoring, ListVMMonitoring and an export shard against
 * the whole server in-process over loopback HTTP (auth, Connect, limiter, TSDB, PromQL included).
 *
 *   npm run bench:vm-query              1,000 VMs × 7 days of 30 s samples (6 stored series per VM)
 *   npm run bench:vm-query -- --quick   100 VMs × 1 day
 *
 * Data: written straight into the TSDB appender (not through HTTP ingest, which would take minutes
 * for ~121 M samples), with the derived series (utilization, memory used) computed by the same
 * formula as ingest. Every VM also carries 34 per-device series over the last 5 minutes so that one
 * export shard (of 4) holds 250 VMs × 40 = 10,000 series. Each row is first checked through the typed
 * SDK client, then measured from a separate client process (load.mjs, node:http keep-alive over
 * loopback, as cheap as wrk, with a browser's Accept-Encoding), one request at a time after a warm-up
 * (2,000 requests or 15 s per row; 300 with --quick; BENCH_WARMUP overrides), so the
 * client's decoding shares neither the server's event loop nor its heap. Before measuring, compaction
 * is settled and the load's garbage collected (a full GC).
 *
 * Peer: Debian's Prometheus (installed when missing; `--no-peer` skips it) gets the same samples by
 * remote write, and the six charts of the QueryVMMonitoring row are also asked as the six PromQL range
 * queries of metric-ids.ts, sent at once as a dashboard's panels would be, to Prometheus and to svc's
 * Prometheus API; the last line prints svc's one call against Prometheus's six queries.
 * Env: BENCH_VMS, BENCH_DAYS, BENCH_ITER (measured requests per row: 1,000, 100 with --quick);
 * BENCH_CLIENT_FLAGS (node flags of the load client, default one thread and a large young
 * generation, so that it takes as little of the cores as it can);
 * BENCH_CPU_PROFILE=<file.cpuprofile> records a V8 CPU profile of the measured requests only (not
 * the data load), for chrome://inspect or `npx speedscope`;
 * BENCH_HEAP_PROFILE=<file.heapprofile> records a sampling heap profile of the same requests,
 * including what young-generation GCs already collected (what makes scavenges frequent);
 * BENCH_ONLY=<regex> runs only the rows whose name it matches; BENCH_SPANS=<file.json> writes each
 * measured request's span in the server (start, end, ms waiting for a CPU) and the GC pauses;
 * BENCH_HEAP_PROMOTED=1 limits the heap profile to what survived young-generation GCs;
 * BENCH_MAX_BLOCK_HOURS caps merged blocks (2: no merging, every 2-hour block read on its own).
 *
 * A fixed CPU workload is timed before and after the load ("machine speed"): the same code's
 * CPU per request moved by up to 70% between runs on this machine, and that line tells which runs
 * were slow. The peer is paused (SIGSTOP) outside its own row, as svc is idle during that one.
 *
 * Besides the client's latency, each row shows the server's CPU per request, the time inside the
 * server, and for its slowest 1% how much of that was GC pause and how much waiting for a CPU
 * (runqueue time from /proc/self/task/<pid>/schedstat): on a 2-core machine the tail is mostly the
 * latter.
 */

import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, openSync, readdirSync, readFileSync, readSync, rmSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay, PerformanceObserver, performance } from "node:perf_hooks";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { create, toBinary, toJsonString } from "@bufbuild/protobuf";
import { pushRemoteWrite } from "../../packages/remotewrite/src/index.ts";
import {
  ListVMMonitoringRequestSchema,
  QueryVMMonitoringRequestSchema,
} from "../../packages/sdk/src/gen/svc/monitoring/v1/monitoring_pb.ts";
import { metricIds, vmSelector } from "../../packages/server/src/metrics/metric-ids.ts";
import { labelsFromRecord } from "../../packages/server/src/storage/interface.ts";
import { testDialects } from "../../packages/server/testing/dialects.ts";
import { startTestApp } from "../../packages/server/testing/harness.ts";
import { calibrationMs, quantile, waitForIdle } from "../common/measure.ts";
import { cpuSeconds, freePort } from "../ingest/proc.ts";
import { type Running, startTarget, stopTarget, targets } from "../ingest/targets.ts";
import { DAYS, ITER, observed, SIX_METRICS, STEP_MS, VMS, valuesAt, vmSeriesLabels, WARMUP } from "./data.ts";
import { runLoad, type Span } from "./run-load.ts";

// The main thread's schedstat stays open (-1: none) for the reads around every measured request
// (schedstat() below); declared here because the bench's body runs before the end of the file.
const schedBuf = Buffer.alloc(128);
const mainSchedFd = (() => {
  try {
    return openSync(`/proc/self/task/${process.pid}/schedstat`, "r");
  } catch {
    return -1;
  }
})();
const S = 1000;

const [sqlite] = await testDialects();
// BENCH_MAX_BLOCK_HOURS=2 turns block merging off (SVC_TSDB_MAX_BLOCK_HOURS), for merging's before/after.
const maxBlockHours = process.env.BENCH_MAX_BLOCK_HOURS;
// BENCH_QUERY_INLINE_COST=0 sends every Prometheus-API query to a worker (SVC_QUERY_INLINE_COST), for
// the inline path's before/after.
const inlineCost = process.env.BENCH_QUERY_INLINE_COST;
const t = await startTestApp(sqlite.dialect, {
  ...(maxBlockHours ? { maxBlockDurationMs: Number(maxBlockHours) * 3_600_000 } : {}),
  ...(inlineCost ? { queryInlineCost: Number(inlineCost) } : {}),
});
// As main.ts does once it listens: the query workers start before the first query, not with it.
await t.app.queryPool?.warm();
const out = (s: string) => process.stdout.write(`${s}\n`);
const peerDir = mkdtempSync(join(tmpdir(), "svc-bench-vmq-"));
let prom: Running | undefined;
try {
  if (!process.argv.includes("--no-peer") && prometheusInstalled()) {
    const spec = targets.find((x) => x.name === "prometheus")!;
    prom = (await startTarget(spec, join(peerDir, "prometheus"), await freePort())).running;
  } else out("peer: Prometheus skipped (--no-peer, or `apt-get install prometheus` failed)");
  const nowMs = t.clock.now();
  const vmIds = Array.from({ length: VMS }, (_, i) => `vm-${String(i).padStart(4, "0")}`);
  let p0 = performance.now();
  const p = await t.seedProject("bench", vmIds);
  out(`seeded ${VMS} VMs in ${((performance.now() - p0) / 1000).toFixed(1)} s`);

  // 7 days of 6 series per VM, time-major so every series is appended in order.
  p0 = performance.now();
  const base = (vm: string, vmId: string) => ({
    project_id: "bench",
    vm,
    vm_id: vmId,
    location: "dc-1",
    source: "hypervisor",
  });
  const labels = p.vms.map((vm, i) => vmSeriesLabels(vm, vmIds[i]).map(labelsFromRecord));
  const steps = Math.floor((DAYS * 86_400_000) / STEP_MS) - 2;
  const start = nowMs - steps * STEP_MS;
  let samples = 0;
  // The same samples go to Prometheus by remote write, 10 steps per request, in time order.
  const promLabels = labels.map((l) => l.map((ls) => ls.map((x) => ({ name: x.name, value: x.value }))));
  let promBatch: {
    labels: { name: string; value: string }[];
    samples: { value: number; timestampMs: number }[];
  }[] = promLabels.flat().map((ls) => ({ labels: ls, samples: [] }));
  let promMs = 0;
  const flushProm = async () => {
    if (!prom) return;
    const a = performance.now();
    await pushRemoteWrite(`${prom.base}/api/v1/write`, "unused", {
      timeseries: promBatch.filter((x) => x.samples.length > 0),
    });
    promMs += performance.now() - a;
    promBatch = promBatch.map((x) => ({ labels: x.labels, samples: [] }));
  };
  for (let k = 0; k <= steps; k++) {
    const ts = start + k * STEP_MS;
    const app = t.app.tsdb.appender();
    for (let i = 0; i < VMS; i++) {
      const l = labels[i];
      const v = valuesAt(i, k, ts);
      for (let j = 0; j < 6; j++) app.append(l[j], ts, v[j]);
      samples += 6;
      if (observed(k, steps)) {
        app.append(l[6], ts, v[6]);
        samples++;
      }
      if (prom) {
        // Same order as promLabels.
        const b = i * 7;
        for (let j = 0; j < 6; j++) promBatch[b + j].samples.push({ value: v[j], timestampMs: ts });
        if (observed(k, steps)) promBatch[b + 6].samples.push({ value: v[6], timestampMs: ts });
      }
    }
    await app.commit();
    if (k % 10 === 9 || k === steps) await flushProm();
    if (k % 2880 === 0) out(`  day ${k / 2880} written (${samples} samples)`);
  }
  // Per-device series over the last 5 minutes: 34 more per VM.
  const disks = ["read_bytes", "written_bytes", "reads_completed", "writes_completed"];
  for (let k = 0; k < 10; k++) {
    const ts = nowMs - (9 - k) * STEP_MS;
    const app = t.app.tsdb.appender();
    for (let i = 0; i < VMS; i++) {
      const b = base(p.vms[i], vmIds[i]);
      for (let d = 0; d < 8; d++)
        for (const m of disks)
          app.append(
            labelsFromRecord({ ...b, __name__: `svc_vm_disk_${m}_total`, device: `vd${"bcdefghi"[d]}` }),
            ts,
            k * 10 + d,
          );
      for (const m of ["transmit_bytes", "transmit_packets"])
        app.append(
          labelsFromRecord({ ...b, __name__: `svc_vm_network_${m}_total`, interface: "eth0" }),
          ts,
          k * 100,
        );
      samples += 34;
    }
    await app.commit();
  }
  const loadS = (performance.now() - p0 - promMs) / 1000;
  out(`loaded ${samples.toLocaleString("en")} samples via the TSDB appender in ${loadS.toFixed(1)} s`);
  if (prom)
    out(
      `  and the same ${VMS * 7} series into Prometheus by remote write in ${(promMs / 1000).toFixed(1)} s`,
    );
  if (prom) {
    // Prometheus compacts the ingested head in the background; measure once it has settled too
    // (it shares the two cores with svc and the client).
    const pid = prom.proc.pid!;
    const waited = await waitForIdle(() => cpuSeconds(pid), {
      intervalMs: 2000,
      idleCpuS: 0.1,
      maxMs: 300_000,
    });
    out(`  Prometheus settled (background compaction) after ${(waited / 1000).toFixed(0)} s`);
    // Paused (SIGSTOP) except during its own row, as svc is idle during that one: its background
    // work (a compaction check every minute, Go's GC) took CPU from svc's rows otherwise.
    prom.proc.kill("SIGSTOP");
  }
  // Measure the steady state: block cuts and merges the load made due are finished first.
  p0 = performance.now();
  await t.app.tsdb.compact();
  // And the load's garbage is collected: loading 7 days in two minutes leaves ~150 MiB of garbage in
  // the old generation (192 → 44 MiB after a full GC) that a server ingesting the same data over 7
  // days would long have collected; left in place it roughly doubled the 7-day row's p99 here.
  fullGc();
  const st = t.app.tsdb.stats();
  out(
    `compaction settled in ${((performance.now() - p0) / 1000).toFixed(1)} s: ${st.blocks} blocks, ` +
      `${(st.blockBytes / 2 ** 20).toFixed(0)} MiB on disk (${((st.blockBytes * 8) / st.blockSamples).toFixed(1)} bits/sample incl. rollups), ` +
      `heap ${(process.memoryUsage().heapUsed / 2 ** 20).toFixed(0)} MiB`,
  );
  // And the data the load wrote is on disk: left dirty (hundreds of MiB with the peer's), the
  // kernel's writeback ran during the measured rows, where a server ingesting over 7 days writes
  // a little at a time.
  const s0 = performance.now();
  spawnSync("sync");
  out(`dirty pages written back in ${((performance.now() - s0) / 1000).toFixed(1)} s`);

  const key = await t.clients(p.owner.session).keys.createKey({
    parent: p.projectName,
    displayName: "bench",
    capabilities: ["monitoring.read"],
    requestId: randomUUID(),
  });
  const c = t.clients(key.secret).monitoring;
  const nowS = nowMs / S;
  const only = process.env.BENCH_ONLY;
  const profileTo = process.env.BENCH_CPU_PROFILE;
  const heapProfileTo = process.env.BENCH_HEAP_PROFILE;
  const six = [...SIX_METRICS];
  const queryReq = (i: number, metricIds: string[], rangeS: number, step: number) =>
    create(QueryVMMonitoringRequestSchema, {
      name: p.vms[(i * 7919) % VMS],
      metricIds,
      startTimeUnix: BigInt(nowS - rangeS),
      endTimeUnix: BigInt(nowS),
      stepSeconds: step,
    });
  // Each row is checked once through the typed SDK client (decoded and validated), then measured
  // from a separate client process over loopback HTTP.
  const seven = await c.queryVMMonitoring(queryReq(0, six, DAYS * 86_400, 1800));
  if (seven.series.length < 6 || seven.quality?.partial)
    throw new Error(
      `unexpected response: ${seven.series.map((s) => s.metricId)} ${JSON.stringify(seven.quality?.errors)}`,
    );
  const pages: string[] = [""];
  for (;;) {
    const r = await c.listVMMonitoring({ projectName: p.projectName, pageSize: 50, pageToken: pages.at(-1) });
    if (!r.nextPageToken) break;
    pages.push(r.nextPageToken);
  }
  const auth = { Authorization: `Bearer ${key.secret}`, "Connect-Protocol-Version": "1" };
  const rpc = (method: string, body: unknown, binary = false) => ({
    url: `${t.baseUrl}/svc.monitoring.v1.MonitoringService/${method}`,
    method: "POST",
    headers: { ...auth, "Content-Type": binary ? "application/proto" : "application/json" },
    body,
  });
  // The same six charts as PromQL range queries (metric-ids.ts), sent at once as a dashboard's panels
  // would: to Prometheus, and to svc's Prometheus API (which reads raw samples, not rollups).
  const sixPromql = (i: number) =>
    six.map((id) => metricIds.get(id)!.promql(vmSelector(p.vms[(i * 7919) % VMS]), 1800, 30));
  const endS = Math.floor(nowS / 1800) * 1800;
  const rangeUrl = (base: string, expr: string) =>
    `${base}/api/v1/query_range?${new URLSearchParams({
      query: expr,
      start: String(Math.ceil((nowS - DAYS * 86_400) / 1800) * 1800),
      end: String(endS),
      step: "1800",
    })}`;
  const peerRows = () => [
    ...(prom
      ? [
          {
            name: `Prometheus: the 6 as PromQL range queries, ${DAYS} d @1800 s, at once`,
            n: ITER,
            requests: range(ITER).map((i) => ({
              group: sixPromql(i).map((e) => ({ url: rangeUrl(prom!.base, e), method: "GET", headers: {} })),
            })),
            peer: true,
          },
        ]
      : []),
    {
      name: `svc Prometheus API: the 6 as PromQL range queries, ${DAYS} d @1800 s, at once`,
      n: ITER,
      requests: range(ITER).map((i) => ({
        group: sixPromql(i).map((e) => ({
          url: rangeUrl(`${t.baseUrl}/v1/monitoring/projects/bench/prometheus`, e),
          method: "GET",
          headers: { Authorization: `Bearer ${key.secret}` },
        })),
      })),
    },
  ];
  const json = (m: Parameters<typeof toJsonString>[1], schema = QueryVMMonitoringRequestSchema) =>
    toJsonString(schema, m as never);
  const range = (n: number) => Array.from({ length: Math.min(n, VMS) }, (_, i) => i);
  const rows = [
    {
      // The harness's floor: an HTTP round trip that does no work.
      name: "GET /healthz (floor)",
      n: ITER,
      requests: [{ url: `${t.baseUrl}/healthz`, method: "GET", headers: {} }],
    },
    {
      name: `QueryVMMonitoring ${DAYS} d @1800 s, 6 metrics`,
      n: ITER,
      requests: range(ITER).map((i) => rpc("QueryVMMonitoring", json(queryReq(i, six, DAYS * 86_400, 1800)))),
    },
    {
      name: `QueryVMMonitoring ${DAYS} d @1800 s, 6 metrics (binary)`,
      n: ITER,
      requests: range(ITER).map((i) =>
        rpc(
          "QueryVMMonitoring",
          Buffer.from(
            toBinary(QueryVMMonitoringRequestSchema, queryReq(i, six, DAYS * 86_400, 1800)),
          ).toString("base64"),
          true,
        ),
      ),
    },
    ...peerRows(),
    {
      name: "QueryVMMonitoring 1 h @30 s, 6 metrics",
      n: ITER,
      requests: range(ITER).map((i) => rpc("QueryVMMonitoring", json(queryReq(i, six, 3600, 30)))),
    },
    {
      name: "QueryVMMonitoring 1 h @30 s, cpu only",
      n: ITER,
      requests: range(ITER).map((i) =>
        rpc("QueryVMMonitoring", json(queryReq(i, ["cpu_utilization_pct"], 3600, 30))),
      ),
    },
    {
      name: "ListVMMonitoring page of 50 (metrics)",
      n: ITER,
      requests: pages.map((pageToken) =>
        rpc(
          "ListVMMonitoring",
          json(
            create(ListVMMonitoringRequestSchema, { projectName: p.projectName, pageSize: 50, pageToken }),
            ListVMMonitoringRequestSchema as never,
          ),
        ),
      ),
    },
    {
      name: `export shard (~${Math.round((VMS / 4) * 40).toLocaleString("en")} series)`,
      n: Math.max(20, ITER / 10),
      requests: [0, 1, 2, 3].map((shard) => ({
        url: `${t.baseUrl}/v1/monitoring/projects/bench/export?shard=${shard}`,
        method: "GET",
        headers: { Authorization: `Bearer ${key.secret}` },
      })),
    },
  ].filter((r) => !only || new RegExp(only).test(r.name));
  const exportBody = await (
    await fetch(`${t.baseUrl}/v1/monitoring/projects/bench/export?shard=0`, {
      headers: { Authorization: `Bearer ${key.secret}` },
    })
  ).text();
  const exported = exportBody.split("\n").filter((l) => l && !l.startsWith("#")).length;

  const inspector = profileTo || heapProfileTo ? new Session() : undefined;
  inspector?.connect();
  if (inspector && profileTo) {
    await inspector.post("Profiler.enable");
    await inspector.post("Profiler.setSamplingInterval", { interval: 100 });
    await inspector.post("Profiler.start");
  }
  if (inspector && heapProfileTo) {
    await inspector.post("HeapProfiler.enable");
    await inspector.post("HeapProfiler.startSampling", {
      samplingInterval: 4096,
      includeObjectsCollectedByMajorGC: true,
      // BENCH_HEAP_PROMOTED=1: only what survived young-generation GCs (what fills the old generation).
      includeObjectsCollectedByMinorGC: !process.env.BENCH_HEAP_PROMOTED,
    } as never);
  }
  // How long the server's event loop was held up while the load ran (GC pauses, synchronous work).
  const loopDelay = monitorEventLoopDelay({ resolution: 1 });
  loopDelay.enable();
  // Each request's time inside the server, from Node's "request" event (headers read) to the answer's
  // last byte handed to the socket: what the client sees beyond it is scheduling and transport.
  const serverMs: Span[] = [];
  t.app.server.server.on("request", (_req: unknown, res: import("node:http").ServerResponse) => {
    const start = performance.now();
    const wait0 = runqueueWaitMs();
    res.on("finish", () =>
      serverMs.push({ start, end: performance.now(), waitMs: runqueueWaitMs() - wait0 }),
    );
  });
  // GC pauses of this process while the load ran, to tell how much of the slowest requests they are.
  const gcPauses: Span[] = [];
  const gcObserver = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gcPauses.push({ start: e.startTime, end: e.startTime + e.duration });
  });
  gcObserver.observe({ entryTypes: ["gc"] });
  const threads0 = threadCpuMs();
  calibrationMs(); // once unmeasured, so the figure before the load is of compiled code too
  const calibration0 = calibrationMs();
  // The peer runs during its own row only (svc is idle then); paused otherwise.
  const results = await runLoad(
    rows.map((r) => ({ ...r, warmup: WARMUP, warmupMaxMs: 15_000 })),
    serverMs,
    (row) => prom?.proc.kill(row.peer ? "SIGCONT" : "SIGSTOP"),
  );
  const threads1 = threadCpuMs();
  const calibration1 = calibrationMs();
  loopDelay.disable();
  gcObserver.disconnect();
  if (process.env.BENCH_SPANS)
    writeFileSync(
      process.env.BENCH_SPANS,
      JSON.stringify({ rows: results.map((r) => r.serverMs), gcPauses }),
    );
  const table: string[][] = [];
  for (const r of results) {
    const lat = r.latenciesMs.sort((x, y) => x - y);
    const q = (f: number) => quantile(lat, f).toFixed(2);
    const inServer = r.serverMs.map((s) => s.end - s.start).sort((x, y) => x - y);
    table.push([
      r.name,
      String(r.n),
      q(0.5),
      q(0.9),
      q(0.99),
      lat[lat.length - 1].toFixed(2),
      (r.n / r.seconds).toFixed(0),
      (r.serverCpuMs / r.n).toFixed(2),
      `${quantile(inServer, 0.5).toFixed(2)} / ${quantile(inServer, 0.99).toFixed(2)}`,
      slowestBreakdown(r.serverMs, gcPauses),
      (r.bytes / 1024).toFixed(0),
    ]);
  }
  if (inspector && profileTo) {
    const { profile } = await inspector.post("Profiler.stop");
    writeFileSync(profileTo, JSON.stringify(profile));
    out(`CPU profile of the measured requests written to ${profileTo}`);
  }
  if (inspector && heapProfileTo) {
    const { profile } = await inspector.post("HeapProfiler.stopSampling");
    writeFileSync(heapProfileTo, JSON.stringify(profile));
    out(`sampling heap profile of the measured requests written to ${heapProfileTo}`);
  }
  inspector?.disconnect();
  out(`\n${VMS} VMs, ${DAYS} d of data; shard 0 exported ${exported.toLocaleString("en")} series lines`);
  out(
    `machine speed: a fixed CPU workload took ${calibration0.toFixed(1)} ms before the load and ${calibration1.toFixed(1)} ms after (lower is faster; compare runs by it)`,
  );
  out(
    "| request | n | p50 ms | p90 ms | p99 ms | max ms | req/s | server CPU ms/req | in server p50 / p99 ms | slowest 1% in server: mean ms / GC pause / waiting for a CPU | response KiB |",
  );
  out("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
  for (const r of table) out(`| ${r.join(" | ")} |`);
  if (threads0 && threads1) {
    const main = (threads1.get(process.pid) ?? 0) - (threads0.get(process.pid) ?? 0);
    let others = 0;
    for (const [tid, ms] of threads1) if (tid !== process.pid) others += ms - (threads0.get(tid) ?? 0);
    out(
      `server threads during the load (warm-ups included): main ${main.toFixed(0)} ms CPU, ` +
        `${threads1.size - 1} others (V8's compiler and GC helpers, libuv) ${others.toFixed(0)} ms`,
    );
  }
  out(
    `server event-loop delay during the load: p50 ${(loopDelay.percentile(50) / 1e6).toFixed(2)} ms, ` +
      `p99 ${(loopDelay.percentile(99) / 1e6).toFixed(2)} ms, max ${(loopDelay.max / 1e6).toFixed(2)} ms`,
  );
  const goalRow = table.find((r) => r[0].endsWith("@1800 s, 6 metrics"));
  const p99 = Number(goalRow?.[4]);
  if (goalRow)
    out(`\ngoal QueryVMMonitoring ${DAYS} d p99 ≤ 10 ms: ${p99 <= 10 ? "met" : "NOT met"} (${p99} ms)`);
  const peer = table.find((r) => r[0].startsWith("Prometheus:"));
  if (goalRow && peer)
    out(
      `svc's one QueryVMMonitoring call / Prometheus's six range queries: p50 ${(Number(goalRow[2]) / Number(peer[2])).toFixed(2)}×, ` +
        `p99 ${(Number(goalRow[4]) / Number(peer[4])).toFixed(2)}×`,
    );
} finally {
  if (prom) {
    prom.proc.kill("SIGCONT"); // a stopped process would not act on the SIGTERM
    await stopTarget(prom);
  }
  rmSync(peerDir, { recursive: true, force: true });
  await t.close();
}

/** A full, compacting garbage collection (what --expose-gc's gc() does), without the flag on the command line. */
function fullGc(): void {
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  gc();
  gc();
}

/** Debian's prometheus on PATH, installed when missing (as bench:promql does). */
function prometheusInstalled(): boolean {
  if (spawnSync("prometheus", ["--version"]).status === 0) return true;
  process.stdout.write("installing Debian prometheus …\n");
  spawnSync("flock", ["/tmp/apt.lock", "apt-get", "install", "-y", "-qq", "prometheus"], {
    stdio: "inherit",
  });
  return spawnSync("prometheus", ["--version"]).status === 0;
}

/**
 * A thread's scheduler times from /proc/self/task/<tid>/schedstat, ms: on a CPU, and runnable but
 * waiting for one. `fd` (of the file, kept open) saves an open and close per read.
 */
function schedstat(tid: number, fd?: number): { runMs: number; waitMs: number } {
  const text =
    fd === undefined
      ? readFileSync(`/proc/self/task/${tid}/schedstat`, "utf8")
      : schedBuf.toString("latin1", 0, readSync(fd, schedBuf, 0, schedBuf.length, 0));
  const [run, wait] = text.split(" ");
  return { runMs: Number(run) / 1e6, waitMs: Number(wait) / 1e6 };
}

/** Time (ms) the main thread has spent runnable but waiting for a CPU; NaN off Linux. */
function runqueueWaitMs(): number {
  return mainSchedFd < 0 ? Number.NaN : schedstat(process.pid, mainSchedFd).waitMs;
}

/** CPU time (ms) of each of this process's threads by thread id, or undefined off Linux. */
function threadCpuMs(): Map<number, number> | undefined {
  try {
    const out = new Map<number, number>();
    for (const tid of readdirSync("/proc/self/task")) out.set(Number(tid), schedstat(Number(tid)).runMs);
    return out;
  } catch {
    return undefined;
  }
}

/**
 * The slowest 1% of a row's in-server spans: their mean time, the mean GC pause time inside them
 * (from the process's own GC entries) and the mean time the main thread waited for a CPU in them,
 * which tells whether the tail is collection, contention for the two cores, or work.
 */
function slowestBreakdown(spans: readonly Span[], pauses: readonly Span[]): string {
  const slow = [...spans]
    .sort((a, b) => b.end - b.start - (a.end - a.start))
    .slice(0, Math.ceil(spans.length / 100));
  if (slow.length === 0) return "";
  let ms = 0;
  let gc = 0;
  let wait = 0;
  for (const s of slow) {
    ms += s.end - s.start;
    wait += s.waitMs ?? Number.NaN;
    for (const p of pauses) gc += Math.max(0, Math.min(s.end, p.end) - Math.max(s.start, p.start));
  }
  const f = (x: number) => (x / slow.length).toFixed(2);
  return `${f(ms)} / ${f(gc)} / ${f(wait)}`;
}
