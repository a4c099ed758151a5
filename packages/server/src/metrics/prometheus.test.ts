import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import { pushAll, rwSeries } from "../../testing/remote-write.ts";
import { metricIds, vmSelector } from "./metric-ids.ts";

/**
 * A real Prometheus (Debian package `prometheus`) scrapes svc through discovery with the
 * configuration of docs/prometheus.md, and the three ways of serving metrics agree: QueryVMMonitoring,
 * svc's Prometheus-compatible query API and the scraped copy held by Prometheus.
 */
const [sqlite] = await testDialects();
const S = 1000;

function prometheusBinary(): string | undefined {
  try {
    execFileSync("prometheus", ["--version"], { stdio: "ignore" });
    return "prometheus";
  } catch {
    return undefined;
  }
}
const binary = prometheusBinary();
if (!binary && process.env.CI === "true") {
  throw new Error("CI=true but the Debian package prometheus is not installed (.ci/run installs it)");
}
const skip = binary ? undefined : "prometheus is not installed (apt-get install prometheus); skipped";

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const a = srv.address();
      const port = typeof a === "object" && a ? a.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** The YAML block of docs/prometheus.md, pointed at this svc and shortened to test intervals. */
function configFromDocs(baseUrl: string, projectId: string, tokenFile: string): string {
  const doc = readFileSync(join(import.meta.dirname, "../../../../docs/prometheus.md"), "utf8");
  const yaml = /```yaml\n([\s\S]*?)```/.exec(doc)?.[1];
  assert.ok(yaml, "docs/prometheus.md has a yaml block");
  const out = yaml
    .replaceAll("https://svc.example.com", baseUrl)
    .replaceAll("/projects/my-project/", `/projects/${projectId}/`)
    .replaceAll("/etc/prometheus/svc-token", tokenFile)
    .replace("scrape_interval: 60s", "scrape_interval: 1s")
    .replace("scrape_timeout: 10s", "scrape_timeout: 1s")
    .replace("refresh_interval: 5m", "refresh_interval: 1s");
  assert.notEqual(out, yaml);
  return out;
}

