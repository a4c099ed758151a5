import assert from "node:assert/strict";
import { request } from "node:http";
import { after, before, describe, it } from "node:test";
import { gunzipSync } from "node:zlib";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import { pushAll, rwSeries } from "../../testing/remote-write.ts";
import { labelsFromRecord, staleNaN } from "../storage/interface.ts";
import { expositionLabels, shardOf } from "./export.ts";

const [sqlite] = await testDialects();
const S = 1000;

describe("shardOf()", () => {
  it("is stable and spreads VMs over the shards", () => {
    const names = Array.from({ length: 400 }, (_, i) => `projects/p/locations/dc-1/vms/vm-${i}`);
    const counts = [0, 0, 0, 0];
    for (const n of names) {
      assert.equal(shardOf(n, 4), shardOf(n, 4));
      counts[shardOf(n, 4)]++;
    }
    for (const c of counts) assert.ok(c > 60, `uneven shards ${counts}`);
  });
});

describe("expositionLabels()", () => {
  it("escapes backslash, double quote and newline in values, and leaves the name and tenant out", () => {
    const labels = labelsFromRecord({
      __name__: "svc_vm_filesystem_used_bytes",
      project_id: "p",
      mountpoint: 'C:\\data "x"\nend',
      vm: "projects/p/locations/dc-1/vms/vm-1",
    });
    assert.equal(
      expositionLabels(labels),
      '{mountpoint="C:\\\\data \\"x\\"\\nend",vm="projects/p/locations/dc-1/vms/vm-1"}',
    );
    assert.equal(expositionLabels(labelsFromRecord({ __name__: "up", project_id: "p" })), "");
  });
});

