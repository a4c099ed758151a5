/**
 * `bench:ingest --backend remote`: svc in front of VictoriaMetrics against VictoriaMetrics alone, in one
 * run, on the same workload. Two VictoriaMetrics processes with the flags docs/deploy.md gives (via
 * testing/engines.ts), each with its own empty data directory: "a" behind svc (SVC_METRICS_BACKEND=remote,
 * which validates, derives and forwards), "b" written straight to. Separate processes, not one with two
 * directories: each engine's CPU is then its own in /proc, and neither's background merges land on the
 * other's figure. Each 30 s step of the workload goes to both in turn, the order alternating step by
 * step, so both arms see the same machine load; CPU (utime + stime of svc and of each engine) is read at
 * the edges of equal blocks of steps, and the ratio is given over the whole run and as the median of the
 * blocks' ratios (a noisy neighbour spoils a block, not the figure).
 *
 * A third engine, "c", gets what svc forwards without svc: the same series with the labels svc adds
 * (project_id, location, vm_id, source) and the three series svc derives per VM and step, encoded by
 * the bench before the run. c ÷ b is the floor of the ratio whatever svc's own process costs: the
 * engine's work for svc's labels and derived samples (docs/performance.md, issue 31).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeRemoteWriteBody, encodeRemoteWriteBody, type TimeSeries } from "@svc/remotewrite";
import { type RunningEngine, startEngine } from "../../packages/server/testing/engines.ts";
import { loadAverageLine, median, waitForIdle } from "../common/measure.ts";
import { cpuSeconds, freePort, rssBytes } from "./proc.ts";
import { type Running, startTarget, stopTarget, type TargetSpec, targets } from "./targets.ts";
import { type SendFailures, sendStep, type Workload } from "./workload.ts";

/** The goal of issue 31: (svc + engine a) ÷ engine b at most this (issue 18's was 1.25). */
const GOAL_RATIO = 1.5;

/** Derived series svc writes per VM and source (ingest/derive.ts). */
const DERIVED = [
  "svc_vm_cpu_utilization_pct",
  "svc_vm_memory_used_bytes",
  "svc_vm_last_observation_timestamp_seconds",
];

/**
 * The workload's bodies as svc forwards them: each series with svc's labels, sorted by name, and per
 * VM of a body the three derived series at the VM's newest sample time (their values do not matter
 * to the engine's CPU; their labels and count do).
 */
function asSvcForwards(w: Workload): Uint8Array[][] {
  const byName = (a: { name: string }, b: { name: string }) => (a.name < b.name ? -1 : 1);
  return w.steps.map((step) =>
    step.map((body) => {
      const out: TimeSeries[] = [];
      const newest = new Map<string, number>();
      const svcLabels = (vm: string) => {
        const [, project, , location, , id] = vm.split("/");
        return [
          { name: "location", value: location },
          { name: "project_id", value: project },
          { name: "source", value: "hypervisor" },
          { name: "vm_id", value: id },
        ];
      };
      for (const ts of decodeRemoteWriteBody(body).timeseries) {
        const vm = ts.labels.find((l) => l.name === "vm")!.value;
        out.push({ labels: [...ts.labels, ...svcLabels(vm)].sort(byName), samples: ts.samples });
        const t = ts.samples[ts.samples.length - 1].timestampMs;
        newest.set(vm, Math.max(t, newest.get(vm) ?? t));
      }
      for (const [vm, t] of newest)
        for (const name of DERIVED)
          out.push({
            labels: [{ name: "__name__", value: name }, { name: "vm", value: vm }, ...svcLabels(vm)].sort(
              byName,
            ),
            samples: [{ value: t / 1000, timestampMs: t }],
          });
      return encodeRemoteWriteBody({ timeseries: out, metadata: [] });
    }),
  );
}

/** svc's target (bench/ingest/targets.ts) with the remote backend pointing at `engine`. */
function svcInFrontOf(engine: RunningEngine): TargetSpec {
  const svc = targets.find((t) => t.name === "svc")!;
  return {
    ...svc,
    name: "svc (remote)",
    start(dir, port) {
      const s = svc.start(dir, port);
      return {
        ...s,
        env: {
          ...s.env,
          SVC_METRICS_BACKEND: "remote",
          SVC_REMOTE_WRITE_URL: engine.remoteWriteUrl,
          SVC_REMOTE_QUERY_URL: engine.queryUrl,
        },
      };
    },
  };
}