describe("a real Prometheus scraping svc", { skip }, () => {
  let t: TestApp;
  let p: SeededProject;
  let dir: string;
  let prom: ChildProcess | undefined;
  let promUrl: string;
  let key: string;
  let tick: NodeJS.Timeout;
  let promLog = "";

  before(async () => {
    t = await startTestApp(sqlite.dialect);
    // Prometheus runs on the wall clock, so svc's clock follows it.
    t.clock.ms = Date.now();
    tick = setInterval(() => {
      t.clock.ms = Date.now();
    }, 20);
    p = await t.seedProject("prom", ["vm-a", "vm-b", "vm-c"]);
    const created = await t.clients(p.owner.session).keys.createKey({
      parent: p.projectName,
      displayName: "scraper",
      capabilities: ["monitoring.read"],
      requestId: randomUUID(),
    });
    assert.ok(created.secret);
    key = created.secret;
    dir = mkdtempSync(join(tmpdir(), "svc-prom-"));
    const tokenFile = join(dir, "token");
    writeFileSync(tokenFile, key, { mode: 0o600 });
    writeFileSync(join(dir, "prometheus.yml"), configFromDocs(t.baseUrl, "prom", tokenFile));
    const port = await freePort();
    promUrl = `http://127.0.0.1:${port}`;
    prom = spawn(
      binary ?? "prometheus",
      [
        `--config.file=${join(dir, "prometheus.yml")}`,
        `--storage.tsdb.path=${join(dir, "data")}`,
        `--web.listen-address=127.0.0.1:${port}`,
        "--log.level=warn",
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    prom.stderr?.on("data", (d: Buffer) => {
      promLog = (promLog + d.toString()).slice(-4000);
    });
    await waitFor(async () => (await fetch(`${promUrl}/-/ready`).catch(() => undefined))?.ok === true);
  });

  after(async () => {
    clearInterval(tick);
    if (prom && prom.exitCode === null) {
      const exited = new Promise((r) => prom?.once("exit", r));
      prom.kill("SIGTERM");
      await exited;
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
    await t?.close();
  });

  async function waitFor(cond: () => Promise<boolean>, what = "condition", ms = 20_000): Promise<void> {
    const until = Date.now() + ms;
    while (Date.now() < until) {
      if (await cond()) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.fail(`timed out waiting for ${what}; prometheus said: ${promLog}`);
  }

  /** Raw samples Prometheus holds for a selector over the last `range`: [ms, value] per series. */
  async function promSamples(selector: string, range = "10m"): Promise<Map<string, [number, number][]>> {
    const u = new URL(`${promUrl}/api/v1/query`);
    u.searchParams.set("query", `${selector}[${range}]`);
    u.searchParams.set("time", String(Date.now() / 1000 + 1));
    const body = (await (await fetch(u)).json()) as {
      data: { result: { metric: Record<string, string>; values: [number, string][] }[] };
    };
    const out = new Map<string, [number, number][]>();
    for (const r of body.data.result)
      out.set(
        JSON.stringify(r.metric),
        r.values.map(([ts, v]) => [Math.round(ts * 1000), Number(v)]),
      );
    return out;
  }

  const hasSampleAt = async (selector: string, ms: number) => {
    for (const s of (await promSamples(selector)).values()) if (s.some(([ts]) => ts === ms)) return true;
    return false;
  };

  it("discovers all shards, scrapes them with the bearer key and keeps svc's timestamps, late ones too", async () => {
    await waitFor(async () => {
      const r = (await (await fetch(`${promUrl}/api/v1/targets`)).json()) as {
        data: { activeTargets: { health: string; labels: Record<string, string> }[] };
      };
      const up = r.data.activeTargets.filter((a) => a.health === "up");
      return up.length === 4;
    }, "4 healthy shard targets");
    // An odd millisecond proves the timestamp is svc's, not the scrape's.
    const vm = p.vms[1];
    const first = Date.now() - 20 * S + 123;
    await pushAll(t.baseUrl, t.app.config.collectorToken, [
      rwSeries("svc_vm_memory_free_bytes", { vm }, [[first, 1111]]),
      rwSeries("svc_vm_memory_total_bytes", { vm }, [[first, 4096]]),
    ]);
    await waitFor(() => hasSampleAt(`svc_vm_memory_free_bytes{vm="${vm}"}`, first), "the first sample");
    // The guest was offline: a buffered batch arrives later, older than now, newest at `late`.
    const late = Date.now() - 4 * S + 7;
    await pushAll(t.baseUrl, t.app.config.collectorToken, [
      rwSeries("svc_vm_memory_free_bytes", { vm }, [
        [late - 10 * S, 1200],
        [late, 1300],
      ]),
    ]);
    await waitFor(() => hasSampleAt(`svc_vm_memory_free_bytes{vm="${vm}"}`, late), "the late sample");
    const held = [...(await promSamples(`svc_vm_memory_free_bytes{vm="${vm}"}`)).values()][0];
    assert.deepEqual(
      held.filter(([ts]) => ts >= first),
      [
        [first, 1111],
        [late, 1300],
      ],
      "Prometheus holds exactly svc's samples at svc's times",
    );
    const info = await promSamples(`svc_vm_info{vm="${vm}"}`);
    assert.equal(info.size, 1);
    const labels = JSON.parse([...info.keys()][0]) as Record<string, string>;
    assert.equal(labels.monitoring_level, "BASELINE");
    assert.equal(labels.project_id, undefined);
  });

  it("agrees: QueryVMMonitoring = svc's PromQL API = the scraped copy", async () => {
    const vm = p.vms[0];
    const def = metricIds.get("cpu_utilization_pct");
    assert.ok(def);
    const step = 30;
    // Grid-aligned range; samples 123 ms off the grid, so no sample sits on a window edge (where
    // Prometheus 2.x and 3.x differ).
    const t0 = Math.floor((Date.now() - 230 * S) / (step * S)) * step * S;
    let counter = 5000;
    const n = 6;
    for (let i = 0; i <= n; i++) {
      const ts = t0 + i * step * S + 123;
      counter += (10 + i * 7) * 0.01 * step * 2; // (10 + 7i) % of 2 vCPUs
      await pushAll(t.baseUrl, t.app.config.collectorToken, [
        rwSeries("svc_vm_cpu_seconds_total", { vm }, [[ts, counter]]),
        rwSeries("svc_vm_vcpus", { vm }, [[ts, 2]]),
      ]);
      // Each sample is scraped before the next arrives (a scrape sees only the newest).
      await waitFor(() => hasSampleAt(`svc_vm_cpu_seconds_total{vm="${vm}"}`, ts), `cpu sample ${i}`);
    }
    // The point at t0 + k·step averages the window holding sample k − 1 (utilization from sample 1 on).
    const startS = t0 / S + 2 * step;
    const endS = t0 / S + (n + 1) * step;

    const rpc = await t.clients(key).monitoring.queryVMMonitoring({
      name: vm,
      metricIds: ["cpu_utilization_pct"],
      startTimeUnix: BigInt(startS),
      endTimeUnix: BigInt(endS + 1),
      stepSeconds: step,
    });
    assert.equal(rpc.endTimeUnix, BigInt(endS));
    const fromRpc = rpc.series[0].points.map((pt) => [Number(pt.timeUnix), pt.value]);
    assert.equal(fromRpc.length, n);

    const expr = def.promql(vmSelector(vm), step, 30);
    const rangeOf = async (base: string, auth: boolean) => {
      const u = new URL(`${base}/api/v1/query_range`);
      u.searchParams.set("query", expr);
      u.searchParams.set("start", String(startS));
      u.searchParams.set("end", String(endS));
      u.searchParams.set("step", String(step));
      const res = await fetch(u, auth ? { headers: { Authorization: `Bearer ${key}` } } : {});
      const body = (await res.json()) as { data: { result: { values: [number, string][] }[] } };
      assert.equal(body.data.result.length, 1, JSON.stringify(body));
      return body.data.result[0].values.map(([ts, v]) => [ts, Number(v)]);
    };
    const fromApi = await rangeOf(`${t.baseUrl}/v1/monitoring/projects/prom/prometheus`, true);
    const fromScrape = await rangeOf(promUrl, false);
    const close = (a: number[][], b: number[][], what: string) => {
      assert.deepEqual(
        a.map(([ts]) => ts),
        b.map(([ts]) => ts),
        what,
      );
      for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i][1] - b[i][1]) < 1e-9, `${what} @${a[i][0]}`);
    };
    close(fromRpc, fromApi, "RPC vs PromQL API");
    close(fromRpc, fromScrape, "RPC vs scraped copy");
    for (const [i, [, v]] of fromRpc.entries()) assert.ok(Math.abs(v - (10 + (i + 1) * 7)) < 1e-9);
  });
});
