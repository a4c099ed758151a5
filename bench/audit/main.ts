/**
 * The audit log's cost on the hot path (issue 29): SaveAlertRule (with a write key) and CreateKey
 * (with a console session) p50 and p90, on one server recording the audit log and one that does not,
 * same dialect, same run, calls interleaved so drift in the machine's load falls on both. Also the
 * last-use tracking's bound: writes issued for 1,000 distinct keys each used 20 times within a minute.
 * And last-use tracking's cost on RPC and remote-write throughput with 1,000 keys in use (throughput.ts).
 * Not a test: figures for the docs.
 *
 *   npx tsx bench/audit/main.ts [--n 300] [--dialect sqlite|postgres] [--part latency|throughput|all]
 *                               [--rounds 40] [--window-s 1.5] [--rpc-loops 8] [--write-loops 2]
 */
import { randomUUID } from "node:crypto";
import { LastUseTracker } from "../../packages/server/src/audit/last-use.ts";
import { testDialects } from "../../packages/server/testing/dialects.ts";
import { startTestApp, type TestApp } from "../../packages/server/testing/harness.ts";
import { calibrationMs, loadAverageLine, quantile } from "../common/measure.ts";
import { lastUseThroughput } from "./throughput.ts";

const arg = (name: string, dflt: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const N = Number(arg("n", "300"));
const which = arg("dialect", "sqlite");
const part = arg("part", "all");
const dialects = await testDialects();
const dialect = (dialects.find((x) => x.dialect.name === which && !x.skip) ?? dialects[0]).dialect;

interface Peer {
  readonly label: string;
  readonly t: TestApp;
  readonly session: string;
  readonly writeKey: string;
  readonly project: string;
}

async function peer(label: string, audit: boolean): Promise<Peer> {
  const t = await startTestApp(dialect, { audit });
  const p = await t.seedProject("bench", ["web-1"]);
  const owner = t.clients(p.owner.session);
  const sa = await owner.serviceAccounts.createServiceAccount({
    parent: p.projectName,
    displayName: "ci",
    template: "Alert manager",
  });
  const k = await owner.keys.createKey({
    parent: sa.name,
    displayName: "ci",
    capabilities: ["monitoring.read", "monitoring.write"],
    requestId: randomUUID(),
  });
  return { label, t, session: p.owner.session, writeKey: k.secret ?? "", project: p.projectName };
}

async function timed(f: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await f();
  return performance.now() - t0;
}

// One rule per server, edited on every call (a project holds at most 20 rules).
const versions = new Map<Peer, { id: string; version: string }>();
const save = async (p: Peer) => {
  const v = versions.get(p) ?? { id: randomUUID(), version: "0" };
  const r = await p.t.clients(p.writeKey).alerts.saveAlertRule({
    projectName: p.project,
    id: v.id,
    requestId: randomUUID(),
    expectedVersion: v.version,
    spec: {
      displayName: "cpu",
      metricId: "cpu_utilization_pct",
      operator: "GREATER_THAN",
      threshold: 80 + Math.random() * 10,
      sustainedSeconds: 300,
      severity: "WARNING",
      allVms: true,
    },
  });
  versions.set(p, { id: v.id, version: String(r.version) });
};
const createKey = (p: Peer) =>
  p.t.clients(p.session).keys.createKey({
    parent: p.project,
    displayName: "k",
    capabilities: ["monitoring.read"],
    requestId: randomUUID(),
  });

console.log(`dialect ${dialect.name}; calibration ${calibrationMs().toFixed(1)} ms; ${loadAverageLine()}`);
if (part === "all" || part === "latency") await latency();
if (part === "all" || part === "throughput") {
  const rounds = Number(arg("rounds", "40"));
  const windowMs = Number(arg("window-s", "1.5")) * 1000;
  const rpcLoops = Number(arg("rpc-loops", "8"));
  const writeLoops = Number(arg("write-loops", "2"));
  console.log(
    `last use and throughput: 1,000 keys, ${rounds} rounds of ${windowMs / 1000} s per server, ${rpcLoops} RPC loops, ${writeLoops} remote-write loops`,
  );
  await lastUseThroughput(dialect, { rounds, windowMs, rpcLoops, writeLoops });
}
console.log(loadAverageLine());

async function latency(): Promise<void> {
  const on = await peer("audited", true);
  const off = await peer("not audited", false);
  console.log(`audit latency: ${N} calls per method and server`);
  for (const [name, call] of [
    ["SaveAlertRule", save],
    ["CreateKey", createKey],
  ] as const) {
    const times = { on: [] as number[], off: [] as number[] };
    for (let i = 0; i < 20; i++) await Promise.all([call(on), call(off)]); // warm-up
    for (let i = 0; i < N; i++) {
      // Alternate which goes first, one call at a time: each measures alone.
      if (i % 2) {
        times.on.push(await timed(() => call(on)));
        times.off.push(await timed(() => call(off)));
      } else {
        times.off.push(await timed(() => call(off)));
        times.on.push(await timed(() => call(on)));
      }
    }
    times.on.sort((a, b) => a - b);
    times.off.sort((a, b) => a - b);
    const p50 = [quantile(times.on, 0.5), quantile(times.off, 0.5)];
    const p90 = [quantile(times.on, 0.9), quantile(times.off, 0.9)];
    console.log(
      `${name.padEnd(14)} p50 ${p50[0].toFixed(2)} ms audited / ${p50[1].toFixed(2)} ms not = ${(p50[0] / p50[1]).toFixed(2)}×;` +
        ` p90 ${p90[0].toFixed(2)} / ${p90[1].toFixed(2)} = ${(p90[0] / p90[1]).toFixed(2)}×`,
    );
  }

  // Last use: 1,000 keys, 20 requests each within one minute: one write per key, not 20.
  const tracker = new LastUseTracker(on.t.app.db.db);
  const t0 = Date.now();
  for (let r = 0; r < 20; r++)
    for (let k = 0; k < 1000; k++)
      await tracker.note(
        {
          kind: "PERSONAL_KEY",
          keyId: `k${k}`,
          projectId: "bench",
          identityId: "u",
          keyCapabilities: [],
          identityPermissions: [],
        },
        t0 + r * 1000,
        "127.0.0.1",
      );
  console.log(`last use: 20,000 requests of 1,000 keys within a minute → ${tracker.writes} writes`);
  await on.t.close();
  await off.t.close();
}
