/**
 * `npm run bench:agent [-- --quick]`: the guest agent's footprint against Prometheus's node_exporter
 * (Debian's prometheus-node-exporter), both collecting on this machine at the same interval for the same
 * time: 10 minutes at 30 s (`--quick`: 2 minutes at 10 s).
 *
 * - The agent is the built package's bundle (npm run build:agent), run as its /usr/bin/svc-agent wrapper
 *   runs it (same node flags), by the Node.js on PATH, pushing to a receiver in this process that
 *   answers 204 and counts the bodies. `--debian-root`: the package installed in the life-cycle test's
 *   Debian 12 root and run there by Debian's Node.js 18 (needs root and mmdebstrap).
 * - node_exporter runs the collectors of the agent's families only (meminfo, filesystem, cpu,
 *   diskstats, netdev; no exporter self-metrics), scraped by this process at the interval with
 *   `Accept-Encoding: gzip`, as Prometheus scrapes.
 *
 * Figures: resident memory (median and peak of samples every 2 s), CPU per collection (the process's
 * user + system time between the end of the first interval and the end of the run, divided by the
 * collections in between: idle time between collections is part of the cost), bytes per collection
 * (remote-write body, snappy; the scrape's body gzip'd and plain, and the plain scrape cut to the
 * families that match the agent's series). Ratios are agent ÷ node_exporter.
 */
import { spawn, spawnSync } from "node:child_process";
import {
  copyFileSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import {
  DebianRoot,
  debianRootImage,
  debianRootUnavailable,
} from "../../packages/agent/src/testing/debian-root.ts";
import { freePort } from "../../packages/server/src/net/free-port.ts";
import { buildAgentPackage } from "../../packages/server/src/testing/agent-package.ts";
import { procCpuS as cpuS, loadAverageLine, median, procRssKiB as rssKiB } from "../common/measure.ts";

const quick = process.argv.includes("--quick");
const intervalS = numberArg("--interval") ?? (quick ? 10 : 30);
const durationS = numberArg("--duration") ?? (quick ? 120 : 600);

const exporter = spawnSync("sh", ["-c", "command -v prometheus-node-exporter"], { encoding: "utf8" });
if (exporter.status !== 0) {
  process.stderr.write("bench:agent needs node_exporter: apt-get install prometheus-node-exporter\n");
  process.exit(1);
}

const work = mkdtempSync(join(tmpdir(), "svc-bench-agent-"));
const dist = buildAgentPackage();
const deb = join(dist, readdirSync(dist).find((f) => f.endsWith(".deb"))!);
spawnSync("dpkg-deb", ["-x", deb, join(work, "pkg")]);
const wrapper = readFileSync(join(work, "pkg/usr/bin/svc-agent"), "utf8");
// The wrapper's `exec node <flags> /usr/lib/svc-agent/svc-agent.mjs`, with the bundle's path here.
const nodeArgs = (
  stringArg("--node-flags") ?? /exec node (.*) \/usr\/lib\/svc-agent\/svc-agent\.mjs/.exec(wrapper)![1]
)
  .split(" ")
  .filter(Boolean);
const bundle = join(work, "pkg/usr/lib/svc-agent/svc-agent.mjs");

// Receiver: counts the agent's remote-write bodies.
const pushes: number[] = [];
const rx = createServer((req, res) => {
  let n = 0;
  req.on("data", (c: Buffer) => {
    n += c.length;
  });
  req.on("end", () => {
    pushes.push(n);
    res.statusCode = 204;
    res.end();
  });
});
await new Promise<void>((r) => rx.listen(0, "127.0.0.1", r));
const rxUrl = `http://127.0.0.1:${(rx.address() as AddressInfo).port}`;
writeFileSync(join(work, "token"), "svca_bench-token", { mode: 0o600 });

const agentArgs = [
  "--server",
  rxUrl,
  "--vm",
  "projects/bench/locations/dc-1/vms/vm-1",
  "--interval",
  `${intervalS}s`,
  "--log-level",
  "warn",
];
const agent = process.argv.includes("--debian-root") ? await agentInRoot() : agentHere();

/** The bundle run by the Node.js on PATH, with the wrapper's flags. */
function agentHere(): { pid: number; node: string; stop(): void } {
  const child = spawn(
    "node",
    [
      ...nodeArgs,
      bundle,
      ...agentArgs,
      "--token-file",
      join(work, "token"),
      "--spool-dir",
      join(work, "spool"),
    ],
    { stdio: ["ignore", "ignore", "inherit"] },
  );
  const node = spawnSync("node", ["--version"], { encoding: "utf8" }).stdout.trim();
  return { pid: child.pid!, node, stop: () => child.kill("SIGTERM") };
}

/**
 * `--debian-root`: the package installed in the Debian 12 root of the life-cycle test, run there by
 * Debian's Node.js 18 through /usr/bin/svc-agent as the svc-agent user (what a customer's guest runs).
 */
async function agentInRoot(): Promise<{ pid: number; node: string; stop(): Promise<void> }> {
  const unavailable = debianRootUnavailable();
  if (unavailable) throw new Error(`--debian-root: ${unavailable}`);
  const root = DebianRoot.extract(debianRootImage((l) => process.stdout.write(`${l}\n`)).tar);
  copyFileSync(deb, root.path("/tmp/svc-agent.deb"));
  await root.sh("apt-get install -y /tmp/svc-agent.deb >/dev/null");
  await root.sh(
    "printf svca_bench-token > /etc/svc-agent/token && chown root:svc-agent /etc/svc-agent/token",
  );
  const child = root.spawn(["/usr/bin/svc-agent", ...agentArgs, "--token-file", "/etc/svc-agent/token"], {
    userspec: "svc-agent:svc-agent",
  });
  child.stderr?.pipe(process.stderr);
  let pid = 0;
  // unshare's child execs into node; wait until it has.
  for (let i = 0; i < 100 && !pid; i++) {
    await sleep(100);
    const inner = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, "utf8").trim();
    if (inner && readFileSync(`/proc/${inner}/comm`, "utf8").trim() === "node") pid = Number(inner);
  }
  if (!pid) throw new Error("the agent did not start in the root");
  const node = (await root.sh("node --version")).trim();
  return {
    pid,
    node: `${node} (Debian 12)`,
    stop: async () => {
      root.signal(child, "SIGTERM");
      await root.close();
    },
  };
}