describe("ListVMMonitoring (metrics), scrape discovery and export", () => {
  let t: TestApp;
  let p: SeededProject;
  let other: SeededProject;
  let nowMs: number;
  const vmIds = Array.from({ length: 12 }, (_, i) => `vm-${String(i).padStart(2, "0")}`);
  before(async () => {
    t = await startTestApp(sqlite.dialect);
    p = await t.seedProject("exp", vmIds);
    other = await t.seedProject("exp-other", ["vm-x"]);
    nowMs = t.clock.now();
    const series = [];
    // vm-00 .. vm-09 report; vm-10, vm-11 never do.
    for (const [k, vm] of p.vms.slice(0, 10).entries()) {
      const samples = (f: (i: number) => number) =>
        Array.from({ length: 5 }, (_, i) => [nowMs - (4 - i) * 30 * S, f(i)] as [number, number]);
      series.push(
        rwSeries(
          "svc_vm_cpu_seconds_total",
          { vm },
          samples((i) => 100 + i * 30 * ((k + 1) / 10) * 2),
        ),
        rwSeries(
          "svc_vm_memory_total_bytes",
          { vm },
          samples(() => 4096),
        ),
        rwSeries(
          "svc_vm_memory_free_bytes",
          { vm },
          samples(() => 1024 + k),
        ),
        rwSeries(
          "svc_vm_disk_read_bytes_total",
          { vm, device: "vda" },
          samples((i) => i * 10),
        ),
      );
    }
    await pushAll(t.baseUrl, t.app.config.collectorToken, series);
    // vm-09's disk series ended (staleness marker): it is not exported.
    const ended = rwSeries("svc_vm_disk_read_bytes_total", { vm: p.vms[9], device: "vda" }, []);
    await pushAll(t.baseUrl, t.app.config.collectorToken, [
      { labels: ended.labels, samples: [{ timestampMs: nowMs + 1, value: staleNaN() }] },
    ]);
    t.clock.advance(10 * S);
    await pushAll(t.baseUrl, t.app.config.collectorToken, [
      rwSeries("svc_vm_network_receive_bytes_total", { vm: other.vms[0], interface: "eth0" }, [[nowMs, 1]]),
    ]);
  });
  after(() => t?.close());

  it("lists latest CPU, memory and quality for a page in one store read; missing stays absent", async () => {
    const metrics = t.app.metrics;
    const original = metrics.latest;
    let calls = 0;
    (metrics as { latest: typeof original }).latest = (...a) => {
      calls++;
      return original(...a);
    };
    try {
      const res = await t.clients(p.owner.session).monitoring.listVMMonitoring({
        projectName: p.projectName,
        pageSize: 50,
      });
      assert.equal(calls, 1);
      assert.equal(res.vms.length, 12);
      const v3 = res.vms.find((v) => v.name.endsWith("vm-03"));
      assert.ok(v3);
      assert.equal(v3.monitoringLevel, "BASELINE");
      assert.ok(Math.abs((v3.cpuUtilizationPct ?? 0) - 40) < 1e-9, String(v3.cpuUtilizationPct));
      assert.equal(v3.memoryUsedBytes, 4096 - 1027);
      assert.equal(v3.memoryTotalBytes, 4096);
      assert.equal(v3.quality?.stale, false);
      assert.equal(v3.quality?.lastObservedUnix, BigInt(nowMs / S));
      const silent = res.vms.find((v) => v.name.endsWith("vm-11"));
      assert.ok(silent);
      assert.equal(silent.cpuUtilizationPct, undefined);
      assert.equal(silent.memoryUsedBytes, undefined);
      assert.equal(silent.quality?.stale, true);
      assert.equal(silent.quality?.lastObservedUnix, 0n);
    } finally {
      (metrics as { latest: typeof original }).latest = original;
    }
  });

  const get = (path: string, token = p.owner.session) =>
    fetch(`${t.baseUrl}${path}`, { headers: { Authorization: `Bearer ${token}` } });

  it("discovers a fixed list of shards with bearer auth", async () => {
    const res = await get("/v1/monitoring/projects/exp/scrape-targets");
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^application\/json/);
    const groups = (await res.json()) as { targets: string[]; labels: Record<string, string> }[];
    assert.equal(groups.length, 4);
    assert.deepEqual(
      groups.map((g) => g.labels.__param_shard),
      ["0", "1", "2", "3"],
    );
    assert.equal(groups[0].labels.__metrics_path__, "/v1/monitoring/projects/exp/export");
    assert.equal(groups[0].targets[0], new URL(t.baseUrl).host);
    assert.equal((await get("/v1/monitoring/projects/exp/scrape-targets", "nope")).status, 401);
    assert.equal((await get("/v1/monitoring/projects/exp-other/scrape-targets")).status, 403);
    assert.equal((await fetch(`${t.baseUrl}/v1/monitoring/projects/exp/export?shard=0`)).status, 401);
    assert.equal((await get("/v1/monitoring/projects/exp/export?shard=4")).status, 400);
  });

  it("exports every VM's newest samples exactly once across shards, with original timestamps", async () => {
    const bodies: string[] = [];
    for (let s = 0; s < 4; s++) {
      const res = await get(`/v1/monitoring/projects/exp/export?shard=${s}`);
      assert.equal(res.status, 200);
      assert.match(res.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
      bodies.push(await res.text());
    }
    const all = bodies.join("");
    assert.doesNotMatch(all, /project_id/);
    assert.doesNotMatch(all, /vm-x/);
    for (const [k, vm] of p.vms.entries()) {
      const shard = shardOf(vm, 4);
      const here = bodies[shard];
      assert.match(here, new RegExp(`svc_vm_info\\{[^}]*vm="${vm}"[^}]*\\} 1\\n`));
      if (k < 10) {
        const line = here
          .split("\n")
          .find((l) => l.startsWith("svc_vm_memory_free_bytes{") && l.includes(`vm="${vm}"`));
        assert.equal(line?.split(" ").slice(1).join(" "), `${1024 + k} ${nowMs}`);
      }
      for (let o = 0; o < 4; o++) if (o !== shard) assert.equal(bodies[o].includes(`vm="${vm}"`), false);
    }
    assert.match(all, /# HELP svc_vm_cpu_utilization_pct /);
    assert.match(all, /# TYPE svc_vm_cpu_seconds_total counter/);
    const diskLines = all.split("\n").filter((l) => l.startsWith("svc_vm_disk_read_bytes_total{"));
    assert.equal(diskLines.length, 9, "the ended series of vm-09 is not exported");
    // Outside the 5-minute window nothing but the inventory remains.
    t.clock.advance(6 * 60 * S);
    const later = await (
      await get(`/v1/monitoring/projects/exp/export?shard=${shardOf(p.vms[0], 4)}`)
    ).text();
    assert.doesNotMatch(later, /svc_vm_cpu_seconds_total\{/);
    assert.match(later, /svc_vm_info/);
    t.clock.advance(-6 * 60 * S);
  });

  it("answers a scraper that accepts gzip (as Prometheus does) compressed, the same text", async () => {
    /** Raw bytes and headers: fetch would decompress on its own. */
    const raw = (acceptEncoding?: string) =>
      new Promise<{ headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
        const u = new URL(`${t.baseUrl}/v1/monitoring/projects/exp/export?shard=${shardOf(p.vms[0], 4)}`);
        const headers: Record<string, string> = { authorization: `Bearer ${p.owner.session}` };
        if (acceptEncoding) headers["accept-encoding"] = acceptEncoding;
        request({ host: u.hostname, port: u.port, path: u.pathname + u.search, headers }, (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve({ headers: res.headers, body: Buffer.concat(chunks) }));
          res.on("error", reject);
        })
          .on("error", reject)
          .end();
      });
    const plain = await raw();
    assert.equal(plain.headers["content-encoding"], undefined);
    assert.match(plain.body.toString(), /svc_vm_info/);
    const gz = await raw("gzip");
    assert.equal(gz.headers["content-encoding"], "gzip");
    assert.equal(gz.headers.vary, "accept-encoding");
    assert.ok(gz.body.length < plain.body.length);
    assert.equal(gunzipSync(gz.body).toString(), plain.body.toString());
    // Refused by weight: identity.
    assert.equal((await raw("gzip;q=0")).headers["content-encoding"], undefined);
  });
});
