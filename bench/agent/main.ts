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
 * - The senders a guest may already run instead (docs/agent.md, "Use the agent you already run"), a row
 *   each in a second table: node_exporter + vmagent (a second node_exporter with the same collectors,
 *   scraped by Debian's vmagent with docs/agent.md's scrape configuration and its keep rule, remote-writing
 *   to the receiver), and the OpenTelemetry JS SDK with @opentelemetry/host-metrics exporting OTLP/HTTP
 *   protobuf with gzip (bench/agent/otel-host-metrics.mjs, run by node directly). Both at the same
 *   interval; their CPU and RSS are their processes' together.
 *
 * Figures: resident memory (median and peak of samples every 2 s), CPU per collection (the process's
 * user + system time between the end of the first interval and the end of the run, divided by the
 * collections in between: idle time between collections is part of the cost), bytes per collection
 * (remote-write or OTLP body as sent; the scrape's body gzip'd and plain, and the plain scrape cut to the
 * families that match the agent's series). Ratios are agent ÷ node_exporter in the first table, each
 * sender ÷ node_exporter alone in the second. `--duration S` and `--interval S` shorten a smoke run.
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
} from "../../packages/agent/testing/debian-root.ts";
import { vmagentScrapeYaml } from "../../packages/console/src/guest-sender-configs.ts";
import { freePort } from "../../packages/server/src/net/free-port.ts";
import { buildAgentPackage } from "../../packages/server/testing/agent-package.ts";
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

