import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pushRemoteWrite } from "@svc/remotewrite";
import type { Logger } from "pino";
import type { Db } from "../db/database.ts";
import { vmName } from "../inventory/names.ts";
import { recordStateEvent } from "../inventory/vms.ts";
import {
  type CounterState,
  createSimulator,
  type ScenarioEvent,
  type Simulator,
  type SimVm,
} from "./simulator/index.ts";

/** The demo project's id (demo.ts creates it; the collector writes its hot VM). */
export const DEMO_PROJECT = "demo";

export interface DemoCollectorOptions {
  readonly db: Db;
  readonly baseUrl: string;
  readonly collectorToken: string;
  readonly dataDir: string;
  readonly log: Logger;
  readonly now?: () => number;
  /** History generated at the first start, ms. Default 24 h. */
  readonly backfillMs?: number;
  /** Sampling interval, ms. Default 30 s. */
  readonly intervalMs?: number;
  /** VMs another collector reports for (SVC_LIBVIRT_URI's real domains): not simulated. */
  readonly excludeVmIds?: ReadonlySet<string>;
  /** Progress lines during the backfill ("backfill 40% …"), and the hot VM's schedule after it. */
  readonly onProgress?: (line: string) => void;
}

interface SimState {
  /** First start: scenario times are anchored here so they stay put across restarts. */
  readonly anchorMs: number;
  /** Newest step already sent. */
  watermarkMs: number;
  /** The VMs' counters at the watermark: a restart continues them (a drop would read as a reset, and
   * rate() would count the whole counter as one interval's traffic). */
  counters?: Record<string, CounterState>;
}

const HOUR = 3_600_000;
const MINUTE = 60_000;

/**
 * The demo VM that misbehaves on schedule, so that a CPU rule (`cpu_utilization_pct > 90` sustained
 * 300 s) opens an incident a few minutes after `npm start` and again every half hour.
 */
export const HOT_VM = { projectId: DEMO_PROJECT, vmId: "web-2" } as const;

/**
 * When the hot VM runs hot: episodes of `durationMs` every `periodMs`, the first `firstAfterMs` after
 * the live start, on the same grid back through the backfilled history, up to `aheadMs` after the
 * live start (a process that runs longer sees no further episodes until it is restarted).
 */
export const HOT_SCHEDULE = {
  firstAfterMs: MINUTE,
  periodMs: 30 * MINUTE,
  durationMs: 8 * MINUTE,
  utilization: 0.97,
  aheadMs: 7 * 24 * HOUR,
} as const;

/**
 * The hot VM's load episodes that overlap [fromMs, untilMs]: they start at
 * liveStartMs + firstAfterMs + k × periodMs (k any integer, negative ones in the history) and last
 * durationMs. A pure function of its arguments.
 */
export function demoLoadSchedule(
  vm: string,
  liveStartMs: number,
  fromMs: number,
  untilMs: number,
): ScenarioEvent[] {
  const { firstAfterMs, periodMs, durationMs, utilization } = HOT_SCHEDULE;
  const first = liveStartMs + firstAfterMs;
  const out: ScenarioEvent[] = [];
  for (let k = Math.floor((fromMs - durationMs - first) / periodMs); ; k++) {
    const start = first + k * periodMs;
    if (start > untilMs) break;
    if (start + durationMs <= fromMs) continue;
    out.push({ kind: "load", vm, fromMs: start, toMs: start + durationMs, utilization });
  }
  return out;
}

/**
 * The demo's hypervisor collector: simulates every running VM of the inventory and sends the samples
 * through the real remote-write endpoint with the collector token, as a production collector would.
 * On start it backfills from where the previous run stopped (or 24 h on the first start), then
 * ticks every sampling interval.
 */
