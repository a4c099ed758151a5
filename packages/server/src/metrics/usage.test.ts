/**
 * `svc.admin.v1.OperationsService/ListProjectUsage`: three projects of different sizes (1, 2 and 4 VMs of
 * the same series) and one without data, on the embedded store and on the remote backend over
 * VictoriaMetrics, each with SQLite and PostgreSQL: sorted, top N, figures in proportion to the
 * projects' sizes; query CPU charged to the projects that queried (not to the operator's own reads);
 * stored bytes on the embedded store, said to be unavailable on the remote one.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { testDialects } from "../../testing/dialects.ts";
import { engineSkipReason, startEngine } from "../../testing/engines.ts";
import { ADMIN_TOKEN, startTestApp, type TestApp } from "../../testing/harness.ts";
import { loadProject, scraperKey } from "../../testing/promapi-fixture.ts";
import type { Config } from "../config.ts";

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
  const keys = new Map<string, string>();
  for (const [id, n] of sizes) {
    const p = await t.seedProject(
      id,
      Array.from({ length: n }, (_, i) => `vm-${i + 1}`),
    );
    await loadProject(t, p.vms, endMs, 1);
    keys.set(id, await scraperKey(t, p));
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

  // Before any tenant query: the operator's own reads above were not charged to anyone.
  assert.deepEqual(
    all.projects.map((p) => p.queryCpuSeconds),
    [undefined, undefined, undefined],
  );

  // The big project asks 20 range queries over its 4 VMs, the small one 1 over its VM, the mid one none.
  const ask = async (id: string, times: number) => {
    for (let i = 0; i < times; i++) {
      const res = await fetch(`${t.baseUrl}/v1/monitoring/projects/${id}/prometheus/api/v1/query_range`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${keys.get(id)}`,
          "content-type": "application/x-www-form-urlencoded",
        },
        body: new URLSearchParams({
          query: 'sum by (vm_id) (rate({__name__=~"svc_vm_.+_total"}[5m]))',
          start: String((endMs - 1800 * S) / 1000),
          end: String(endMs / 1000),
          step: "30",
        }).toString(),
      });
      assert.equal(res.status, 200, await res.text());
    }
  };
  await ask("usage-big", 20);
  await ask("usage-small", 1);
  const byCpu = await t.admin.operations.listProjectUsage({ orderBy: "query_cpu_seconds" });
  assert.deepEqual(
    byCpu.projects.map((p) => p.project),
    ["projects/usage-big", "projects/usage-small", "projects/usage-mid"],
  );
  const [bigCpu, smallCpu, midCpu] = byCpu.projects.map((p) => p.queryCpuSeconds);
  assert.ok(bigCpu !== undefined && smallCpu !== undefined && bigCpu > smallCpu && smallCpu > 0, `${bigCpu}`);
  assert.equal(midCpu, undefined); // it ran no query: missing, not zero

  const top = await t.admin.operations.listProjectUsage({ pageSize: 2, orderBy: "samples_per_second" });
  assert.deepEqual(
    top.projects.map((p) => p.project),
    ["projects/usage-big", "projects/usage-mid"],
  );
  assert.equal(top.timeUnix, BigInt(endMs / 1000));

  await assert.rejects(t.admin.operations.listProjectUsage({ orderBy: "bytes" }), (e: unknown) => {
    assert.ok(e instanceof ConnectError);
    assert.equal(e.code, Code.InvalidArgument);
    assert.match(e.message, /orderBy: must be one of active_series, samples_per_second, query_cpu_seconds/);
    return true;
  });
}

/** `svc_project_usage_*` on /metrics with SVC_USAGE_TOP_K=2: name → project → value. */
async function scrapeUsage(t: TestApp): Promise<Map<string, Map<string, number>>> {
  const res = await fetch(`${t.baseUrl}/metrics`, { headers: { Authorization: `Bearer ${ADMIN_TOKEN}` } });
  assert.equal(res.status, 200);
  const out = new Map<string, Map<string, number>>();
  for (const m of (await res.text()).matchAll(/^(svc_project_usage_\w+)\{project="([^"]+)"\} (\S+)$/gm)) {
    const byProject = out.get(m[1]) ?? new Map<string, number>();
    byProject.set(m[2], Number(m[3]));
    out.set(m[1], byProject);
  }
  return out;
}