// Receiver: counts the bodies of each pusher (by path: vmagent's and the OpenTelemetry exporter's
// under their own prefixes, the agent's at its default write path).
const pushes: number[] = [];
const vmagentPushes: number[] = [];
const otelPushes: number[] = [];
const rx = createServer((req, res) => {
  let n = 0;
  req.on("data", (c: Buffer) => {
    n += c.length;
  });
  req.on("end", () => {
    const url = req.url ?? "";
    (url.startsWith("/vmagent/") ? vmagentPushes : url.startsWith("/otlp/") ? otelPushes : pushes).push(n);
    res.statusCode = url.startsWith("/otlp/") ? 200 : 204;
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

/** node_exporter with the collectors of the agent's families only, no exporter self-metrics. */
function startNodeExporter(port: number) {
  return spawn(
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
}
const port = await freePort("127.0.0.1");
const ne = startNodeExporter(port);

// node_exporter + vmagent: a second node_exporter, scraped by vmagent with docs/agent.md's scrape
// configuration (its keep rule) at the interval, remote-writing to the receiver with the token by file.
const vmagentBin = spawnSync("sh", ["-c", "command -v vmagent"], { encoding: "utf8" }).stdout.trim();
const pair = vmagentBin ? await startVmagentPair() : undefined;
if (!pair) process.stdout.write("no vmagent (apt-get install victoria-metrics): its row is left out\n");

async function startVmagentPair() {
  const nePort = await freePort("127.0.0.1");
  const exporter2 = startNodeExporter(nePort);
  const cfg = join(work, "scrape.yml");
  const httpPort = await freePort("127.0.0.1");
  writeFileSync(
    cfg,
    vmagentScrapeYaml()
      .replace("127.0.0.1:9100", `127.0.0.1:${nePort}`)
      .replace("scrape_interval: 30s", `scrape_interval: ${intervalS}s`),
  );
  const vmagent = spawn(
    vmagentBin,
    [
      `-promscrape.config=${cfg}`,
      `-remoteWrite.url=${rxUrl}/vmagent/api/v1/write`,
      `-remoteWrite.bearerTokenFile=${join(work, "token")}`,
      `-remoteWrite.tmpDataPath=${join(work, "vmagent-data")}`,
      `-httpListenAddr=127.0.0.1:${httpPort}`,
      "-loggerLevel=ERROR",
    ],
    { stdio: ["ignore", "ignore", "inherit"] },
  );
  // Debian's build prints no version of its own: the package's.
  const v = spawnSync("dpkg-query", ["-W", "-f", "$" + "{Version}", "victoria-metrics"], {
    encoding: "utf8",
  });
  const version = `vmagent of victoria-metrics ${v.status === 0 ? v.stdout : "(not from a Debian package)"}`;
  /** vmagent's successful scrapes so far (its own counter: a scrape may go out in more than one push). */
  const scrapesDone = async (): Promise<number> => {
    const text = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
    return Number(/^vm_promscrape_scrapes_total\{status_code="200"\} (\d+)$/m.exec(text)?.[1] ?? Number.NaN);
  };
  return { exporter: exporter2, vmagent, version, scrapesDone };
}

// The OpenTelemetry JS SDK with @opentelemetry/host-metrics, exporting OTLP/HTTP protobuf at the interval.
const otel = spawn(
  "node",
  [
    join(import.meta.dirname, "otel-host-metrics.mjs"),
    `${rxUrl}/otlp/v1/metrics`,
    join(work, "token"),
    String(intervalS * 1000),
  ],
  { stdio: ["ignore", "ignore", "inherit"] },
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

// Every child ends with this process, however it ends (a failed sampler included).
const children = [ne, otel, ...(pair ? [pair.exporter, pair.vmagent] : [])];
let stopping = false;
process.on("exit", () => {
  for (const c of children) c.kill("SIGTERM");
  if (stopping) return;
  try {
    process.kill(agent.pid, "SIGTERM");
  } catch {}
});
for (const [name, c] of [
  ["node_exporter", ne],
  ["the OpenTelemetry exporter", otel],
  ["vmagent", pair?.vmagent],
] as const) {
  c?.on("exit", (code, signal) => {
    if (!stopping) {
      process.stderr.write(`bench:agent: ${name} exited (${code ?? signal}) before the end\n`);
      process.exit(1);
    }
  });
}

const rss = { agent: [] as number[], ne: [] as number[], pair: [] as number[], otel: [] as number[] };
const sampler = setInterval(() => {
  rss.agent.push(rssKiB(agent.pid));
  rss.ne.push(rssKiB(ne.pid!));
  if (pair) rss.pair.push(rssKiB(pair.exporter.pid!) + rssKiB(pair.vmagent.pid!));
  rss.otel.push(rssKiB(otel.pid!));
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
const cpuNow = async () => ({
  agent: cpuS(agent.pid),
  ne: cpuS(ne.pid!),
  pair: pair ? cpuS(pair.exporter.pid!) + cpuS(pair.vmagent.pid!) : 0,
  otel: cpuS(otel.pid!),
  pushes: pushes.length,
  scrapes: scrapes.length,
  vmagentPushes: vmagentPushes.length,
  vmagentScrapes: pair ? await pair.scrapesDone() : 0,
  otelPushes: otelPushes.length,
});
const cpu0 = await cpuNow();
for (const l of Object.values(rss)) l.length = 0;
await sleep(durationS * 1000);
const cpu1 = await cpuNow();
clearInterval(scraper);
clearInterval(sampler);
stopping = true;
await agent.stop();
ne.kill("SIGTERM");
pair?.vmagent.kill("SIGTERM");
pair?.exporter.kill("SIGTERM");
otel.kill("SIGTERM");
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
    `goals: CPU per collection <= 1.0x, RSS <= 2x node_exporter, package <= 5 MB\n`,
);

// The senders a guest may already run instead, one row each, beside the two above (ratios to
// node_exporter alone, the scraped reference): CPU and RSS are the sender's processes together.
const sender = (
  name: string,
  cpuMs: number,
  n: number,
  med: number,
  peak: number,
  bytes: number,
  wire: string,
) =>
  `${name.padEnd(34)}${`${n}`.padStart(6)}${cpuMs.toFixed(1).padStart(9)}${(cpuMs / cpuPer.ne).toFixed(2).padStart(7)}x` +
  `${med.toFixed(1).padStart(9)}${(med / rssMed.ne).toFixed(2).padStart(7)}x${peak.toFixed(1).padStart(9)}` +
  `${`${Math.round(bytes)}`.padStart(9)} ${wire}\n`;
const pairN = cpu1.vmagentScrapes - cpu0.vmagentScrapes;
const sum = (l: number[]) => l.reduce((a, b) => a + b, 0);
const otelN = cpu1.otelPushes - cpu0.otelPushes;
const mib = (l: number[]) => ({ med: median(l) / 1024, peak: Math.max(...l) / 1024 });
process.stdout.write(
  `\n${"sender".padEnd(34)}${"n".padStart(6)}${"CPU ms".padStart(9)}${"÷ne".padStart(8)}${"RSS MiB".padStart(9)}` +
    `${"÷ne".padStart(8)}${"peak".padStart(9)}${"bytes".padStart(9)} per collection on the wire\n` +
    sender(
      "svc-agent",
      cpuPer.agent,
      collections.agent,
      rssMed.agent,
      rssMax.agent,
      agentBytes,
      "remote write, snappy",
    ) +
    sender(
      "node_exporter alone (scraped)",
      cpuPer.ne,
      collections.ne,
      rssMed.ne,
      rssMax.ne,
      neGzip,
      "scrape, gzip",
    ) +
    (pair
      ? sender(
          "node_exporter + vmagent",
          ((cpu1.pair - cpu0.pair) / pairN) * 1000,
          pairN,
          mib(rss.pair).med,
          mib(rss.pair).peak,
          sum(vmagentPushes.slice(cpu0.vmagentPushes, cpu1.vmagentPushes)) / pairN,
          `remote write, snappy (docs/agent.md's keep rule; ${pair.version})`,
        )
      : "") +
    sender(
      "OpenTelemetry JS host-metrics",
      ((cpu1.otel - cpu0.otel) / otelN) * 1000,
      otelN,
      mib(rss.otel).med,
      mib(rss.otel).peak,
      median(otelPushes.slice(cpu0.otelPushes)),
      `OTLP protobuf, gzip (${otelVersions()}; CPU, memory, network and process metrics only)`,
    ) +
    `n = collections measured; ÷ne = ratio to node_exporter alone; ${loadAverageLine()}\n`,
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

/** The OpenTelemetry packages' versions, from their package.json. */
function otelVersions(): string {
  return ["sdk-metrics", "host-metrics", "exporter-metrics-otlp-proto"]
    .map((p) => {
      const pkg = join(import.meta.dirname, "../../node_modules/@opentelemetry", p, "package.json");
      return `${p} ${(JSON.parse(readFileSync(pkg, "utf8")) as { version: string }).version}`;
    })
    .join(", ");
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
