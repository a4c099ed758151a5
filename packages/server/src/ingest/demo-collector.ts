import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pushRemoteWrite } from "@svc/remotewrite";
import type { Logger } from "pino";
import type { Db } from "../db/database.ts";
import { vmName } from "../inventory/names.ts";
import { recordStateEvent } from "../inventory/vms.ts";
import { createSimulator, type ScenarioEvent, type SimVm } from "./simulator/index.ts";

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
  /** Progress lines during the backfill ("backfill 40% …"). */
  readonly onProgress?: (line: string) => void;
}

interface SimState {
  /** First start: scenario times are anchored here so they stay put across restarts. */
  readonly anchorMs: number;
  /** Newest step already sent. */
  watermarkMs: number;
}

const HOUR = 3_600_000;

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
  const save = () => writeFileSync(statePath, `${JSON.stringify(state)}\n`);

  const rows = await opts.db
    .selectFrom("vms")
    .selectAll()
    .where("state", "=", "RUNNING")
    .orderBy("project_id")
    .orderBy("vm_id")
    .execute();
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
  const sim = createSimulator({ vms, seed: 7, intervalMs, scenarios });
  const url = `${opts.baseUrl}/v1/ingest/prometheus/api/v1/write`;
  const send = async (req: Parameters<typeof pushRemoteWrite>[2]) => {
    const res = await pushRemoteWrite(url, opts.collectorToken, req, { timeoutMs: 30_000 });
    if (res.status >= 300)
      opts.log.warn(
        { status: res.status, body: res.body.slice(0, 500) },
        "simulated collector: samples refused",
      );
  };

  const to = now();
  const from = Math.max(state.watermarkMs + 1, to - (opts.backfillMs ?? 24 * HOUR));
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
