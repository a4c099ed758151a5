/**
 * Real senders in the Debian 12 root the agent's life-cycle test builds (packages/agent/testing/
 * debian-root.ts, which installs Debian's prometheus-node-exporter, victoria-metrics (vmagent) and
 * prometheus in it): node_exporter, as Debian's package runs it (its user, its default collectors),
 * scraped by vmagent and then, separately, by `prometheus --enable-feature=agent`, each with
 * docs/agent.md's blocks as written (the token file put there by the docs' own command, at the docs'
 * path; only svc's address, node_exporter's port and a 5 s interval substituted), checked first by
 * `vmagent -dryRun` and `promtool check config --agent`, and run as the packages' users. svc's
 * QueryVMMonitoring and store then hold the guest's CPU, memory, filesystem, disk and network, each
 * within a stated tolerance of what /proc and `df` say in the root.
 *
 * Needs root, mmdebstrap, unshare and chroot: skipped with a message without them, failed under CI=true.
 * The root is built once per clone (.cache/debian-root/) and shared with the life-cycle test.
 */
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { DebianRoot, debianRootImage, debianRootUnavailable } from "../packages/agent/testing/debian-root.ts";
import { freePort } from "../packages/server/src/net/free-port.ts";
import { labelValue, type SeriesData } from "../packages/server/src/storage/interface.ts";
import { buildAgentPackage } from "../packages/server/testing/agent-package.ts";
import { testDialects } from "../packages/server/testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../packages/server/testing/harness.ts";

const unavailable = debianRootUnavailable();
if (unavailable && process.env.CI === "true") {
  it("node_exporter's real senders need the Debian 12 root in CI", () => {
    assert.fail(`cannot build the Debian 12 root: ${unavailable}`);
  });
}
const skip = unavailable ? `node_exporter's real senders run in a Debian 12 root: ${unavailable}` : false;
if (skip) process.stdout.write(`# skipped: ${skip}\n`);

const repoRoot = join(import.meta.dirname, "..");
const S = 1000;
const TOKEN = "/etc/svc-agent/token";

/** docs/agent.md's fenced block (`lang`) whose text starts with `start`. */
function docsBlock(lang: "yaml" | "sh", start: string): string {
  const doc = readFileSync(join(repoRoot, "docs", "agent.md"), "utf8");
  const block = [...doc.matchAll(new RegExp(`\`\`\`${lang}\\n([\\s\\S]*?)\`\`\``, "g"))]
    .map((m) => m[1]!)
    .find((b) => b.startsWith(start));
  assert.ok(block, `docs/agent.md has a ${lang} block starting "${start}"`);
  return block;
}

function localize(text: string, baseUrl: string, exporterPort: number): string {
  return text
    .replaceAll("https://svc.example.com", baseUrl)
    .replaceAll("127.0.0.1:9100", `127.0.0.1:${exporterPort}`)
    .replaceAll("scrape_interval: 30s", "scrape_interval: 5s");
}

/** What the root says now: /proc's files, `df` of /, and which block and network devices are virtual. */
interface RootView {
  stat: string;
  meminfo: string;
  diskstats: string;
  netdev: string;
  df: string;
  blockDevices: string[];
  virtualNics: string[];
}

async function view(root: DebianRoot): Promise<RootView> {
  const out = await root.sh(
    "cat /proc/stat; echo @@; cat /proc/meminfo; echo @@; cat /proc/diskstats; echo @@; cat /proc/net/dev; " +
      "echo @@; df -B1 --output=size,used,avail,pcent,target /; echo @@; ls /sys/block; echo @@; ls /sys/devices/virtual/net",
  );
  const [stat, meminfo, diskstats, netdev, df, block, virt] = out.split("@@\n");
  const words = (s: string | undefined) => (s ?? "").split(/\s+/).filter(Boolean);
  return {
    stat: stat!,
    meminfo: meminfo!,
    diskstats: diskstats!,
    netdev: netdev!,
    df: df!,
    blockDevices: words(block),
    virtualNics: words(virt),
  };
}

/** Busy CPU seconds (all modes but idle, iowait, steal) and the CPU count, from /proc/stat. */
function procCpu(stat: string): { busy: number; cpus: number } {
  const lines = stat.split("\n");
  const total = lines[0]!.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal
  const busy = (total[0]! + total[1]! + total[2]! + total[5]! + total[6]!) / 100;
  return { busy, cpus: lines.filter((l) => /^cpu\d+ /.test(l)).length };
}

