/**
 * `svc.admin.v1.OperationsService/ListProjectUsage`: three projects of different sizes (1, 2 and 4 VMs of
 * the same series) and one without data, on the embedded store (SQLite and PostgreSQL) and the remote
 * backend over VictoriaMetrics: sorted, top N, figures in proportion to the projects' sizes.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Config } from "../config.ts";
import { loadProject } from "../promapi/testkit.ts";
import { testDialects } from "../testing/dialects.ts";
import { engineSkipReason, startEngine } from "../testing/engines.ts";
import { startTestApp, type TestApp } from "../testing/harness.ts";

const S = 1000;
const dialects = await testDialects();

async function usageCase(t: TestApp): Promise<void> {
  const endMs = Math.floor(t.clock.now() / (30 * S)) * 30 * S;
  t.clock.ms = endMs;
  const sizes: [string, number][] = [
    ["usage-small", 1],
    ["usage-big", 4],
    ["usage-mid", 2],
  ];
  for (const [id, n] of sizes) {
    const p = await t.seedProject(
      id,
      Array.from({ length: n }, (_, i) => `vm-${i + 1}`),
    );
    await loadProject(t, p.vms, endMs, 1);
  }
  await t.seedProject("usage-empty", ["vm-1"]);

  // A remote engine makes written samples searchable after a moment: wait until every project shows.
  let all = await t.admin.operations.listProjectUsage({});
  for (let i = 0; i < 120 && all.projects.length < 3; i++) {
    await new Promise((r) => setTimeout(r, 500));
    all = await t.admin.operations.listProjectUsage({});
  }
  assert.equal(all.totalProjects, 4n);
  // The empty project has no figure at all (missing, not zero).
  assert.deepEqual(
    all.projects.map((p) => p.project),
    ["projects/usage-big", "projects/usage-mid", "projects/usage-small"],
  );
  const [big, mid, small] = all.projects;
  assert.ok(small.activeSeries > 0n);
  // Every VM has the same series at the same 30 s cadence: the figures follow the VM counts.
  assert.equal(mid.activeSeries, 2n * small.activeSeries);
  assert.equal(big.activeSeries, 4n * small.activeSeries);
  assert.ok(small.samplesPerSecond > 0);
  assert.ok(Math.abs(big.samplesPerSecond - 4 * small.samplesPerSecond) < 1e-9, `${big.samplesPerSecond}`);
  // Each active series has from 1 (a derived series written once) to 10 samples (one every 30 s) in the
  // last 5 minutes.
  const n = Number(small.activeSeries);
  assert.ok(
    small.samplesPerSecond >= n / 300 && small.samplesPerSecond <= (n * 10) / 300,
    `${small.samplesPerSecond}`,
  );

  const top = await t.admin.operations.listProjectUsage({ pageSize: 2, orderBy: "samples_per_second" });
  assert.deepEqual(
    top.projects.map((p) => p.project),
    ["projects/usage-big", "projects/usage-mid"],
  );
  assert.equal(top.timeUnix, BigInt(endMs / 1000));

  await assert.rejects(t.admin.operations.listProjectUsage({ orderBy: "bytes" }), (e: unknown) => {
    assert.ok(e instanceof ConnectError);
    assert.equal(e.code, Code.InvalidArgument);
    assert.match(e.message, /orderBy: must be one of active_series, samples_per_second/);
    return true;
  });
}

describe("per-project usage for the operator", () => {
  for (const { dialect, skip } of dialects) {
    it(`embedded store (${dialect.name})`, { skip }, async () => {
      const t = await startTestApp(dialect);
      try {
        await usageCase(t);
        const p = await t.seedProject("usage-tenant", []);
        await assert.rejects(
          t.clients(p.owner.session).admin.operations.listProjectUsage({}),
          (e: unknown) => e instanceof ConnectError && e.code === Code.PermissionDenied,
        );
      } finally {
        await t.close();
      }
    });
  }

  it("remote backend (VictoriaMetrics)", { skip: engineSkipReason("victoria-metrics") }, async () => {
    const engine = await startEngine("victoria-metrics");
    const [{ dialect }] = dialects;
    const overrides: Partial<Config> = {
      metricsBackend: "remote",
      remoteMetrics: { remoteWriteUrl: engine.remoteWriteUrl, queryUrl: engine.queryUrl, headers: {} },
    };
    const t = await startTestApp(dialect, overrides);
    try {
      await usageCase(t);
    } finally {
      await t.close();
      await engine.stop();
    }
  });
});
