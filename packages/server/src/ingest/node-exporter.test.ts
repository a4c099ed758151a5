import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { pushRemoteWrite } from "@svc/remotewrite";
import { generateSecret } from "../iam/secrets.ts";
import { freePort } from "../net/free-port.ts";
import { labelValue, type SeriesData } from "../storage/interface.ts";
import { buildAgentPackage } from "../testing/agent-package.ts";
import { testDialects } from "../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../testing/harness.ts";
import { rwSeries } from "../testing/remote-write.ts";

/**
 * Real senders: Debian's prometheus-node-exporter scraped by Debian's vmagent and, separately, by
 * Prometheus in agent mode, each with docs/agent.md's configuration as written (address, port, token
 * path and interval substituted) and a VM's guest-agent token. svc's RPC and store then hold the
 * host's CPU, memory, filesystem, disk and network within stated tolerances of /proc and df.
 */
const root = resolve(fileURLToPath(import.meta.url), "../../../../..");
const [sqlite] = await testDialects();
const S = 1000;

const missing = ["prometheus-node-exporter", "vmagent", "prometheus", "promtool"].filter(
  (b) => spawnSync("which", [b]).status !== 0,
);
if (missing.length > 0 && process.env.CI === "true")
  throw new Error(`CI=true but ${missing.join(", ")} missing`);
const skip =
  missing.length > 0 ? `${missing.join(", ")} not installed (apt-get install ...); skipped` : undefined;

/** docs/agent.md's block whose first line is `# <marker>`, without that line. */
function docsBlock(marker: string): string {
  const doc = readFileSync(join(root, "docs", "agent.md"), "utf8");
  const block = [...doc.matchAll(/```yaml\n([\s\S]*?)```/g)]
    .map((m) => m[1]!)
    .find((b) => b.startsWith(`# ${marker}\n`));
  assert.ok(block, `docs/agent.md has the block "# ${marker}"`);
  return block;
}

function localize(yaml: string, baseUrl: string, exporterPort: number, tokenFile: string): string {
  return yaml
    .replaceAll("https://svc.example.com", baseUrl)
    .replaceAll("127.0.0.1:9100", `127.0.0.1:${exporterPort}`)
    .replaceAll("/etc/svc-agent/token", tokenFile)
    .replaceAll("scrape_interval: 30s", "scrape_interval: 5s");
}

/** Busy CPU seconds (all modes but idle, iowait, steal) and the CPU count, from /proc/stat. */
function procCpu(): { busy: number; cpus: number } {
  const lines = readFileSync("/proc/stat", "utf8").split("\n");
  const total = lines[0]!.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal
  const busy = (total[0]! + total[1]! + total[2]! + total[5]! + total[6]!) / 100;
  return { busy, cpus: lines.filter((l) => /^cpu\d+ /.test(l)).length };
}

function meminfo(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const l of readFileSync("/proc/meminfo", "utf8").split("\n")) {
    const m = /^(\w+):\s+(\d+) kB/.exec(l);
    if (m) out[m[1]!] = Number(m[2]) * 1024;
  }
  return out;
}

/** `df`'s numbers for a path: Use% (rounded up, as df), size, used and available in bytes. */
function df(path: string): { pct: number; size: number; mount: string } {
  const out = execFileSync("df", ["-B1", "--output=size,used,avail,pcent,target", path], {
    encoding: "utf8",
  });
  const [size, , , pct, mount] = out.trim().split("\n")[1]!.trim().split(/\s+/);
  return { pct: Number(pct!.replace("%", "")), size: Number(size), mount: mount! };
}

/** /proc/diskstats' whole-disk read and written bytes, /proc/net/dev's bytes, by name. */
function diskstats(): Map<string, { read: number; written: number }> {
  const out = new Map<string, { read: number; written: number }>();
  for (const l of readFileSync("/proc/diskstats", "utf8").trim().split("\n")) {
    const f = l.trim().split(/\s+/);
    out.set(f[2]!, { read: Number(f[5]) * 512, written: Number(f[9]) * 512 });
  }
  return out;
}

function netdev(): Map<string, { rx: number; tx: number }> {
  const out = new Map<string, { rx: number; tx: number }>();
  for (const l of readFileSync("/proc/net/dev", "utf8").split("\n").slice(2)) {
    const m = /^\s*([^:]+):\s*(.*)$/.exec(l);
    if (!m) continue;
    const f = m[2]!.trim().split(/\s+/).map(Number);
    out.set(m[1]!, { rx: f[0]!, tx: f[8]! });
  }
  return out;
}

function start(cmd: string, args: string[]): ChildProcess {
  const p = spawn(cmd, args, { stdio: ["ignore", "ignore", "pipe"] });
  let err = "";
  p.stderr!.on("data", (d) => {
    err = (err + String(d)).slice(-4000);
  });
  p.on("exit", (code) => {
    if (code && code !== 0 && !p.killed) console.error(`${cmd} exited ${code}: ${err}`);
  });
  return p;
}

