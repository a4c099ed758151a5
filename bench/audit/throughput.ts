/**
 * Last-use tracking's cost on throughput (issue 29): RPC and remote-write throughput with 1,000 distinct
 * keys in use, on a server tracking keys' last use and one that does not (the bench-only `lastUse: false`),
 * same dialect, same run. Rounds alternate which server goes first, so drift in the machine's load falls
 * on both, and short rounds (1.5 s) many times over, so a burst of other load falls on a pair of windows;
 * the ratio is per round (on ÷ off), printed as the median with the rounds' spread. The rounds
 * last more than a minute in all, so every key's once-a-minute write falls inside them more than once.
 *
 * In each window, `rpcLoops` closed loops call AlertService/ListAlertRules, each call with the next of
 * the 1,000 keys (100 keys of each of 10 service accounts: a key's use writes its account's row too),
 * while `writeLoops` closed loops push the hypervisor collector's remote write (a simulated step of 20
 * VMs per request, 100 ms apart in sample time, starting an hour back).
 */
import { randomUUID } from "node:crypto";
import { pushRemoteWrite } from "../../packages/remotewrite/src/index.ts";
import type { SvcClients } from "../../packages/sdk/src/index.ts";
import { createSimulator, type Simulator } from "../../packages/server/src/ingest/simulator/index.ts";
import type { TestDialect } from "../../packages/server/testing/dialects.ts";
import { startTestApp, type TestApp } from "../../packages/server/testing/harness.ts";
import { median, quantile } from "../common/measure.ts";

const KEYS = 1000;
const ACCOUNTS = 10;
const VMS = 20;

interface Server {
  readonly label: string;
  readonly t: TestApp;
  readonly project: string;
  readonly keys: SvcClients[];
  readonly writeUrl: string;
  readonly collectorToken: string;
  readonly sim: Simulator;
  /** Sample time of the next remote-write step (ms). */
  simNow: number;
  /** The next key to call with: the keys are used in turn across windows. */
  nextKey: number;
}

async function server(dialect: TestDialect, label: string, lastUse: boolean): Promise<Server> {
  // The wall clock: last use is written at most once a minute of real time.
  const collectorToken = `svcc_${randomUUID().replaceAll("-", "")}`;
  const t = await startTestApp(dialect, { lastUse, collectorToken }, { wallClock: true });
  const vmIds = Array.from({ length: VMS }, (_, i) => `vm-${i}`);
  const p = await t.seedProject("bench", vmIds);
  const owner = t.clients(p.owner.session);
  const keys: SvcClients[] = [];
  for (let a = 0; a < ACCOUNTS; a++) {
    const sa = await owner.serviceAccounts.createServiceAccount({
      parent: p.projectName,
      displayName: `scraper ${a}`,
      template: "Metrics scraper",
    });
    for (let k = 0; k < KEYS / ACCOUNTS; k++) {
      const created = await owner.keys.createKey({
        parent: sa.name,
        displayName: `k${k}`,
        capabilities: ["monitoring.read"],
        requestId: randomUUID(),
      });
      keys.push(t.clients(created.secret ?? ""));
    }
  }
  const sim = createSimulator({
    vms: p.vms.map((name, i) => ({
      name,
      vmId: vmIds[i],
      location: "dc-1",
      vcpus: 2,
      memoryBytes: 4 * 2 ** 30,
      state: "running",
    })),
    seed: 7,
    intervalMs: 100,
  });
  return {
    label,
    t,
    project: p.projectName,
    keys,
    writeUrl: `${t.baseUrl}/v1/ingest/prometheus/api/v1/write`,
    collectorToken,
    sim,
    simNow: Date.now() - 3_600_000,
    nextKey: 0,
  };
}

/** Calls and remote writes completed in one window of `ms`, each loop closed (the next call when one ends). */
async function window(
  s: Server,
  ms: number,
  o: { rpcLoops: number; writeLoops: number },
): Promise<{ rpcPerS: number; writesPerS: number; samplesPerS: number }> {
  const end = performance.now() + ms;
  let calls = 0;
  let writes = 0;
  let samples = 0;
  const rpc = async () => {
    while (performance.now() < end) {
      const client = s.keys[s.nextKey++ % s.keys.length];
      await client.alerts.listAlertRules({ projectName: s.project });
      calls++;
    }
  };
  const write = async () => {
    while (performance.now() < end) {
      s.simNow += 100;
      for (const req of s.sim.tick(s.simNow)) {
        const r = await pushRemoteWrite(s.writeUrl, s.collectorToken, req, { timeoutMs: 30_000 });
        if (r.status >= 300) throw new Error(`remote write refused: ${r.status} ${r.body.slice(0, 200)}`);
        writes++;
        samples += req.timeseries.reduce((n, ts) => n + ts.samples.length, 0);
      }
    }
  };
  const t0 = performance.now();
  await Promise.all([
    ...Array.from({ length: o.rpcLoops }, rpc),
    ...Array.from({ length: o.writeLoops }, write),
  ]);
  const s_ = (performance.now() - t0) / 1000;
  return { rpcPerS: calls / s_, writesPerS: writes / s_, samplesPerS: samples / s_ };
}

