/**
 * Alert evaluation at a provider's scale (issue 33): many small projects, each of 10 VMs with every
 * rule template (today six: CPU, memory %, filesystem %, the filesystem forecast, unexpected stop,
 * telemetry age).
 *
 *   npm run bench:alerts -- --projects 1000                     embedded store, SQLite
 *   npm run bench:alerts -- --projects 3000 --backend remote    VictoriaMetrics (Debian), PostgreSQL
 *   flags: --replicas R (evaluators sharing the shards, default 1), --cycles C (5), --warm W (2),
 *          --minutes M (data per series, default 60), --profile <file.cpuprofile>
 *
 * Data per VM: CPU utilization, memory used and total, a filesystem's used bytes and size (mountpoint
 * "/", ext4) and the last-observation time, every 30 s over the last M minutes, each VM on its own
 * offset within the 30 s. Embedded: written straight into the TSDB appender (as the other alert bench
 * does); remote: remote-written to VictoriaMetrics. Some VMs breach (CPU from staggered times, memory,
 * a full filesystem), some stop reporting (telemetry age) and some stop unexpectedly (a state event),
 * so cycles make transitions. Projects, VMs and rules are inserted into the database directly (an
 * applied revision per rule), as 10,000 projects through the RPCs would take longer than the bench.
 *
 * Measured: each evaluator's `runCycle` at successive 30 s steps after W warm-up cycles; wall time,
 * process CPU (process.cpuUsage: all of svc's threads) and the engine's CPU (/proc) per cycle, and the
 * cycle's own split (CycleReport: store reads, database, evaluation). With R replicas, R evaluators
 * over the same database and store each hold their share of the shards (cluster/shards.ts) and run
 * their cycles one after another, so each replica's figure is its own work and not the contention of
 * R processes on this shared 2-core machine; the aggregate scaling is the projects per second of the
 * slowest replica's cycle against one replica's.
 */

import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { performance } from "node:perf_hooks";
import pino from "pino";
import { pushRemoteWrite } from "../../packages/remotewrite/src/index.ts";
import {
  type CycleReport,
  createEvaluator,
  type Evaluator,
} from "../../packages/server/src/alerts/evaluator.ts";
import { resolveAlertOptions } from "../../packages/server/src/alerts/options.ts";
import { conditionKey, type RuleSpec } from "../../packages/server/src/alerts/spec.ts";
import { ruleTemplates } from "../../packages/server/src/alerts/templates.ts";
import { createShardLeases } from "../../packages/server/src/cluster/shards.ts";
import type { Db } from "../../packages/server/src/db/database.ts";
import { type Labels, labelsFromRecord } from "../../packages/server/src/storage/interface.ts";
import { testDialects } from "../../packages/server/testing/dialects.ts";
import { type RunningEngine, startEngine } from "../../packages/server/testing/engines.ts";
import { startTestApp, type TestApp } from "../../packages/server/testing/harness.ts";
import { calibrationMs, loadAverageLine, profileSummary, quantile } from "../common/measure.ts";
import { cpuSeconds } from "../ingest/proc.ts";

const arg = (name: string, dflt: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : dflt;
};
const PROJECTS = Number(arg("projects", "1000"));
const BACKEND = arg("backend", "embedded");
const REPLICAS = Number(arg("replicas", "1"));
const CYCLES = Number(arg("cycles", "5"));
const WARM = Number(arg("warm", "2"));
const MINUTES = Number(arg("minutes", "60"));
const PROFILE = arg("profile", "");
const VMS_PER_PROJECT = 10;
const STEP_MS = 30_000;
const STEPS = (MINUTES * 60_000) / STEP_MS + 1;
const GIB = 2 ** 30;
const out = (s: string) => process.stdout.write(`${s}\n`);
for (const [k, v] of Object.entries({ PROJECTS, REPLICAS, CYCLES, WARM, MINUTES }))
  if (!Number.isSafeInteger(v) || v < (k === "WARM" ? 0 : 1))
    throw new Error(`--${k.toLowerCase()} must be a positive integer`);
