/**
 * One of bench:load's measured clients, as its own process (`role`):
 * - `light`: the light project's dashboard (QueryVMMonitoring of one VM's CPU and memory for the last
 *   hour, `queriesPerS` times a second; ListVMMonitoring once a second) and its Prometheus scraping
 *   the four export shards every 5 s, open loop;
 * - `collector`: the hypervisor collector sending every VM's newest samples once a second (the
 *   simulator continued from the counters it is given), its acknowledgement latency measured.
 *
 * Their own processes because one customer's client does not share an event loop with another
 * customer's heavy queries: in one process, the light answers waited in the load generator's own
 * loop behind the heavy answers it was reading (a slow light request measured 34 ms by the client
 * had taken 4.6 ms in the server, and ended 21 ms before the client saw it).
 *
 * Protocol: the JSON of ClientConfig in BENCH_CLIENT_CONFIG; once warmed up, it prints `ready` and
 * waits for a line on stdin with the phase's end (epoch ms); at that end, one JSON line on stdout:
 * the latencies (ms) and statuses per class (and the collector's counters, to continue from).
 */
import { setPriority } from "node:os";
import { createInterface } from "node:readline";
import { pushRemoteWrite } from "../../packages/remotewrite/src/index.ts";
import {
  type CounterState,
  createSimulator,
  type SimVm,
} from "../../packages/server/src/ingest/simulator/index.ts";
import { type ClassRecord, Recorder } from "./record.ts";

export type ClientConfig =
  | {
      readonly role: "light";
      readonly base: string;
      readonly key: string;
      readonly vm: string;
      readonly phase: string;
      readonly queriesPerS: number;
      readonly nice: number;
    }
  | {
      readonly role: "collector";
      readonly base: string;
      readonly token: string;
      readonly vms: SimVm[];
      readonly counters: Record<string, CounterState>;
      /** The last time the previous collector sent (ms): this one continues after it. */
      readonly resumeAfterMs: number;
      readonly phase: string;
      readonly nice: number;
    };

export interface ClientResult {
  readonly classes: Record<string, ClassRecord>;
  readonly counters?: Record<string, CounterState>;
  readonly lastMs?: number;
}

const cfg = JSON.parse(process.env.BENCH_CLIENT_CONFIG ?? "{}") as ClientConfig;
// Set either way: a child starts with the load generator's nice value.
setPriority(cfg.nice);
const recorder = new Recorder();
const timed = recorder.timed.bind(recorder);

/** Until `until`, open loop: a request every `everyMs` whether or not the previous one answered. */
async function every(until: number, everyMs: number, f: () => Promise<void>): Promise<void> {
  const pending: Promise<void>[] = [];
  for (let at = Date.now(); at < until; at += everyMs) {
    await new Promise((r) => setTimeout(r, Math.max(0, at - Date.now())));
    pending.push(f());
  }
  await Promise.all(pending);
}

/** Waits for the phase's end on stdin, after saying it is ready. */
async function phaseEnd(): Promise<number> {
  process.stdout.write("ready\n");
  const lines = createInterface({ input: process.stdin });
  const until = Number((await lines[Symbol.asyncIterator]().next()).value);
  lines.close();
  return until;
}

async function light(c: Extract<ClientConfig, { role: "light" }>): Promise<ClientResult> {
  const auth = { authorization: `Bearer ${c.key}` };
  const rpc = (method: string, body: unknown) =>
    fetch(`${c.base}/svc.monitoring.v1.MonitoringService/${method}`, {
      method: "POST",
      headers: { "content-type": "application/json", "connect-protocol-version": "1", ...auth },
      body: JSON.stringify(body),
    });
  const queryLight = () => {
    const end = Math.floor(Date.now() / 1000);
    return rpc("QueryVMMonitoring", {
      name: c.vm,
      metricIds: ["cpu_utilization_pct", "memory_used_bytes"],
      startTimeUnix: String(end - 3600),
      endTimeUnix: String(end),
      stepSeconds: 30,
    });
  };
  // This process's own warm-up (connections, JIT), not measured.
  for (let i = 0; i < 10; i++) await (await queryLight()).arrayBuffer();
  const until = await phaseEnd();
  let shard = 0;
  await Promise.all([
    every(until, 1000 / c.queriesPerS, () => timed(`QueryVMMonitoring (light, ${c.phase})`, queryLight)),
    every(until, 1000, () =>
      timed(`ListVMMonitoring (light, ${c.phase})`, () =>
        rpc("ListVMMonitoring", { projectName: "projects/light", pageSize: 50 }),
      ),
    ),
    // A Prometheus scraping the four shards every 5 s.
    every(until, 1250, () =>
      timed(`export shard (light, ${c.phase})`, () =>
        fetch(`${c.base}/v1/monitoring/projects/light/export?shard=${shard++ % 4}`, { headers: auth }),
      ),
    ),
  ]);
  return { classes: recorder.classes };
}

async function collector(c: Extract<ClientConfig, { role: "collector" }>): Promise<ClientResult> {
  const writeUrl = `${c.base}/v1/ingest/prometheus/api/v1/write`;
  const sim = createSimulator({ vms: c.vms, seed: 11, intervalMs: 30_000 });
  sim.restoreCounters(c.counters);
  // Catch up from where the previous collector stopped (not measured), so every step is sent once.
  let last = Date.now();
  for await (const req of sim.backfill(c.resumeAfterMs + 1, last)) {
    const r = await pushRemoteWrite(writeUrl, c.token, req, { timeoutMs: 30_000 });
    if (r.status >= 300) throw new Error(`collector catch-up refused: ${r.status} ${r.body.slice(0, 200)}`);
  }
  const until = await phaseEnd();
  for (let tick = Date.now(); tick < until; ) {
    tick += 1000;
    await new Promise((r) => setTimeout(r, Math.max(0, tick - Date.now())));
    // Every VM's newest step, as a collector sends it.
    last = Date.now();
    for (const req of sim.tick(last)) {
      const t1 = performance.now();
      const r = await pushRemoteWrite(writeUrl, c.token, req, { timeoutMs: 30_000 }).catch(() => ({
        status: 599,
      }));
      recorder.record(`remote write (${c.phase})`, performance.now() - t1, r.status);
    }
  }
  return { classes: recorder.classes, counters: sim.counters(), lastMs: last };
}

const result = cfg.role === "light" ? await light(cfg) : await collector(cfg);
process.stdout.write(`${JSON.stringify(result)}\n`);