/** Samples the engine stored from remote write so far (its own counter). */
async function rowsInserted(engine: RunningEngine): Promise<number> {
  const text = await (await fetch(`${engine.queryUrl}/metrics`)).text();
  const m = /^vm_rows_inserted_total\{type="promremotewrite"\} (\S+)$/m.exec(text);
  return m ? Number(m[1]) : Number.NaN;
}

/** CPU seconds of the three processes, in one read. */
interface Cpu {
  svc: number;
  behind: number;
  alone: number;
  /** Engine c: what svc forwards, sent by the bench. */
  floor: number;
}

export async function compareRemote(w: Workload, o: { concurrency: number; quick: boolean }): Promise<void> {
  const blocks = Math.min(o.quick ? 8 : 12, w.steps.length);
  const engines: RunningEngine[] = [];
  const dir = mkdtempSync(join(tmpdir(), "svc-bench-remote-"));
  let svc: Running | undefined;
  try {
    const behind = await startEngine("victoria-metrics");
    engines.push(behind);
    const alone = await startEngine("victoria-metrics");
    engines.push(alone);
    const floorEngine = await startEngine("victoria-metrics");
    engines.push(floorEngine);
    const forwarded = asSvcForwards(w);
    const spec = svcInFrontOf(behind);
    svc = (await startTarget(spec, dir, await freePort())).running;
    await spec.prepare?.(svc.base, w);
    const svcPid = svc.proc.pid!;
    const cpu = (): Cpu => ({
      svc: cpuSeconds(svcPid),
      behind: cpuSeconds(behind.pid!),
      alone: cpuSeconds(alone.pid!),
      floor: cpuSeconds(floorEngine.pid!),
    });
    console.log(`remote: before the ingest, ${loadAverageLine()}`);
    const rss0 = rssBytes(svcPid);
    const viaSvc = { url: svc.base + spec.write, token: spec.token, seconds: 0 };
    const direct = { url: alone.remoteWriteUrl, token: "unused", seconds: 0 };
    const floorArm = { url: floorEngine.remoteWriteUrl, token: "unused", seconds: 0 };
    const failed = {
      svc: { count: 0, first: "" },
      alone: { count: 0, first: "" },
      floor: { count: 0, first: "" },
    };
    const edges: Cpu[] = [cpu()];
    const send = async (arm: typeof viaSvc, step: readonly Uint8Array[], f: SendFailures) => {
      const t0 = performance.now();
      await sendStep(arm.url, arm.token, step, o.concurrency, f);
      arm.seconds += (performance.now() - t0) / 1000;
    };
    let nextEdge = 1;
    for (let s = 0; s < w.steps.length; s++) {
      // Rotate which arm goes first, so none always runs right after another's burst.
      const arms = [
        () => send(viaSvc, w.steps[s], failed.svc),
        () => send(direct, w.steps[s], failed.alone),
        () => send(floorArm, forwarded[s], failed.floor),
      ];
      for (let k = 0; k < arms.length; k++) await arms[(s + k) % arms.length]();
      if (s + 1 === Math.round((nextEdge * w.steps.length) / blocks) && nextEdge < blocks) {
        edges.push(cpu());
        nextEdge++;
      }
    }
    // What the engines still do for this ingest (flushing in-memory parts, merges) counts, in the last block.
    await Promise.all([behind.flush(), alone.flush(), floorEngine.flush()]);
    await waitForIdle(
      () => {
        const c = cpu();
        return c.svc + c.behind + c.alone + c.floor;
      },
      { intervalMs: 1000, idleCpuS: 0.03, maxMs: 30_000 },
    );
    edges.push(cpu());
    const svcRss = rssBytes(svcPid) - rss0;
    console.log(`remote: after the ingest, ${loadAverageLine()}`);
    const [rowsBehind, rowsAlone, rowsFloor] = await Promise.all([
      rowsInserted(behind),
      rowsInserted(alone),
      rowsInserted(floorEngine),
    ]);
    report(w, edges, viaSvc.seconds, direct.seconds, rowsBehind, rowsAlone, rowsFloor, svcRss);
    for (const [arm, f] of Object.entries(failed))
      if (f.count > 0) console.log(`note: ${arm}: ${f.count} requests failed, first: ${f.first}`);
  } finally {
    if (svc) await stopTarget(svc);
    for (const e of engines) await e.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

function report(
  w: Workload,
  edges: readonly Cpu[],
  svcSeconds: number,
  aloneSeconds: number,
  rowsBehind: number,
  rowsAlone: number,
  rowsFloor: number,
  svcRss: number,
): void {
  const first = edges[0];
  const last = edges[edges.length - 1];
  const million = w.samples / 1e6;
  const perM = (k: keyof Cpu) => (last[k] - first[k]) / million;
  const withSvc = perM("svc") + perM("behind");
  const ratio = withSvc / perM("alone");
  // Per block: (svc + engine a) ÷ engine b over the same steps.
  const blockRatios: number[] = [];
  const floorRatios: number[] = [];
  for (let i = 1; i < edges.length; i++) {
    const d = (k: keyof Cpu) => edges[i][k] - edges[i - 1][k];
    blockRatios.push((d("svc") + d("behind")) / d("alone"));
    floorRatios.push(d("floor") / d("alone"));
  }
  const blockMedian = median(blockRatios);
  const f = (x: number, digits = 2) => x.toLocaleString("en-US", { maximumFractionDigits: digits });
  const rows: [string, string, string, string][] = [
    ["figure", "svc → VictoriaMetrics a", "VictoriaMetrics b alone", "a ÷ b"],
    [
      "samples/s sent (each arm's own sending time)",
      f(w.samples / svcSeconds, 0),
      f(w.samples / aloneSeconds, 0),
      (aloneSeconds / svcSeconds).toFixed(2),
    ],
    ["CPU s per 1M samples: svc", f(perM("svc")), "", ""],
    [
      "CPU s per 1M samples: engine",
      f(perM("behind")),
      f(perM("alone")),
      (perM("behind") / perM("alone")).toFixed(2),
    ],
    ["CPU s per 1M samples: svc + engine", f(withSvc), f(perM("alone")), ratio.toFixed(2)],
    [
      "engine c (svc's labels and derived series, no svc): CPU s per 1M",
      "",
      f(perM("floor")),
      (perM("floor") / perM("alone")).toFixed(2),
    ],
    [
      "samples the engine stored (its vm_rows_inserted_total)",
      f(rowsBehind, 0),
      f(rowsAlone, 0),
      (rowsBehind / rowsAlone).toFixed(2),
    ],
    ["samples engine c stored", "", f(rowsFloor, 0), (rowsFloor / rowsAlone).toFixed(2)],
    ["svc RSS growth per active series (bytes)", f(svcRss / w.activeSeries, 0), "", ""],
  ];
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  for (const r of rows)
    console.log(r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  "));
  const sorted = [...blockRatios].sort((a, b) => a - b);
  console.log(
    `(svc + engine a) ÷ engine b per block of ${Math.round(w.steps.length / blockRatios.length)} steps: median ${blockMedian.toFixed(2)}, ` +
      `range ${sorted[0].toFixed(2)}–${sorted[sorted.length - 1].toFixed(2)} (${blockRatios.map((r) => r.toFixed(2)).join(" ")})`,
  );
  const floorMedian = median(floorRatios);
  console.log(
    `goal (issue 31): (svc + engine a) ÷ engine b ≤ ${GOAL_RATIO}: ${blockMedian <= GOAL_RATIO ? "met" : "NOT met"} ` +
      `(${blockMedian.toFixed(2)} by the median of blocks, ${ratio.toFixed(2)} over the whole run; ` +
      `svc's own process ${((perM("svc") / perM("alone")) * 100).toFixed(0)} % of engine b, engine a ${((perM("behind") / perM("alone") - 1) * 100).toFixed(0)} % more than b)`,
  );
  console.log(
    `floor: engine c ÷ engine b ${(perM("floor") / perM("alone")).toFixed(2)} over the run, median of blocks ${floorMedian.toFixed(2)}: ` +
      "what the engine alone spends on svc's labels and derived series, before svc's own process counts",
  );
  console.log(
    "note: CPU = utime+stime from /proc/<pid>/stat of svc and of each engine over the ingest, the engines' flush and settling included; " +
      "engine a stores what svc derives per VM (CPU utilization, memory used, last observation) and svc's VM labels besides the samples sent. " +
      "Both engines run with docs/deploy.md's flags (-dedup.minScrapeInterval=1ms, -search.latencyOffset=0s).",
  );
}