if (BACKEND !== "embedded" && BACKEND !== "remote") throw new Error("--backend must be embedded or remote");

/** The 6 stored series of a VM, in the order `sample` fills them. */
const SERIES: readonly [string, Record<string, string>][] = [
  ["svc_vm_cpu_utilization_pct", {}],
  ["svc_vm_memory_used_bytes", {}],
  ["svc_vm_memory_total_bytes", {}],
  ["svc_vm_filesystem_used_bytes", { mountpoint: "/", fstype: "ext4", device: "vda1" }],
  ["svc_vm_filesystem_size_bytes", { mountpoint: "/", fstype: "ext4", device: "vda1" }],
  ["svc_vm_last_observation_timestamp_seconds", {}],
];

/** Global VM index i, step k (m minutes before the data's end): the workload's shape. */
function sample(i: number, k: number, tsMs: number, v: Float64Array): void {
  const m = (STEPS - 1 - k) * 0.5;
  v[0] = i % 10 === 1 && m < 3 + (Math.floor(i / 10) % 12) ? 95 : 20 + ((i + k) % 30);
  v[1] =
    i % 20 === 3 && m < 5 + (Math.floor(i / 20) % 20) ? 3.95 * GIB : 1.5 * GIB + ((k * 7 + i) % 500) * 1e6;
  v[2] = 4 * GIB;
  v[3] = i % 25 === 4 ? 19.5 * GIB : 8 * GIB;
  v[4] = 20 * GIB;
  v[5] = tsMs / 1000;
}
/** VMs that stop reporting m minutes before the end (telemetry age; no data for their other rules). */
const silentFromMin = (i: number) => (i % 40 === 13 ? 6 + (Math.floor(i / 40) % 8) : -1);

interface Setup {
  readonly t: TestApp;
  readonly engine?: RunningEngine;
  readonly dataEnd: number;
}

async function seed(db: Db, dataEnd: number): Promise<void> {
  const created = dataEnd - 2 * 86_400_000;
  const specs: RuleSpec[] = ruleTemplates.map((x) => ({ ...x.spec, repeatIntervalSeconds: 0 }));
  const chunk = 200;
  for (let p0 = 0; p0 < PROJECTS; p0 += chunk) {
    const ids = Array.from(
      { length: Math.min(chunk, PROJECTS - p0) },
      (_, j) => `p${String(p0 + j).padStart(6, "0")}`,
    );
    await db.transaction().execute(async (tx) => {
      await tx
        .insertInto("projects")
        .values(ids.map((id) => ({ id, display_name: id, create_time: created })))
        .execute();
      for (const id of ids)
        await tx
          .insertInto("vms")
          .values(
            Array.from({ length: VMS_PER_PROJECT }, (_, v) => ({
              project_id: id,
              vm_id: `vm-${v}`,
              location: "dc-1",
              display_name: `vm-${v}`,
              state: "RUNNING",
              distribution: "debian-12",
              monitoring_level: "EXPANDED",
              vcpus: 2,
              memory_bytes: 4 * GIB,
              create_time: created,
              delete_time: null,
            })),
          )
          .execute();
      const rules = ids.flatMap((projectId) => specs.map((spec) => ({ projectId, spec, id: randomUUID() })));
      await tx
        .insertInto("alert_rules")
        .values(
          rules.map((r, j) => ({
            id: r.id,
            project_id: r.projectId,
            latest_version: 1,
            applied_version: 1,
            sync_status: "APPLIED" as const,
            sync_reason: "",
            create_time: created + j,
            update_time: created,
            delete_time: null,
            last_eval_time: null,
            last_eval_error: "",
          })),
        )
        .execute();
      await tx
        .insertInto("alert_rule_revisions")
        .values(
          rules.map((r) => ({
            rule_id: r.id,
            version: 1,
            project_id: r.projectId,
            spec: JSON.stringify(r.spec),
            condition_key: conditionKey(r.spec),
            actor: "bench",
            request_id: randomUUID(),
            create_time: created,
          })),
        )
        .execute();
      // An unexpected stop of every 50th VM during the measured cycles.
      const stops = ids.flatMap((projectId, j) =>
        Array.from({ length: VMS_PER_PROJECT }, (_, v) => (p0 + j) * VMS_PER_PROJECT + v)
          .filter((i) => i % 50 === 7)
          .map((i) => ({
            id: randomUUID(),
            project_id: projectId,
            vm_id: `vm-${i % VMS_PER_PROJECT}`,
            state: "STOPPED",
            stop_reason: "UNEXPECTED",
            time: dataEnd - ((i / 50) % (CYCLES + WARM)) * STEP_MS,
          })),
      );
      if (stops.length > 0) await tx.insertInto("vm_state_events").values(stops).execute();
    });
  }
}