const port = await freePort("127.0.0.1");
const ne = spawn(
  exporter.stdout.trim(),
  [
    `--web.listen-address=127.0.0.1:${port}`,
    "--collector.disable-defaults",
    "--collector.meminfo",
    "--collector.filesystem",
    "--collector.cpu",
    "--collector.diskstats",
    "--collector.netdev",
    "--web.disable-exporter-metrics",
  ],
  { stdio: ["ignore", "ignore", "ignore"] },
);
const neVersionRun = spawnSync(exporter.stdout.trim(), ["--version"], { encoding: "utf8" });
const neVersion = (neVersionRun.stdout || neVersionRun.stderr).split("\n")[0].trim();

const scrapes: { gzip: number; plain: number; matching: number }[] = [];
async function scrape(): Promise<void> {
  const r = await fetch(`http://127.0.0.1:${port}/metrics`, {
    headers: { "Accept-Encoding": "gzip", Accept: "text/plain;version=0.0.4" },
  });
  if (r.status !== 200) throw new Error(`node_exporter answered ${r.status}`);
  // fetch decodes gzip transparently; the wire size is the body re-compressed the same way.
  const text = Buffer.from(await r.arrayBuffer());
  scrapes.push({
    gzip: gzipSync(text).length,
    plain: text.length,
    matching: matchingFamilies(text.toString()).length,
  });
}

const rss = { agent: [] as number[], ne: [] as number[] };
const sampler = setInterval(() => {
  rss.agent.push(rssKiB(agent.pid));
  rss.ne.push(rssKiB(ne.pid!));
}, 2000);

process.stdout.write(
  `bench:agent: ${durationS} s at ${intervalS} s; agent on node ${agent.node} (${nodeArgs.join(" ")}), ${neVersion}\n`,
);
await waitHttp(`http://127.0.0.1:${port}/metrics`);
// The first interval is warm-up (start-up, first collection); counting starts after it.
const scraper = setInterval(
  () => void scrape().catch((e) => process.stderr.write(`scrape: ${e}\n`)),
  intervalS * 1000,
);
await scrape();
await sleep(intervalS * 1000 - 1000);
const cpu0 = { agent: cpuS(agent.pid), ne: cpuS(ne.pid!), pushes: pushes.length, scrapes: scrapes.length };
rss.agent.length = 0;
rss.ne.length = 0;
await sleep(durationS * 1000);
const cpu1 = { agent: cpuS(agent.pid), ne: cpuS(ne.pid!), pushes: pushes.length, scrapes: scrapes.length };
clearInterval(scraper);
clearInterval(sampler);
await agent.stop();
ne.kill("SIGTERM");
rx.close();

