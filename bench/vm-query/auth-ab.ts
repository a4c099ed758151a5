/**
 * A/B of a Prometheus-API request's authentication (not a test): what the API's `onRequest` hook does
 * for an API key (authenticate, then monitoring.read in the project), called one after another on the
 * event loop, with the key principal cache (iam/principal-cache.ts) off and on, switched between rows
 * (A B B A …) so the machine's load falls on both. Per row: the main thread's CPU per check (thread
 * CPU: it does not count the time another process held the core) and the wall time per check (on
 * PostgreSQL mostly the round trips). Both dialects when PostgreSQL answers.
 *
 *   npx tsx bench/vm-query/auth-ab.ts [--rounds 6] [--calls 2000]
 */
import { randomUUID } from "node:crypto";
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { authenticate, authorizeProject } from "../../packages/server/src/iam/principal.ts";
import { keyPrincipalCaching } from "../../packages/server/src/iam/principal-cache.ts";
import { threadCpuSeconds } from "../../packages/server/src/promql/pool/thread-cpu.ts";
import { testDialects } from "../../packages/server/testing/dialects.ts";
import { startTestApp } from "../../packages/server/testing/harness.ts";

const { values: args } = parseArgs({
  options: { rounds: { type: "string", default: "6" }, calls: { type: "string", default: "2000" } },
});
const rounds = Number(args.rounds);
const calls = Number(args.calls);
const out = (s: string) => process.stdout.write(`${s}\n`);
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
const arms = ["two reads per request (before)", "auth revision + cached principal (after)"];

const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(" ");
out(`load average at start: ${load()}`);
for (const { dialect, skip } of await testDialects()) {
  if (skip) continue;
  const t = await startTestApp(dialect);
  try {
    const p = await t.seedProject("bench", ["vm-1"]);
    const owner = t.clients(p.owner.session);
    const sa = await owner.serviceAccounts.createServiceAccount({
      parent: p.projectName,
      displayName: "dashboards",
      template: "Metrics scraper",
    });
    const keys = {
      "service account key": (
        await owner.keys.createKey({
          parent: sa.name,
          displayName: "k",
          capabilities: ["monitoring.read"],
          expireDays: 30,
          requestId: randomUUID(),
        })
      ).secret,
      "personal key": (
        await owner.keys.createKey({
          parent: p.projectName,
          displayName: "mine",
          capabilities: ["monitoring.read"],
          expireDays: 30,
          requestId: randomUUID(),
        })
      ).secret,
    };
    const db = t.app.db.db;
    const check = async (secret: string) => {
      const principal = await authenticate(db, secret, t.clock.now(), {});
      await authorizeProject(db, principal, "bench", "monitoring.read");
    };
    for (const [kind, secret] of Object.entries(keys) as [string, string][]) {
      const cpu: number[][] = [[], []];
      const wall: number[][] = [[], []];
      for (let r = 0; r < rounds; r++) {
        for (const arm of r % 2 === 0 ? [0, 1] : [1, 0]) {
          keyPrincipalCaching(arm === 1);
          for (let i = 0; i < 200; i++) await check(secret); // warm-up
          const c0 = threadCpuSeconds();
          const w0 = performance.now();
          for (let i = 0; i < calls; i++) await check(secret);
          cpu[arm].push(((threadCpuSeconds() - c0) * 1e6) / calls);
          wall[arm].push(((performance.now() - w0) * 1e3) / calls);
        }
      }
      for (const [a, name] of arms.entries())
        out(
          `${dialect.name}, ${kind}, ${name}: main-thread CPU µs per check ${cpu[a].map((x) => x.toFixed(1)).join(", ")} (median ${med(cpu[a]).toFixed(1)}); wall µs median ${med(wall[a]).toFixed(1)}`,
        );
    }
  } finally {
    keyPrincipalCaching(true);
    await t.close();
  }
}
out(`load average at end: ${load()}`);