async function load(s: Setup): Promise<number> {
  const dataStart = s.dataEnd - (STEPS - 1) * STEP_MS;
  const values = new Float64Array(SERIES.length);
  const vms = PROJECTS * VMS_PER_PROJECT;
  const labels: Labels[][] = [];
  for (let i = 0; i < vms; i++) {
    const projectId = `p${String(Math.floor(i / VMS_PER_PROJECT)).padStart(6, "0")}`;
    const vmId = `vm-${i % VMS_PER_PROJECT}`;
    const base = {
      project_id: projectId,
      vm: `projects/${projectId}/locations/dc-1/vms/${vmId}`,
      vm_id: vmId,
      location: "dc-1",
      source: "hypervisor",
    };
    labels.push(SERIES.map(([name, extra]) => labelsFromRecord({ ...base, ...extra, __name__: name })));
  }
  const offsetMs = (i: number) => (i * 7919) % STEP_MS;
  let n = 0;
  if (!s.engine) {
    for (let k = 0; k < STEPS; k++) {
      const app = s.t.app.tsdb.appender();
      const m = (STEPS - 1 - k) * 0.5;
      for (let i = 0; i < vms; i++) {
        const silent = silentFromMin(i);
        if (silent >= 0 && m < silent) continue;
        const ts = dataStart + k * STEP_MS - offsetMs(i);
        sample(i, k, ts, values);
        for (let j = 0; j < SERIES.length; j++)
          if (!app.append(labels[i][j], ts, values[j])) throw new Error(`the TSDB refused a sample at ${ts}`);
        n += SERIES.length;
      }
      await app.commit();
    }
    await s.t.app.tsdb.compact();
    return n;
  }
  // Remote: VMs in batches of 200, every step of each, a few writes in flight.
  const url = s.engine.remoteWriteUrl;
  const batches: Promise<unknown>[] = [];
  for (let i0 = 0; i0 < vms; i0 += 200) {
    const timeseries = [];
    for (let i = i0; i < Math.min(vms, i0 + 200); i++) {
      const per = SERIES.map(() => [] as { value: number; timestampMs: number }[]);
      for (let k = 0; k < STEPS; k++) {
        const silent = silentFromMin(i);
        if (silent >= 0 && (STEPS - 1 - k) * 0.5 < silent) continue;
        const ts = dataStart + k * STEP_MS - offsetMs(i);
        sample(i, k, ts, values);
        for (let j = 0; j < SERIES.length; j++) per[j].push({ value: values[j], timestampMs: ts });
        n += SERIES.length;
      }
      for (let j = 0; j < SERIES.length; j++)
        timeseries.push({
          labels: labels[i][j].map((l) => ({ name: l.name, value: l.value })),
          samples: per[j],
        });
    }
    batches.push(pushRemoteWrite(url, "unused", { timeseries }));
    if (batches.length >= 4) await batches.shift();
  }
  await Promise.all(batches);
  await s.engine.flush();
  return n;
}

