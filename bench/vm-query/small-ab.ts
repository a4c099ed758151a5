/**
 * A/B of the Prometheus API's small range queries (not a test): the six range queries of one VM's
 * dashboard sent at once (as in `npm run bench:vm-query -- --quick`), against the in-process server,
 * with two arms of a change switched between rows of the same run (A B A B …), so the machine's load
 * falls on both. Per row it prints the server's CPU per query: the whole process's (every thread:
 * the query workers, GC helpers) and the main thread's (the event loop, which handles every request
 * of a burst one after another), which do not depend on the machine's load as latency does.
 *
 *   npx tsx bench/vm-query/small-ab.ts --arms parse-cache [--rounds 4] [--groups 300]
 *
 * Arms (`--arms`): `parse-cache` (A: the PromQL parse cache sized as before, 512 expressions;
 * B: as now); `inline` (A: every query to the worker pool, SVC_QUERY_INLINE_COST=0; B: a cheap query
 * inline when its project has no free worker, the default), switched per query; `auth-cache` (A: a key's
 * two SQL reads per request; B: one read of the auth revision and the cached principal, iam/principal-cache.ts). Env: BENCH_VMS (100), BENCH_DAYS (1).
 */
import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import { keyPrincipalCaching } from "../../packages/server/src/iam/principal-cache.ts";
import { metricIds, vmSelector } from "../../packages/server/src/metrics/metric-ids.ts";
import { DEFAULT_INLINE_QUERY_COST } from "../../packages/server/src/promql/cost.ts";
import { parseCacheCapacity } from "../../packages/server/src/promql/parser.ts";
import { labelsFromRecord } from "../../packages/server/src/storage/interface.ts";
import { testDialects } from "../../packages/server/testing/dialects.ts";
import { startTestApp } from "../../packages/server/testing/harness.ts";
import { DAYS, SIX_METRICS, STEP_MS, VMS, valuesAt, vmSeriesLabels } from "./data.ts";
import { type LoadRow, runLoad, type Span } from "./run-load.ts";

const { values: args } = parseArgs({
  options: {
    arms: { type: "string", default: "parse-cache" },
    rounds: { type: "string", default: "4" },
    groups: { type: "string", default: "300" },
  },
});
const rounds = Number(args.rounds);
const groups = Number(args.groups);

interface Arm {
  readonly name: string;
  readonly apply: () => void;
}
/** The server's SVC_QUERY_INLINE_COST, read per query: the `inline` arms switch it. */
let inlineCost = DEFAULT_INLINE_QUERY_COST;
const defaultCapacity = parseCacheCapacity();
const armSets: Record<string, [Arm, Arm]> = {
  "parse-cache": [
    { name: "parse cache of 512 expressions (before)", apply: () => parseCacheCapacity({ entries: 512 }) },
    { name: "parse cache by characters (after)", apply: () => parseCacheCapacity(defaultCapacity) },
  ],
  "auth-cache": [
    { name: "a key's two reads per request (before)", apply: () => keyPrincipalCaching(false) },
    { name: "one read of the auth revision, key cached (after)", apply: () => keyPrincipalCaching(true) },
  ],
  inline: [
    { name: "every query to the pool (before)", apply: () => (inlineCost = 0) },
    {
      name: "cheap query inline when no free worker (after)",
      apply: () => (inlineCost = DEFAULT_INLINE_QUERY_COST),
    },
  ],
};
const arms = armSets[args.arms];
if (!arms) throw new Error(`--arms: one of ${Object.keys(armSets).join(", ")}`);

const out = (s: string) => process.stdout.write(`${s}\n`);
const [sqlite] = await testDialects();

/** A server with the bench's data: 6 series per VM over BENCH_DAYS, and a read key. */
async function server() {
  const t = await startTestApp(sqlite.dialect, { queryInlineCost: () => inlineCost });
  await t.app.queryPool?.warm();
  const nowMs = t.clock.now();
  const vmIds = Array.from({ length: VMS }, (_, i) => `vm-${String(i).padStart(4, "0")}`);
  const p = await t.seedProject("bench", vmIds);
  const labels = p.vms.map((vm, i) => vmSeriesLabels(vm, vmIds[i]).map(labelsFromRecord));
  const steps = Math.floor((DAYS * 86_400_000) / STEP_MS) - 2;
  const start = nowMs - steps * STEP_MS;
  for (let k = 0; k <= steps; k++) {
    const ts = start + k * STEP_MS;
    const app = t.app.tsdb.appender();
    for (let i = 0; i < VMS; i++) {
      const v = valuesAt(i, k, ts);
      for (let j = 0; j < 6; j++) app.append(labels[i][j], ts, v[j]);
    }
    await app.commit();
  }
  await t.app.tsdb.compact();
  const key = await t.clients(p.owner.session).keys.createKey({
    parent: p.projectName,
    displayName: "bench",
    capabilities: ["monitoring.read"],
    requestId: randomUUID(),
  });
  const nowS = nowMs / 1000;
  const endS = Math.floor(nowS / 1800) * 1800;
  const base = `${t.baseUrl}/v1/monitoring/projects/bench/prometheus`;
  const group = (i: number) => ({
    group: SIX_METRICS.map((id) => ({
      url: `${base}/api/v1/query_range?${new URLSearchParams({
        query: metricIds.get(id)!.promql(vmSelector(p.vms[(i * 7919) % VMS]), 1800, 30),
        start: String(Math.ceil((nowS - DAYS * 86_400) / 1800) * 1800),
        end: String(endS),
        step: "1800",
      })}`,
      method: "GET",
      headers: { Authorization: `Bearer ${key.secret}` },
    })),
  });
  return { t, requests: Array.from({ length: VMS }, (_, i) => group(i)) };
}

const { t, requests } = await server();
try {
  const rows: (LoadRow & { arm: number })[] = [];
  // A B B A …: each arm goes first as often as second.
  for (let r = 0; r < rounds; r++)
    for (const arm of r % 2 === 0 ? [0, 1] : [1, 0])
      rows.push({
        name: arms[arm].name,
        arm,
        n: groups,
        warmup: r === 0 ? 300 : 60,
        requests,
      });
  const spans: Span[] = [];
  const results = await runLoad(rows, spans, (row) => arms[(row as (typeof rows)[number]).arm].apply());
  out(`| arm | groups | process CPU µs per query | main thread CPU µs per query | p50 ms (group) |`);
  out(`| --- | --- | --- | --- | --- |`);
  const per = (ms: number, n: number) => ((ms * 1000) / (n * 6)).toFixed(0);
  for (const [i, r] of results.entries()) {
    const sorted = [...r.latenciesMs].sort((a, b) => a - b);
    out(
      `| ${rows[i].name} | ${r.n} | ${per(r.serverCpuMs, r.n)} | ${per(r.mainCpuMs, r.n)} | ${sorted[Math.floor(sorted.length / 2)].toFixed(2)} |`,
    );
  }
  for (const [a, arm] of arms.entries()) {
    const mine = results.filter((_, i) => rows[i].arm === a);
    const med = (xs: number[]) => xs.sort((x, y) => x - y)[Math.floor((xs.length - 1) / 2)];
    out(
      `${arm.name}: median process ${per(med(mine.map((r) => r.serverCpuMs)), groups)} µs, main ${per(med(mine.map((r) => r.mainCpuMs)), groups)} µs per query`,
    );
  }
} finally {
  await t.close();
}