/** The rounds' spread: interquartile range and extremes of the per-round figures. */
const spread = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return `IQR ${quantile(s, 0.25).toFixed(2)}–${quantile(s, 0.75).toFixed(2)}, min–max ${s[0].toFixed(2)}–${s[s.length - 1].toFixed(2)}`;
};

/** Prints the throughput of both servers and the ratio per round; returns when both are closed. */
export async function lastUseThroughput(
  dialect: TestDialect,
  o: { rounds: number; windowMs: number; rpcLoops: number; writeLoops: number },
): Promise<void> {
  const on = await server(dialect, "last use tracked", true);
  const off = await server(dialect, "not tracked", false);
  try {
    // Warm-up: every key used once on both (the first minute's writes on `on` fall here and again later).
    await window(on, 2000, o);
    await window(off, 2000, o);
    const rpcRatio: number[] = [];
    const writeRatio: number[] = [];
    const runs = { on: [] as number[], off: [] as number[], onW: [] as number[], offW: [] as number[] };
    for (let r = 0; r < o.rounds; r++) {
      const first = r % 2 ? off : on;
      const second = first === on ? off : on;
      const a = await window(first, o.windowMs, o);
      const b = await window(second, o.windowMs, o);
      const [x, y] = first === on ? [a, b] : [b, a];
      runs.on.push(x.rpcPerS);
      runs.off.push(y.rpcPerS);
      runs.onW.push(x.samplesPerS);
      runs.offW.push(y.samplesPerS);
      rpcRatio.push(x.rpcPerS / y.rpcPerS);
      writeRatio.push(x.samplesPerS / y.samplesPerS);
      if (o.rounds <= 12)
        console.log(
          `  round ${r + 1}: RPC ${x.rpcPerS.toFixed(0)} / ${y.rpcPerS.toFixed(0)} calls/s = ${rpcRatio[r].toFixed(3)}×;` +
            ` remote write ${x.samplesPerS.toFixed(0)} / ${y.samplesPerS.toFixed(0)} samples/s (${x.writesPerS.toFixed(0)} / ${y.writesPerS.toFixed(0)} requests/s) = ${writeRatio[r].toFixed(3)}×`,
        );
    }
    const cv = (xs: number[]) => {
      const m = xs.reduce((a, b) => a + b, 0) / xs.length;
      return Math.sqrt(xs.reduce((a, b) => a + (b - m) ** 2, 0) / xs.length) / m;
    };
    console.log(
      `RPC throughput, last use tracked ÷ not: median ${median(rpcRatio).toFixed(2)}× (${o.rounds} rounds: ${spread(rpcRatio)});` +
        ` median ${median(runs.on).toFixed(0)} vs ${median(runs.off).toFixed(0)} calls/s, round-to-round CV ${(cv(runs.on) * 100).toFixed(0)} % / ${(cv(runs.off) * 100).toFixed(0)} %`,
    );
    console.log(
      `remote-write throughput, last use tracked ÷ not: median ${median(writeRatio).toFixed(2)}× (${o.rounds} rounds: ${spread(writeRatio)});` +
        ` median ${median(runs.onW).toFixed(0)} vs ${median(runs.offW).toFixed(0)} samples/s, round-to-round CV ${(cv(runs.onW) * 100).toFixed(0)} % / ${(cv(runs.offW) * 100).toFixed(0)} %`,
    );
    const written = await on.t.app.db.db
      .selectFrom("api_keys")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where("last_used_time", "is not", null)
      .executeTakeFirstOrThrow();
    const none = await off.t.app.db.db
      .selectFrom("api_keys")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where("last_used_time", "is not", null)
      .executeTakeFirstOrThrow();
    console.log(`keys with a last use: ${Number(written.n)} tracked, ${Number(none.n)} not tracked`);
  } finally {
    await on.t.close();
    await off.t.close();
  }
}