interface Measured {
  wall: number[];
  cpu: number[];
  engineCpu: number[];
  reports: CycleReport[];
}

let profiled = false;

async function measure(
  evaluators: readonly Evaluator[],
  dataEnd: number,
  engine: RunningEngine | undefined,
  run: (ev: Evaluator, atMs: number) => Promise<CycleReport | undefined>,
): Promise<Measured[]> {
  const at = (k: number) => dataEnd - (CYCLES - 1 - k) * STEP_MS;
  const res: Measured[] = evaluators.map(() => ({ wall: [], cpu: [], engineCpu: [], reports: [] }));
  // The profile is of the first phase (one process).
  const inspector = PROFILE && !profiled ? new Session() : undefined;
  profiled = true;
  for (let k = -WARM; k < CYCLES; k++) {
    if (k === 0 && inspector) {
      inspector.connect();
      await inspector.post("Profiler.enable");
      await inspector.post("Profiler.setSamplingInterval", { interval: 500 });
      await inspector.post("Profiler.start");
    }
    for (const [e, ev] of evaluators.entries()) {
      const e0 = engine?.pid ? cpuSeconds(engine.pid) : 0;
      const s0 = await statementCount();
      const d0 = await statementCount("_sum");
      const c0 = process.cpuUsage();
      const w0 = performance.now();
      const r = await run(ev, at(k));
      const wall = performance.now() - w0;
      const c = process.cpuUsage(c0);
      const statements = (await statementCount()) - s0;
      const statementMs = ((await statementCount("_sum")) - d0) * 1000;
      const cpu = (c.user + c.system) / 1000;
      const ecpu = engine?.pid ? (cpuSeconds(engine.pid) - e0) * 1000 : 0;
      if (!r) throw new Error(`replica ${e} held no shard at cycle ${k}`);
      out(
        `  ${k < 0 ? "warm-up" : "cycle"} ${k} replica ${e}: ${wall.toFixed(0)} ms, CPU ${cpu.toFixed(0)} ms` +
          (engine ? ` (engine ${ecpu.toFixed(0)} ms)` : "") +
          `; ${r.projects} projects, ${r.rules} rules, ${r.instances} instances, ${r.transitions} transitions, ` +
          `${r.errors} read errors; store reads ${r.readMs.toFixed(0)} ms, database ${r.dbMs.toFixed(0)} ms; ` +
          `${statements} SQL statements, ${statementMs.toFixed(0)} ms in them`,
      );
      if (k < 0) continue;
      res[e].wall.push(wall);
      res[e].cpu.push(cpu);
      res[e].engineCpu.push(ecpu);
      res[e].reports.push(r);
    }
  }
  if (inspector) {
    const { profile } = await inspector.post("Profiler.stop");
    writeFileSync(PROFILE, JSON.stringify(profile));
    out(`CPU profile of the measured cycles written to ${PROFILE}`);
    for (const l of profileSummary(profile as never)) out(l);
    inspector.disconnect();
  }
  return res;
}

/** The app's control-plane SQL statements so far (svc_db_statement_duration_seconds' count), or NaN. */
let statementRegistry: TestApp["app"]["registry"] | undefined;
async function statementCount(suffix = "_count"): Promise<number> {
  const m = statementRegistry?.getSingleMetric("svc_db_statement_duration_seconds");
  if (!m) return Number.NaN;
  const v = ((await m.get()).values as { metricName?: string; value: number }[]).find(
    (x) => x.metricName === `svc_db_statement_duration_seconds${suffix}`,
  );
  return v ? v.value : Number.NaN;
}