const collections = { agent: cpu1.pushes - cpu0.pushes, ne: cpu1.scrapes - cpu0.scrapes };
const cpuPer = {
  agent: ((cpu1.agent - cpu0.agent) / collections.agent) * 1000,
  ne: ((cpu1.ne - cpu0.ne) / collections.ne) * 1000,
};
const rssMed = { agent: median(rss.agent) / 1024, ne: median(rss.ne) / 1024 };
const rssMax = { agent: Math.max(...rss.agent) / 1024, ne: Math.max(...rss.ne) / 1024 };
const agentBytes = median(pushes.slice(cpu0.pushes));
const sc = scrapes.slice(cpu0.scrapes);
const neGzip = median(sc.map((s) => s.gzip));
const nePlain = median(sc.map((s) => s.plain));
const neMatching = median(sc.map((s) => s.matching));
const debKiB = statSync(deb).size / 1024;

const row = (name: string, a: string, n: string, ratio: number) =>
  `${name.padEnd(34)}${a.padStart(14)}${n.padStart(16)}${ratio.toFixed(2).padStart(10)}x\n`;
process.stdout.write(
  `\n${"".padEnd(34)}${"svc-agent".padStart(14)}${"node_exporter".padStart(16)}${"ratio".padStart(11)}\n` +
    row(
      "collections measured",
      `${collections.agent}`,
      `${collections.ne}`,
      collections.agent / collections.ne,
    ) +
    row("CPU per collection (ms)", cpuPer.agent.toFixed(1), cpuPer.ne.toFixed(1), cpuPer.agent / cpuPer.ne) +
    row("RSS median (MiB)", rssMed.agent.toFixed(1), rssMed.ne.toFixed(1), rssMed.agent / rssMed.ne) +
    row("RSS peak (MiB)", rssMax.agent.toFixed(1), rssMax.ne.toFixed(1), rssMax.agent / rssMax.ne) +
    row("bytes per collection (wire)", `${agentBytes}`, `${neGzip} gz`, agentBytes / neGzip) +
    row("  vs the plain scrape", `${agentBytes}`, `${nePlain}`, agentBytes / nePlain) +
    row("  vs its matching families, plain", `${agentBytes}`, `${neMatching}`, agentBytes / neMatching) +
    `package: ${debKiB.toFixed(0)} KiB (.deb); node_exporter: ${installedSize("prometheus-node-exporter")}\n` +
    `goals: CPU per collection <= 1.0x, RSS <= 2x node_exporter, package <= 5 MB\n${loadAverageLine()}\n`,
);
rmSync(work, { recursive: true, force: true });
process.exit(0);

/** `--name value`: experiments with other intervals, durations and node flags than the package's. */
function stringArg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i < 0 ? undefined : process.argv[i + 1];
}

function numberArg(name: string): number | undefined {
  const v = stringArg(name);
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!(n > 0)) throw new Error(`${name}: "${v}" is not a positive number of seconds`);
  return n;
}

/** The exposition lines of the node_exporter families that match the agent's series. */
function matchingFamilies(text: string): string {
  const re =
    /^node_(memory_(MemTotal|MemFree|MemAvailable|Buffers|Cached)_bytes|filesystem_(size|free)_bytes|cpu_seconds_total|disk_(read_bytes|written_bytes|reads_completed|writes_completed)_total|network_(receive|transmit)_(bytes|packets)_total)\{/;
  return text
    .split("\n")
    .filter((l) => re.test(l))
    .join("\n");
}

function installedSize(pkg: string): string {
  const r = spawnSync("dpkg-query", ["-W", "-f", "$" + "{Installed-Size}", pkg], { encoding: "utf8" });
  return r.status === 0 ? `${(Number(r.stdout) / 1024).toFixed(1)} MiB installed` : "not installed";
}

async function waitHttp(url: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {}
    await sleep(100);
  }
  throw new Error(`${url} did not answer`);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
