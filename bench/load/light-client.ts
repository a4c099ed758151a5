/**
 * The light project's client in bench:load, as its own process: a dashboard (QueryVMMonitoring of one
 * VM's CPU and memory for the last hour, `queriesPerS` times a second; ListVMMonitoring once a second)
 * and its Prometheus scraping the four export shards every 5 s, open loop for `durationMs`.
 *
 * Its own process because a customer's dashboard does not share an event loop with another
 * customer's heavy queries: in one process, the light answers waited in the load generator's own
 * loop behind the heavy answers it was reading (a slow light request measured 34 ms by the client
 * had taken 4.6 ms in the server, and ended 21 ms before the client saw it).
 *
 * Protocol: the JSON of LightClientConfig in BENCH_LIGHT_CONFIG; once warmed up, it prints `ready`
 * and waits for a line on stdin with the phase's end (epoch ms); at that end, one JSON line on stdout:
 * the latencies (ms) and statuses per class.
 */
import { setPriority } from "node:os";
import { createInterface } from "node:readline";

export interface LightClientConfig {
  readonly base: string;
  readonly key: string;
  readonly vm: string;
  readonly phase: string;
  readonly queriesPerS: number;
  readonly nice: number;
}

export interface ClassRecord {
  readonly latencies: number[];
  readonly statuses: Record<string, number>;
}

const cfg = JSON.parse(process.env.BENCH_LIGHT_CONFIG ?? "{}") as LightClientConfig;
// Set either way: a child starts with the load generator's nice value.
setPriority(cfg.nice);
const out: Record<string, ClassRecord> = {};

async function timed(cls: string, f: () => Promise<Response>): Promise<void> {
  const t0 = performance.now();
  let status = 0;
  try {
    const r = await f();
    status = r.status;
    await r.arrayBuffer();
  } catch {
    status = 599; // the connection failed: counted with the 5xx
  }
  const c = out[cls] ?? { latencies: [], statuses: {} };
  out[cls] = c;
  if (status < 500 && status !== 429) c.latencies.push(performance.now() - t0);
  c.statuses[status] = (c.statuses[status] ?? 0) + 1;
}

const auth = { authorization: `Bearer ${cfg.key}` };
const rpc = (method: string, body: unknown) =>
  fetch(`${cfg.base}/svc.monitoring.v1.MonitoringService/${method}`, {
    method: "POST",
    headers: { "content-type": "application/json", "connect-protocol-version": "1", ...auth },
    body: JSON.stringify(body),
  });
const queryLight = () => {
  const end = Math.floor(Date.now() / 1000);
  return rpc("QueryVMMonitoring", {
    name: cfg.vm,
    metricIds: ["cpu_utilization_pct", "memory_used_bytes"],
    startTimeUnix: String(end - 3600),
    endTimeUnix: String(end),
    stepSeconds: 30,
  });
};

// This process's own warm-up (connections, JIT), not measured.
for (let i = 0; i < 10; i++) await (await queryLight()).arrayBuffer();

process.stdout.write("ready\n");
const lines = createInterface({ input: process.stdin });
const until = Number((await lines[Symbol.asyncIterator]().next()).value);
lines.close();
// Open loop: a request every `everyMs` whether or not the previous one has answered, as a
// dashboard's refresh or a scraper's interval does.
const every = async (everyMs: number, f: () => Promise<void>) => {
  const pending: Promise<void>[] = [];
  for (let at = Date.now(); at < until; at += everyMs) {
    await new Promise((r) => setTimeout(r, Math.max(0, at - Date.now())));
    pending.push(f());
  }
  await Promise.all(pending);
};
let shard = 0;
await Promise.all([
  every(1000 / cfg.queriesPerS, () => timed(`QueryVMMonitoring (light, ${cfg.phase})`, queryLight)),
  every(1000, () =>
    timed(`ListVMMonitoring (light, ${cfg.phase})`, () =>
      rpc("ListVMMonitoring", { projectName: "projects/light", pageSize: 50 }),
    ),
  ),
  // A Prometheus scraping the four shards every 5 s.
  every(1250, () =>
    timed(`export shard (light, ${cfg.phase})`, () =>
      fetch(`${cfg.base}/v1/monitoring/projects/light/export?shard=${shard++ % 4}`, { headers: auth }),
    ),
  ),
]);
process.stdout.write(`${JSON.stringify(out)}\n`);