export async function providerBench(): Promise<void> {
  out(
    `bench:alerts --projects ${PROJECTS}: ${PROJECTS * VMS_PER_PROJECT} VMs, ${PROJECTS * ruleTemplates.length} rules, ` +
      `backend ${BACKEND}, ${REPLICAS} replica(s), ${MINUTES} min of 30 s data, ${WARM} warm-up + ${CYCLES} measured cycles`,
  );
  out(loadAverageLine());
  calibrationMs();
  const calibration0 = calibrationMs();
  const [sqlite, postgres] = await testDialects();
  let engine: RunningEngine | undefined;
  let t: TestApp | undefined;
  try {
    // Remote: the engine keeps real time (it drops samples outside its retention), so the data ends now.
    const dataEnd = Math.floor(Date.now() / STEP_MS) * STEP_MS;
    if (BACKEND === "remote") {
      if (postgres.skip) throw new Error(`--backend remote runs on PostgreSQL: ${postgres.skip}`);
      engine = await startEngine("victoria-metrics");
      t = await startTestApp(postgres.dialect, {
        metricsBackend: "remote",
        remoteMetrics: { remoteWriteUrl: engine.remoteWriteUrl, queryUrl: engine.queryUrl, headers: {} },
      });
    } else t = await startTestApp(sqlite.dialect);
    t.clock.ms = dataEnd;
    const db = t.app.db.db;
    statementRegistry = t.app.registry;
    let p0 = performance.now();
    await seed(db, dataEnd);
    out(`seeded ${PROJECTS} projects in ${((performance.now() - p0) / 1000).toFixed(1)} s`);
    p0 = performance.now();
    const samples = await load({ t, engine, dataEnd });
    out(
      `loaded ${samples.toLocaleString("en")} samples in ${((performance.now() - p0) / 1000).toFixed(1)} s`,
    );
    global.gc?.();
    const options = resolveAlertOptions();
    const log = pino({ level: "warn" });
    // One process (the app's evaluator, every project), then with --replicas R, R evaluators sharing
    // the shards over the same cycle times again (the state the single phase moved on steps back, so
    // they make about as many transitions and write the same kind of rows).
    const single = await measure([t.app.evaluator], dataEnd, engine, (ev, at) => ev.runCycle(at));
    let sharded: Measured[] | undefined;
    if (REPLICAS > 1) {
      const evaluators = Array.from({ length: REPLICAS }, (_, r) =>
        createEvaluator({
          db,
          metrics: t!.app.metrics,
          now: t!.clock.now,
          log,
          options,
          shards: createShardLeases({
            db,
            holder: `bench-replica-${r}`,
            intervalMs: options.evaluationIntervalMs,
          }),
        }),
      );
      // Replicas join one after another: the first takes every shard, and hands the others theirs.
      for (let round = 0; round < 2; round++)
        for (const ev of evaluators) await ev.tick(dataEnd - 20 * STEP_MS);
      sharded = await measure(evaluators, dataEnd, engine, (ev, at) => ev.tick(at));
    }
    const rss = process.memoryUsage().rss;
    const calibration1 = calibrationMs();

    out("");
    out(loadAverageLine());
    out(
      `machine speed: a fixed CPU workload took ${calibration0.toFixed(1)} ms before and ${calibration1.toFixed(1)} ms after (lower is faster)`,
    );
    out(
      `| replicas | replica | projects | rules | instances | cycle p50 ms | max ms | CPU p50 ms | store reads | database | evaluation |${engine ? " engine CPU p50 ms |" : ""}`,
    );
    out(`| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |${engine ? " --- |" : ""}`);
    const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
    const worst = (ms: Measured[]) => ({
      wall: Math.max(...ms.map((m) => quantile(sorted(m.wall), 0.5))),
      cpu: Math.max(...ms.map((m) => quantile(sorted(m.cpu), 0.5))),
      projects: Math.max(...ms.map((m) => m.reports.at(-1)?.projects ?? 0)),
    });
    for (const ms of [single, sharded]) {
      if (!ms) continue;
      for (const [e, m] of ms.entries()) {
        const r = m.reports.at(-1)!;
        const sum = (f: (x: CycleReport) => number) => m.reports.reduce((a, x) => a + f(x), 0);
        const total = sum((x) => x.durationMs);
        const read = sum((x) => x.readMs);
        const dbMs = sum((x) => x.dbMs);
        const pct = (x: number) => `${((100 * x) / total).toFixed(0)}%`;
        out(
          `| ${ms.length} | ${e} | ${r.projects} | ${r.rules} | ${r.instances} | ${quantile(sorted(m.wall), 0.5).toFixed(0)} | ` +
            `${Math.max(...m.wall).toFixed(0)} | ${quantile(sorted(m.cpu), 0.5).toFixed(0)} | ${pct(read)} | ${pct(dbMs)} | ` +
            `${pct(total - read - dbMs)} |` +
            (engine ? ` ${quantile(sorted(m.engineCpu), 0.5).toFixed(0)} |` : ""),
        );
      }
    }
    out("(store reads / database / evaluation: shares of the cycles' wall time, as CycleReport splits it)");
    out(
      `RSS ${(rss / 2 ** 20).toFixed(0)} MB after the cycles (svc's process, the bench's own data included)`,
    );
    const one = worst(single);
    const per10k = (ms: number, projects: number) => ((ms / projects) * 10_000).toFixed(0);
    if (BACKEND === "embedded") {
      const verdict =
        PROJECTS >= 10_000 ? (one.wall <= 5000 ? "met" : "NOT met") : "not measured at this size";
      out(
        `goal: embedded, one process, 10,000 projects ≤ 5 s per cycle: ${verdict} (p50 ${one.wall.toFixed(0)} ms, CPU ` +
          `${one.cpu.toFixed(0)} ms for ${PROJECTS} projects; at this rate ${per10k(one.wall, PROJECTS)} ms wall, ` +
          `${per10k(one.cpu, PROJECTS)} ms CPU per 10,000)`,
      );
    }
    if (BACKEND === "remote") {
      const w = sharded ? worst(sharded) : one;
      const verdict =
        PROJECTS >= 30_000 && REPLICAS >= 3
          ? w.wall <= 15_000
            ? "met"
            : "NOT met"
          : "not measured at this size";
      out(
        `goal: remote, 3 replicas, 30,000 projects ≤ 15 s per cycle per shard: ${verdict} (slowest of ${REPLICAS} ` +
          `replica(s): p50 ${w.wall.toFixed(0)} ms, CPU ${w.cpu.toFixed(0)} ms for ${w.projects} projects; at this rate ` +
          `${per10k(w.wall, w.projects)} ms wall, ${per10k(w.cpu, w.projects)} ms CPU per 10,000 projects per replica)`,
      );
    }
    if (sharded) {
      const w = worst(sharded);
      out(
        `goal: aggregate scaling ≥ 2.5× from 1 to 3 replicas: ${REPLICAS >= 3 ? (one.wall / w.wall >= 2.5 ? "met" : "NOT met") : "not measured with 3"} ` +
          `(one process's cycle / the slowest of ${REPLICAS} replicas': wall ${(one.wall / w.wall).toFixed(2)}×, ` +
          `CPU ${(one.cpu / w.cpu).toFixed(2)}×; the replicas ran one after another on this shared machine)`,
      );
    }
    out(
      `goal: memory ≤ 1 GB per 10,000 projects: ${PROJECTS >= 10_000 ? ((rss / PROJECTS) * 10_000 <= 2 ** 30 ? "met" : "NOT met") : "not measured at this size"} ` +
        `(RSS ${(rss / 2 ** 20).toFixed(0)} MB for ${PROJECTS} projects${BACKEND === "embedded" ? ", the embedded store's data included" : ""})`,
    );
  } finally {
    await t?.close();
    await engine?.stop();
  }
}