export async function startDemoCollector(opts: DemoCollectorOptions): Promise<{ stop(): void }> {
  const now = opts.now ?? Date.now;
  const intervalMs = opts.intervalMs ?? 30_000;
  const statePath = join(opts.dataDir, "simulator.json");
  const first = !existsSync(statePath);
  const state: SimState = first
    ? { anchorMs: now(), watermarkMs: 0 }
    : (JSON.parse(readFileSync(statePath, "utf8")) as SimState);
  let sim: Simulator | undefined;
  const save = () => {
    if (sim) state.counters = sim.counters();
    writeFileSync(statePath, `${JSON.stringify(state)}\n`);
  };

  const rows = (
    await opts.db
      .selectFrom("vms")
      .selectAll()
      .where("state", "=", "RUNNING")
      .orderBy("project_id")
      .orderBy("vm_id")
      .execute()
  ).filter((r) => !(r.project_id === DEMO_PROJECT && opts.excludeVmIds?.has(r.vm_id)));
  const vms: SimVm[] = rows.map((r) => ({
    name: vmName({ projectId: r.project_id, location: r.location, vmId: r.vm_id }),
    vmId: r.vm_id,
    location: r.location,
    vcpus: r.vcpus,
    memoryBytes: r.memory_bytes,
    state: r.state,
  }));
  const scenarios = demoScenarios(vms, state.anchorMs);
  if (first) await recordScenarioStops(opts.db, scenarios, now());

  // History from where the previous run stopped (or backfillMs on the first start) up to `to`; live
  // ticks follow. The hot VM's episodes are placed relative to `to`, the start of live operation,
  // on every start: the first one begins a minute into live operation.
  const to = now();
  const from = Math.max(state.watermarkMs + 1, to - (opts.backfillMs ?? 24 * HOUR));
  const hot = rows.findIndex((r) => r.project_id === HOT_VM.projectId && r.vm_id === HOT_VM.vmId);
  if (hot >= 0) scenarios.push(...demoLoadSchedule(vms[hot].name, to, from, to + HOT_SCHEDULE.aheadMs));
  sim = createSimulator({ vms, seed: 7, intervalMs, scenarios });
  if (state.counters) sim.restoreCounters(state.counters);
  const url = `${opts.baseUrl}/v1/ingest/prometheus/api/v1/write`;
  const send = async (req: Parameters<typeof pushRemoteWrite>[2]) => {
    const res = await pushRemoteWrite(url, opts.collectorToken, req, { timeoutMs: 30_000 });
    if (res.status >= 300)
      opts.log.warn(
        { status: res.status, body: res.body.slice(0, 500) },
        "simulated collector: samples refused",
      );
  };

  if (vms.length > 0 && from < to) {
    let last = -1;
    for await (const req of sim.backfill(from, to)) {
      await send(req);
      const newest = Math.max(...req.timeseries.flatMap((ts) => ts.samples.map((s) => s.timestampMs)), from);
      const pct = Math.floor(((newest - from) / (to - from)) * 10) * 10;
      if (pct > last) {
        last = pct;
        opts.onProgress?.(`backfill of simulated telemetry for ${vms.length} VMs: ${pct}%`);
      }
    }
    opts.onProgress?.(
      `backfill of simulated telemetry for ${vms.length} VMs: done (${Math.round((to - from) / 60_000)} min)`,
    );
  }
  state.watermarkMs = to;
  save();
  if (hot >= 0) {
    const { firstAfterMs, periodMs, durationMs, utilization } = HOT_SCHEDULE;
    opts.onProgress?.(
      `simulated load: ${HOT_VM.vmId} runs at ${Math.round(utilization * 100)}% CPU for ${durationMs / MINUTE} min every ` +
        `${periodMs / MINUTE} min, next from ${new Date(to + firstAfterMs).toISOString()}`,
    );
  }

  let busy = false;
  const timer = setInterval(async () => {
    if (busy) return;
    busy = true;
    try {
      const t = now();
      for (const req of sim.tick(t)) await send(req);
      state.watermarkMs = t;
      save();
    } catch (err) {
      opts.log.warn({ err }, "simulated collector: push failed");
    } finally {
      busy = false;
    }
  }, intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

/** A resize, a restart, an unexpected stop, a telemetry gap and late buffered samples on the demo VMs. */
function demoScenarios(vms: readonly SimVm[], anchorMs: number): ScenarioEvent[] {
  const pick = (i: number) => vms[i % Math.max(vms.length, 1)]?.name;
  const out: ScenarioEvent[] = [];
  if (vms.length === 0) return out;
  out.push({ kind: "resize", vm: pick(0)!, atMs: anchorMs - 3 * HOUR, vcpus: vms[0].vcpus * 2 });
  out.push({ kind: "restart", vm: pick(1)!, atMs: anchorMs - 2 * HOUR });
  out.push({ kind: "stop", vm: pick(2)!, fromMs: anchorMs - 90 * 60_000, toMs: anchorMs - 70 * 60_000 });
  out.push({ kind: "gap", vm: pick(3)!, fromMs: anchorMs - 50 * 60_000, toMs: anchorMs - 40 * 60_000 });
  out.push({
    kind: "late",
    vm: pick(1)!,
    fromMs: anchorMs - 20 * 60_000,
    toMs: anchorMs - 10 * 60_000,
    deliverAtMs: anchorMs - 5 * 60_000,
  });
  return out;
}

/** The inventory records the simulated stop as an unexpected stop and the later start. */
async function recordScenarioStops(
  db: Db,
  scenarios: readonly ScenarioEvent[],
  nowMs: number,
): Promise<void> {
  for (const s of scenarios) {
    if (s.kind !== "stop") continue;
    await recordStateEvent(
      db,
      { vm: s.vm, state: "STOPPED", stopReason: "UNEXPECTED", timeUnix: BigInt(Math.floor(s.fromMs / 1000)) },
      nowMs,
    );
    await recordStateEvent(
      db,
      { vm: s.vm, state: "RUNNING", stopReason: "", timeUnix: BigInt(Math.floor(s.toMs / 1000)) },
      nowMs,
    );
  }
}