/** At most k = 2 series per figure, the two heaviest projects, with the RPC's figures. */
async function topKCase(t: TestApp, embedded: boolean): Promise<void> {
  const got = await scrapeUsage(t);
  const rpc = await t.admin.operations.listProjectUsage({});
  const fig = (id: string) => rpc.projects.find((p) => p.project === `projects/${id}`);
  assert.deepEqual(
    [...(got.get("svc_project_usage_active_series") ?? [])],
    [
      ["usage-big", Number(fig("usage-big")?.activeSeries)],
      ["usage-mid", Number(fig("usage-mid")?.activeSeries)],
    ],
  );
  assert.deepEqual(
    [...(got.get("svc_project_usage_samples_per_second")?.keys() ?? [])],
    ["usage-big", "usage-mid"],
  );
  // Only the two projects that queried; the mid one ran none and has no series.
  assert.deepEqual(
    [...(got.get("svc_project_usage_query_cpu_seconds")?.keys() ?? [])],
    ["usage-big", "usage-small"],
  );
  if (embedded)
    assert.deepEqual(
      [...(got.get("svc_project_usage_stored_bytes") ?? [])],
      [
        ["usage-big", Number(fig("usage-big")?.storedBytes)],
        ["usage-mid", Number(fig("usage-mid")?.storedBytes)],
      ],
    );
  else assert.equal(got.get("svc_project_usage_stored_bytes"), undefined);
}

/** Query CPU is over the last 5 minutes: 6 minutes later, no project has any left (last: moves the clock). */
async function cpuWindowCase(t: TestApp): Promise<void> {
  t.clock.ms += 360 * S;
  const later = await t.admin.operations.listProjectUsage({ orderBy: "query_cpu_seconds" });
  assert.ok(later.projects.length > 0 && later.projects.every((p) => p.queryCpuSeconds === undefined));
}

/** The embedded store: each project's chunk bytes, in the order of its size. */
async function storedBytesCase(t: TestApp): Promise<void> {
  const r = await t.admin.operations.listProjectUsage({ orderBy: "stored_bytes" });
  assert.deepEqual(r.unavailable, []);
  assert.deepEqual(
    r.projects.map((p) => p.project),
    ["projects/usage-big", "projects/usage-mid", "projects/usage-small"],
  );
  const [big, mid, small] = r.projects.map((p) => p.storedBytes ?? -1n);
  // 61 samples of each series: compressed, under 16 bytes a sample and more than none.
  const samples = 61n * r.projects[2].activeSeries;
  assert.ok(small > 0n && small < 16n * samples, `${small}`);
  assert.ok(big > mid && mid > small, `${big} ${mid} ${small}`);
  // The same figure the store gives (head and blocks), not an estimate of an estimate.
  const direct = t.app.tsdb.chunkBytesByLabel("project_id");
  assert.equal(big, BigInt(direct.get("usage-big") ?? 0));
}

describe("per-project usage for the operator", () => {
  for (const { dialect, skip } of dialects) {
    it(`embedded store (${dialect.name})`, { skip }, async () => {
      const t = await startTestApp(dialect, { usageTopK: 2 });
      try {
        await usageCase(t);
        await storedBytesCase(t);
        await topKCase(t, true);
        await cpuWindowCase(t);
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

  // The project list is the database's (either dialect); the figures are the engine's.
  for (const { dialect, skip } of dialects) {
    const skipRemote = skip ?? engineSkipReason("victoria-metrics");
    it(`remote backend (VictoriaMetrics, ${dialect.name})`, { skip: skipRemote }, async () => {
      const engine = await startEngine("victoria-metrics");
      const overrides: Partial<Config> = {
        metricsBackend: "remote",
        usageTopK: 2,
        remoteMetrics: { remoteWriteUrl: engine.remoteWriteUrl, queryUrl: engine.queryUrl, headers: {} },
      };
      const t = await startTestApp(dialect, overrides);
      try {
        await usageCase(t);
        await topKCase(t, false);
        // The engine's storage is not svc's to measure: said so, never 0.
        const r = await t.admin.operations.listProjectUsage({});
        assert.ok(r.projects.length === 3 && r.projects.every((p) => p.storedBytes === undefined));
        assert.deepEqual(r.unavailable, [
          "stored_bytes: not available from the engine (the remote backend's Prometheus API has no per-tenant storage size)",
        ]);
        await assert.rejects(
          t.admin.operations.listProjectUsage({ orderBy: "stored_bytes" }),
          (e: unknown) => {
            assert.ok(e instanceof ConnectError);
            assert.equal(e.code, Code.InvalidArgument);
            assert.match(e.message, /orderBy: stored_bytes: not available from the engine/);
            return true;
          },
        );
      } finally {
        await t.close();
        await engine.stop();
      }
    });
  }
});