function meminfo(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const l of text.split("\n")) {
    const m = /^(\w+):\s+(\d+) kB/.exec(l);
    if (m) out[m[1]!] = Number(m[2]) * 1024;
  }
  return out;
}

/** `df`'s numbers: Use% (rounded up, as df), size in bytes, mount point. */
function df(text: string): { pct: number; size: number; mount: string } {
  const [size, , , pct, mount] = text.trim().split("\n")[1]!.trim().split(/\s+/);
  return { pct: Number(pct!.replace("%", "")), size: Number(size), mount: mount! };
}

function diskstats(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const l of text.trim().split("\n")) {
    const f = l.trim().split(/\s+/);
    out.set(f[2]!, Number(f[5]) * 512); // sectors read × 512
  }
  return out;
}

function netdev(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const l of text.split("\n").slice(2)) {
    const m = /^\s*([^:]+):\s*(.*)$/.exec(l);
    if (m) out.set(m[1]!, Number(m[2]!.trim().split(/\s+/)[0])); // received bytes
  }
  return out;
}

describe("node_exporter through real remote-write senders in a Debian 12 root", { skip }, () => {
  let root: DebianRoot;
  let t: TestApp;
  let p: SeededProject;
  let exporterPort: number;
  const tokens: string[] = [];

  before(async () => {
    const { tar } = debianRootImage((line) => process.stdout.write(`# ${line}\n`));
    root = DebianRoot.extract(tar);
    const [sqlite] = await testDialects();
    t = await startTestApp(sqlite.dialect, { agentPackageDir: buildAgentPackage() }, { wallClock: true });
    p = await t.seedProject("nxp", ["via-vmagent", "via-prom", "other"]);
    for (const vm of p.vms) {
      const r = await t.clients(p.owner.session).monitoring.enableExpandedMonitoring({ name: vm });
      tokens.push(r.agentToken);
    }
    exporterPort = await freePort("127.0.0.1");
    // As Debian's unit runs it: its user, its default collectors (the docs' keep rule picks the series).
    const exporter = root.spawn(
      ["prometheus-node-exporter", `--web.listen-address=127.0.0.1:${exporterPort}`],
      { userspec: "prometheus:prometheus" },
    );
    await waitHttp(`http://127.0.0.1:${exporterPort}/metrics`, exporter);
  });
  after(async () => {
    await root?.close();
    await t?.close();
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

  /** The docs' token command, run as printed with the token typed at its prompt. */
  async function installToken(token: string, group: string): Promise<void> {
    const cmd = docsBlock("sh", "echo 'Paste the agent token").replace("-g prometheus", `-g ${group}`);
    const r = await root.run(["bash", "-c", cmd], { input: `${token}\n` });
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    assert.ok(!`${r.stdout}${r.stderr}`.includes(token), "the token is not echoed");
    assert.equal(readFileSync(root.path(TOKEN), "utf8"), token);
    assert.equal(await root.sh(`stat -c '%a %U:%G' ${TOKEN}`), `640 root:${group}\n`);
  }

  /** Waits (bounded, generous) until the VM's guest CPU series has `n` points after `fromMs`. */
  async function waitForScrapes(
    vm: string,
    fromMs: number,
    n: number,
    sender: ChildProcess,
    log: () => string,
  ) {
    const deadline = Date.now() + 120 * S;
    while (Date.now() < deadline) {
      if (sender.exitCode !== null) assert.fail(`the sender exited ${sender.exitCode}:\n${log()}`);
      const cpu = await read(vm, "svc_vm_guest_cpu_seconds_total", fromMs);
      // …and a 30 s step of QueryVMMonitoring (aligned to multiples of 30 s) ends after the first one.
      const first = cpu[0]?.timestamps[0] ?? Number.POSITIVE_INFINITY;
      if ((cpu[0]?.timestamps.length ?? 0) >= n && first <= Math.floor(Date.now() / 30_000) * 30_000) return;
      await new Promise((r) => setTimeout(r, 1000));
    }
    assert.fail(
      `fewer than ${n} scrapes of ${vm} (or none before a 30 s step) stored within 120 s:\n${log()}`,
    );
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

  /** The checks against /proc and df in the root, the same for every sender. */
  async function checkAgainstRoot(vm: string, fromMs: number): Promise<void> {
    const nowS = Math.floor(Date.now() / S);
    const v = await view(root);
    const host = procCpu(v.stat);
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
          Object.entries(labels ?? {}).every(([k, val]) => x.labels[k] === val),
      );
      assert.ok(s && s.points.length > 0, `QueryVMMonitoring has ${id} ${JSON.stringify(labels ?? {})}`);
      return s.points[s.points.length - 1]!.value;
    };
    // A point is its step's average: of n equal doubles it may differ from them in the last bits
    // (25276502016.000004 was seen), so "equal" is within a billionth.
    const sameValue = (got: number, want: number | undefined, what: string) =>
      assert.ok(
        want !== undefined && Math.abs(got - want) <= 1e-9 * Math.abs(want),
        `${what}: ${got} against ${want}`,
      );
    const mem = meminfo(v.meminfo);
    sameValue(latest("memory_total_bytes"), mem.MemTotal, "memory total");
    // Memory moves on a busy host: within 10 % of capacity of /proc/meminfo's MemTotal − MemFree now.
    const used = latest("memory_used_bytes");
    assert.ok(Math.abs(used - (mem.MemTotal! - mem.MemFree!)) <= 0.1 * mem.MemTotal!, `memory used ${used}`);
    assert.ok(Math.abs(latest("memory_available_bytes") - mem.MemAvailable!) <= 0.1 * mem.MemTotal!);

    // The root's / (a bind mount of its directory): node_exporter sees it at "/", as df does.
    const rootFs = df(v.df);
    assert.equal(rootFs.mount, "/");
    const fsLabels = { mountpoint: rootFs.mount };
    sameValue(latest("filesystem_size_bytes", fsLabels), rootFs.size, "size of /");
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
    const fstypes = (await read(vm, "svc_vm_filesystem_size_bytes", fromMs)).map((s) =>
      labelValue(s.labels, "fstype"),
    );
    assert.ok(
      !fstypes.some((f) => ["tmpfs", "proc", "sysfs", "overlay", "devtmpfs", "cgroup2"].includes(f)),
      `no pseudo filesystems: ${fstypes}`,
    );

    const disks = diskstats(v.diskstats);
    const storedDisks = await read(vm, "svc_vm_guest_disk_read_bytes_total", fromMs);
    const diskNames = storedDisks.map((s) => labelValue(s.labels, "device")).sort();
    const wholeDisks = v.blockDevices.filter(
      (d) => disks.has(d) && !/^(loop|ram|zram|dm-|md|nbd|sr|fd)/.test(d),
    );
    assert.deepEqual(diskNames, wholeDisks.sort(), "whole disks only, no loop/zram/partitions");
    for (const s of storedDisks) {
      const val = s.values[s.values.length - 1]!;
      const now = disks.get(labelValue(s.labels, "device"))!;
      // vmagent's own float parser can land one ulp off an exact integer (970839040.0000001 seen
      // for 9.7083904e+08), so "not ahead of /proc" allows the same 1e-9 as sameValue.
      assert.ok(
        val <= now * (1 + 1e-9) && now - val <= Math.max(0.05 * now, 256 * 1024 * 1024),
        `disk read ${val} against ${now}`,
      );
    }

    const nics = netdev(v.netdev);
    const stored = await read(vm, "svc_vm_guest_network_receive_bytes_total", fromMs);
    const names = stored.map((s) => labelValue(s.labels, "interface"));
    assert.ok(!names.includes("lo") && !names.some((n) => n.startsWith("ifb")), `no lo or ifb: ${names}`);
    for (const n of nics.keys()) {
      if (!v.virtualNics.includes(n)) assert.ok(names.includes(n), `physical ${n} stored`);
    }
    for (const s of stored) {
      const val = s.values[s.values.length - 1]!;
      const now = nics.get(labelValue(s.labels, "interface"));
      assert.ok(now !== undefined && val <= now * (1 + 1e-9), `rx ${val} ≤ /proc/net/dev ${now}`);
    }
  }

  it("vmagent: docs/agent.md's configuration passes -dryRun and feeds the VM", async () => {
    // Debian 12 ships vmagent in victoria-metrics, whose user it runs as here.
    await installToken(tokens[0]!, "_victoria-metrics");
    mkdirSync(root.path("/etc/vmagent"), { recursive: true });
    writeFileSync(
      root.path("/etc/vmagent/scrape.yml"),
      localize(docsBlock("yaml", "# vmagent -promscrape.config\n"), t.baseUrl, exporterPort),
    );
    const user = { userspec: "_victoria-metrics:_victoria-metrics" };
    const dry = await root.run(["vmagent", "-promscrape.config=/etc/vmagent/scrape.yml", "-dryRun"], user);
    assert.equal(dry.status, 0, `vmagent -dryRun:\n${dry.stdout}\n${dry.stderr}`);
    // The docs' command line as printed, then what a test adds: its own data directory, port and flush.
    const flags = localize(docsBlock("sh", "vmagent -promscrape.config="), t.baseUrl, exporterPort).trim();
    const from = Date.now();
    const vmagent = root.spawn(
      [
        "sh",
        "-c",
        `exec ${flags} -remoteWrite.tmpDataPath=/tmp/vmagent-data -remoteWrite.flushInterval=1s ` +
          `-httpListenAddr=127.0.0.1:${await freePort("127.0.0.1")}`,
      ],
      user,
    );
    const log = capture(vmagent);
    try {
      await waitForScrapes(p.vms[0]!, from, 3, vmagent, log);
      await checkAgainstRoot(p.vms[0]!, from);
      await checkSender(p.vms[0]!, "node_exporter via vmagent", from);
      assert.equal(
        (await read(p.vms[2]!, "svc_vm_guest_cpu_seconds_total", from)).length,
        0,
        "nothing for another VM",
      );
      assert.ok(!log().includes(tokens[0]!), "vmagent does not log the token");
    } finally {
      // Before the next test replaces the token file: vmagent re-reads it every second.
      await stop(root, vmagent);
    }
  });

  it("Prometheus in agent mode: docs/agent.md's configuration passes promtool and feeds the VM", async () => {
    await installToken(tokens[1]!, "prometheus");
    writeFileSync(
      root.path("/etc/prometheus/agent.yml"),
      localize(
        docsBlock("yaml", "# prometheus --enable-feature=agent --config.file\n"),
        t.baseUrl,
        exporterPort,
      ),
    );
    const user = { userspec: "prometheus:prometheus" };
    const check = await root.run(
      ["promtool", "check", "config", "--agent", "/etc/prometheus/agent.yml"],
      user,
    );
    assert.equal(check.status, 0, `promtool:\n${check.stdout}\n${check.stderr}`);
    const from = Date.now();
    const prom = root.spawn(
      [
        "prometheus",
        "--enable-feature=agent",
        "--config.file=/etc/prometheus/agent.yml",
        "--storage.agent.path=/tmp/prom-agent",
        `--web.listen-address=127.0.0.1:${await freePort("127.0.0.1")}`,
      ],
      user,
    );
    const log = capture(prom);
    await waitForScrapes(p.vms[1]!, from, 3, prom, log);
    await checkAgainstRoot(p.vms[1]!, from);
    await checkSender(p.vms[1]!, "node_exporter via Prometheus", from);
    assert.ok(!log().includes(tokens[1]!), "Prometheus does not log the token");
  });
});

/** The last 8 KiB of a process's stdout and stderr. */
function capture(child: ChildProcess): () => string {
  let log = "";
  const add = (d: Buffer) => {
    log = (log + String(d)).slice(-8192);
  };
  child.stdout?.on("data", add);
  child.stderr?.on("data", add);
  return () => log;
}

async function stop(root: DebianRoot, child: ChildProcess): Promise<void> {
  const exited = new Promise((r) => child.once("close", r));
  for (let i = 0; i < 50 && child.exitCode === null && child.signalCode === null; i++) {
    root.signal(child, "SIGTERM");
    if (await Promise.race([exited.then(() => true), new Promise((r) => setTimeout(() => r(false), 200))]))
      return;
  }
  root.signal(child, "SIGKILL");
  await exited;
}

async function waitHttp(url: string, child: ChildProcess): Promise<void> {
  const log = capture(child);
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) assert.fail(`${url}'s process exited:\n${log()}`);
    try {
      if ((await fetch(url)).ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`${url} did not answer within 30 s:\n${log()}`);
}