describe("node_exporter through real remote-write senders", { skip }, () => {
  let t: TestApp;
  let p: SeededProject;
  let dir: string;
  let exporterPort: number;
  const procs: ChildProcess[] = [];
  const tokens: string[] = [];
  before(async () => {
    t = await startTestApp(sqlite.dialect, { agentPackageDir: buildAgentPackage() }, { wallClock: true });
    p = await t.seedProject("nxp", ["via-vmagent", "via-prom", "other"]);
    for (const vm of p.vms) {
      const r = await t.clients(p.owner.session).monitoring.enableExpandedMonitoring({ name: vm });
      tokens.push(r.agentToken);
    }
    dir = mkdtempSync(join(tmpdir(), "svc-nx-"));
    exporterPort = await freePort("127.0.0.1");
    procs.push(
      start("prometheus-node-exporter", [
        `--web.listen-address=127.0.0.1:${exporterPort}`,
        "--collector.disable-defaults",
        ...["cpu", "meminfo", "filesystem", "diskstats", "netdev"].map((c) => `--collector.${c}`),
      ]),
    );
  });
  after(async () => {
    for (const c of procs) c.kill("SIGTERM");
    await t?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const read = (vm: string, name: string, fromMs: number): Promise<SeriesData[]> =>
    t.app.metrics.select(
      "nxp",
      [
        { type: "=", name: "__name__", value: name },
        { type: "=", name: "vm", value: vm },
      ],
      fromMs,
      Date.now(),
    );

  /** Waits (bounded, generous) until the VM's guest CPU series has `n` points after `fromMs`. */
  async function waitForScrapes(vm: string, fromMs: number, n: number): Promise<void> {
    const deadline = Date.now() + 120 * S;
    while (Date.now() < deadline) {
      const cpu = await read(vm, "svc_vm_guest_cpu_seconds_total", fromMs);
      // …and a 30 s step of QueryVMMonitoring (aligned to multiples of 30 s) ends after the first one.
      const first = cpu[0]?.timestamps[0] ?? Number.POSITIVE_INFINITY;
      if ((cpu[0]?.timestamps.length ?? 0) >= n && first <= Math.floor(Date.now() / 30_000) * 30_000) return;
      await new Promise((r) => setTimeout(r, 1000));
    }
    assert.fail(`fewer than ${n} scrapes of ${vm} (or none before a 30 s step) stored within 120 s`);
  }

  /** The VM's page names the sender and when svc last took its samples (docs/agent.md). */
  async function checkSender(vm: string, name: string, fromMs: number): Promise<void> {
    const list = await t.clients(p.owner.session).monitoring.listVMMonitoring({
      projectName: p.projectName,
      inventoryOnly: true,
    });
    const sender = list.vms.find((v) => v.name === vm)?.guestSender;
    assert.equal(sender?.name, name);
    const seen = Number(sender.lastSeenUnix) * S;
    assert.ok(seen >= fromMs - S && seen <= Date.now(), `last seen ${seen} after the sender started`);
  }

  /** The checks against /proc and df, the same for every sender. */
  async function checkAgainstHost(vm: string, fromMs: number): Promise<void> {
    const nowS = Math.floor(Date.now() / S);
    const host = procCpu();
    const cpu = (await read(vm, "svc_vm_guest_cpu_seconds_total", fromMs))[0]!;
    const lastT = cpu.timestamps[cpu.timestamps.length - 1]!;
    const last = cpu.values[cpu.values.length - 1]!;
    assert.equal(labelValue(cpu.labels, "source"), "guest_agent");
    assert.equal(labelValue(cpu.labels, "instance"), "", "the sender's instance label is not stored");
    // Busy seconds: what /proc/stat says now, less at most what every CPU could have run since the scrape.
    const lag = (Date.now() - lastT) / S;
    assert.ok(last <= host.busy + 1, `guest CPU ${last} s ≤ /proc/stat's ${host.busy} s`);
    assert.ok(
      host.busy - last <= host.cpus * (lag + 2),
      `guest CPU ${last} s within ${lag} s × ${host.cpus} CPUs of /proc/stat's ${host.busy} s`,
    );
    const vcpus = (await read(vm, "svc_vm_guest_vcpus", fromMs))[0]!;
    assert.equal(vcpus.values[vcpus.values.length - 1], host.cpus);

    const res = await t.clients(p.owner.session).monitoring.queryVMMonitoring({
      name: vm,
      metricIds: [
        "memory_total_bytes",
        "memory_used_bytes",
        "memory_available_bytes",
        "filesystem_size_bytes",
        "filesystem_used_bytes",
      ],
      startTimeUnix: BigInt(Math.floor(fromMs / S) - 30),
      endTimeUnix: BigInt(nowS),
      stepSeconds: 30,
    });
    const latest = (id: string, labels?: Record<string, string>) => {
      const s = res.series.find(
        (x) =>
          x.metricId === id &&
          x.source === "GUEST_AGENT" &&
          Object.entries(labels ?? {}).every(([k, v]) => x.labels[k] === v),
      );
      assert.ok(s && s.points.length > 0, `QueryVMMonitoring has ${id} ${JSON.stringify(labels ?? {})}`);
      return s.points[s.points.length - 1]!.value;
    };
    const mem = meminfo();
    assert.equal(latest("memory_total_bytes"), mem.MemTotal);
    // Memory moves on a busy host: within 10 % of capacity of /proc/meminfo's MemTotal − MemFree now.
    const used = latest("memory_used_bytes");
    assert.ok(Math.abs(used - (mem.MemTotal! - mem.MemFree!)) <= 0.1 * mem.MemTotal!, `memory used ${used}`);
    assert.ok(Math.abs(latest("memory_available_bytes") - mem.MemAvailable!) <= 0.1 * mem.MemTotal!);

    const rootFs = df("/");
    const fsLabels = { mountpoint: rootFs.mount };
    assert.equal(latest("filesystem_size_bytes", fsLabels), rootFs.size);
    const fsUsed = latest("filesystem_used_bytes", fsLabels);
    const avail = (await read(vm, "svc_vm_filesystem_avail_bytes", fromMs)).find(
      (s) => labelValue(s.labels, "mountpoint") === rootFs.mount,
    );
    assert.ok(avail, "available bytes of / are stored");
    const pct = (fsUsed / (fsUsed + avail.values[avail.values.length - 1]!)) * 100;
    // df rounds Use% up; files come and go on a shared host: within 1 point.
    assert.ok(
      Math.abs(Math.ceil(pct) - rootFs.pct) <= 1,
      `used ÷ (used + available) ${pct} % against df's ${rootFs.pct} %`,
    );
    const mounts = (await read(vm, "svc_vm_filesystem_size_bytes", fromMs)).map((s) =>
      labelValue(s.labels, "fstype"),
    );
    assert.ok(
      !mounts.some((f) => ["tmpfs", "proc", "sysfs", "overlay", "devtmpfs"].includes(f)),
      `no pseudo filesystems: ${mounts}`,
    );

    const disks = diskstats();
    const storedDisks = await read(vm, "svc_vm_guest_disk_read_bytes_total", fromMs);
    const diskNames = storedDisks.map((s) => labelValue(s.labels, "device")).sort();
    const wholeDisks = [...disks.keys()].filter(
      (d) => existsSync(`/sys/block/${d}`) && !/^(loop|ram|zram|dm-|md|nbd|sr|fd)/.test(d),
    );
    assert.deepEqual(diskNames, wholeDisks.sort(), "whole disks only, no loop/zram/partitions");
    for (const s of storedDisks) {
      const v = s.values[s.values.length - 1]!;
      const now = disks.get(labelValue(s.labels, "device"))!.read;
      assert.ok(
        v <= now && now - v <= Math.max(0.05 * now, 256 * 1024 * 1024),
        `disk read ${v} against ${now}`,
      );
    }

    const nics = netdev();
    const stored = await read(vm, "svc_vm_guest_network_receive_bytes_total", fromMs);
    const names = stored.map((s) => labelValue(s.labels, "interface"));
    assert.ok(!names.includes("lo") && !names.some((n) => n.startsWith("ifb")), `no lo or ifb: ${names}`);
    for (const n of nics.keys()) {
      if (!existsSync(`/sys/devices/virtual/net/${n}`)) assert.ok(names.includes(n), `physical ${n} stored`);
    }
    for (const s of stored) {
      const v = s.values[s.values.length - 1]!;
      const now = nics.get(labelValue(s.labels, "interface"))?.rx;
      assert.ok(now !== undefined && v <= now, `rx ${v} ≤ /proc/net/dev ${now}`);
    }
  }

  it("vmagent: docs/agent.md's configuration passes -dryRun and feeds the VM", async () => {
    const tokenFile = join(dir, "vmagent-token");
    writeFileSync(tokenFile, tokens[0]!, { mode: 0o600 });
    const cfg = join(dir, "scrape.yml");
    writeFileSync(cfg, localize(docsBlock("vmagent -promscrape.config"), t.baseUrl, exporterPort, tokenFile));
    execFileSync("vmagent", [`-promscrape.config=${cfg}`, "-dryRun"], { stdio: "pipe" });
    const from = Date.now();
    procs.push(
      start("vmagent", [
        `-promscrape.config=${cfg}`,
        `-remoteWrite.url=${t.baseUrl}/v1/ingest/prometheus/api/v1/write`,
        `-remoteWrite.bearerTokenFile=${tokenFile}`,
        `-remoteWrite.tmpDataPath=${join(dir, "vmagent-data")}`,
        `-httpListenAddr=127.0.0.1:${await freePort("127.0.0.1")}`,
        "-remoteWrite.flushInterval=1s",
      ]),
    );
    await waitForScrapes(p.vms[0]!, from, 3);
    await checkAgainstHost(p.vms[0]!, from);
    await checkSender(p.vms[0]!, "node_exporter via vmagent", from);
    assert.equal(
      (await read(p.vms[2]!, "svc_vm_guest_cpu_seconds_total", from)).length,
      0,
      "nothing for another VM",
    );
  });

  it("Prometheus in agent mode: docs/agent.md's configuration passes promtool and feeds the VM", async () => {
    const tokenFile = join(dir, "prom-token");
    writeFileSync(tokenFile, tokens[1]!, { mode: 0o600 });
    const cfg = join(dir, "agent.yml");
    writeFileSync(
      cfg,
      localize(
        docsBlock("prometheus --enable-feature=agent --config.file"),
        t.baseUrl,
        exporterPort,
        tokenFile,
      ),
    );
    execFileSync("promtool", ["check", "config", "--agent", cfg], { stdio: "pipe" });
    const from = Date.now();
    procs.push(
      start("prometheus", [
        "--enable-feature=agent",
        `--config.file=${cfg}`,
        `--storage.agent.path=${join(dir, "prom-data")}`,
        `--web.listen-address=127.0.0.1:${await freePort("127.0.0.1")}`,
      ]),
    );
    await waitForScrapes(p.vms[1]!, from, 3);
    await checkAgainstHost(p.vms[1]!, from);
    await checkSender(p.vms[1]!, "node_exporter via Prometheus", from);
  });

  it("refuses unknown series and exploding interfaces with reasons, stores the valid rest", async () => {
    const vm = p.vms[2]!;
    const now = Date.now();
    const url = `${t.baseUrl}/v1/ingest/prometheus/api/v1/write`;
    const nics = Array.from({ length: 40 }, (_, i) =>
      rwSeries("node_network_receive_bytes_total", { device: `eth${i}`, instance: "x:9100" }, [
        [now, 1000 + i],
      ]),
    );
    const res = await pushRemoteWrite(url, tokens[2]!, {
      timeseries: [
        rwSeries("node_memory_MemTotal_bytes", { instance: "elsewhere:9100", job: "node" }, [[now, 4096]]),
        rwSeries("node_memory_MemFree_bytes", { instance: "elsewhere:9100", job: "node" }, [[now, 1024]]),
        rwSeries("node_load1", { instance: "x:9100" }, [[now, 0.5]]),
        rwSeries("node_network_receive_bytes_total", { device: "lo" }, [[now, 5]]),
        // svc's own series beside node_exporter's, as svc's agent would send them.
        rwSeries("svc_vm_memory_cached_bytes", { vm }, [[now, 512]]),
        ...nics,
      ],
      metadata: [],
    });
    assert.equal(res.status, 400, res.body);
    assert.match(res.body, /unknown_metric: 1 series, 1 samples/);
    assert.match(res.body, /"node_load1" is not a svc VM metric/);
    assert.match(res.body, /too_many_series: 8 series/);
    assert.match(res.body, /more than 32 network devices from one VM/);
    assert.equal(
      (await read(vm, "svc_vm_memory_used_bytes", now - S))[0]?.values[0],
      3072,
      "the valid rest is stored, used derived",
    );
    assert.equal((await read(vm, "svc_vm_guest_network_receive_bytes_total", now - S)).length, 32);
    assert.equal((await read(vm, "svc_vm_memory_cached_bytes", now - S))[0]?.values[0], 512);
    assert.equal((await read(vm, "node_load1", now - S)).length, 0);
    // Another VM's token writes only its own VM: the memory above landed on the token's VM, never the other's.
    assert.equal(
      (await read(p.vms[0]!, "svc_vm_memory_total_bytes", now - S)).some((s) => s.values.includes(4096)),
      false,
    );
    const theirs = await pushRemoteWrite(url, tokens[2]!, {
      timeseries: [rwSeries("svc_vm_memory_total_bytes", { vm: p.vms[0]! }, [[now, 1]])],
      metadata: [],
    });
    assert.equal(theirs.status, 400);
    assert.match(theirs.body, /not_permitted: 1 series.*a guest agent writes only its own VM/);
    const stranger = generateSecret("agent");
    const unknown = await pushRemoteWrite(url, stranger, { timeseries: [], metadata: [] });
    assert.equal(unknown.status, 401);
    assert.match(unknown.body, /unknown or revoked/);
    assert.equal(unknown.body.includes(stranger), false, "the token is never echoed");
  });
});
