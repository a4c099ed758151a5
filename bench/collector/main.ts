/**
 * `npm run bench:collector [-- --quick]`: svc-collector's footprint against Debian's
 * prometheus-libvirt-exporter on the same host, same run, at the same interval, with `--guests N` tiny
 * guests (default 4; the collector test's guests, packages/collector/testing/libvirt-guest.ts):
 * 10 minutes at 30 s (`--quick`: 1 minute at 5 s, a smoke run whose figures mean little).
 *
 * - The collector is the built package's bundle (npm run build:collector) run by the Node.js on PATH as
 *   its /usr/bin/svc-collector wrapper runs it, sending to a receiver in this process that answers 204.
 * - The exporter is scraped by this process at the interval, as Prometheus would.
 * - Also: `virsh domstats --raw` run once per interval (the other way to read libvirt: a process per
 *   cycle), its CPU measured by the shell's `times`.
 *
 * Figures: CPU per domain per cycle (the process's user + system time after a warm-up interval, divided
 * by cycles × domains: idle time between cycles is part of the cost), RSS (median of samples every 2 s).
 * Needs root, libvirt + QEMU and prometheus-libvirt-exporter. Take figures on a quiet machine.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type Guest,
  libvirtUnavailable,
  sleep,
  startGuests,
  startLibvirt,
  stopLibvirt,
} from "../../packages/collector/testing/libvirt-guest.ts";
import { freePort } from "../../packages/server/src/net/free-port.ts";
// @ts-expect-error: a build script without type declarations
import { buildCollector } from "../../scripts/build-collector.mjs";
import { loadAverageLine, median, procCpuS, procRssKiB } from "../common/measure.ts";

const quick = process.argv.includes("--quick");
const intervalS = numberArg("--interval") ?? (quick ? 5 : 30);
const durationS = numberArg("--duration") ?? (quick ? 60 : 600);
const guestCount = numberArg("--guests") ?? 4;

const why = libvirtUnavailable();
if (why) {
  process.stderr.write(`bench:collector cannot run: ${why}\n`);
  process.exit(1);
}
if (spawnSync("sh", ["-c", "command -v prometheus-libvirt-exporter"]).status !== 0) {
  process.stderr.write("bench:collector needs apt-get install prometheus-libvirt-exporter\n");
  process.exit(1);
}

const work = mkdtempSync(join(tmpdir(), "svc-bench-collector-"));
await buildCollector();
const pkg = join(work, "pkg");
const deb = readFileSync(join(import.meta.dirname, "../../packages/collector/dist/SHA256SUMS"), "utf8").split(
  /\s+/,
)[1];
spawnSync("dpkg-deb", ["-x", join(import.meta.dirname, "../../packages/collector/dist", deb), pkg]);
const wrapper = readFileSync(join(pkg, "usr/bin/svc-collector"), "utf8");
const nodeArgs = (
  /exec node (.*) \/usr\/lib\/svc-collector\/svc-collector\.mjs/.exec(wrapper)?.[1] ?? ""
).split(" ");

await startLibvirt((l) => process.stdout.write(`${l}\n`));
const guests: Guest[] = [];
let stopped = false;
const cleanup = () => {
  if (stopped) return;
  stopped = true;
  for (const g of guests) g.remove();
  stopLibvirt();
  rmSync(work, { recursive: true, force: true });
};
process.on("SIGINT", () => {
  cleanup();
  process.exit(130);
});

try {
  process.stdout.write(`booting ${guestCount} guests…\n`);
  const tag = process.pid % 1000;
  guests.push(
    ...(await startGuests(
      Array.from({ length: guestCount }, (_, i) => ({
        name: `svc-bench-${tag}-${i}`,
        svcVm: `projects/bench/locations/dc-1/vms/g${i}`,
        tap: `svcbn${tag}x${i}`,
        burnAfterS: 1_000_000, // idle guests: the readers' cost, not the guests', is measured
        memoryMiB: 128,
      })),
    )),
  );

  // The receiver: svc's two endpoints, answering 204.
  let bodies = 0;
  const rx = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      bodies++;
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => rx.listen(0, "127.0.0.1", r));
  writeFileSync(join(work, "token"), "svcc_bench");
  const collector = spawn(
    process.execPath,
    [...nodeArgs, join(pkg, "usr/lib/svc-collector/svc-collector.mjs")],
    {
      env: {
        ...process.env,
        SVC_COLLECTOR_SERVER: `http://127.0.0.1:${(rx.address() as AddressInfo).port}`,
        SVC_COLLECTOR_TOKEN_FILE: join(work, "token"),
        SVC_COLLECTOR_SPOOL_DIR: join(work, "spool"),
        SVC_COLLECTOR_INTERVAL_SECONDS: String(intervalS),
        SVC_COLLECTOR_LOG_LEVEL: "warn",
      },
      stdio: ["ignore", "ignore", "inherit"],
    },
  );
  const port = await freePort("127.0.0.1");
  const exporter = spawn("prometheus-libvirt-exporter", [`--web.listen-address=127.0.0.1:${port}`], {
    stdio: ["ignore", "ignore", "ignore"],
  });
  // Scrapes counted when they start, as the collector's cycles are: a scrape started before the
  // measured window whose answer came in after its start (a loaded machine) is not the window's.
  let scrapes = 0;
  const scrape = async () => {
    const started = scrapes;
    scrapes++;
    const r = await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { "Accept-Encoding": "gzip" } });
    await r.arrayBuffer();
    if (r.status !== 200) process.stderr.write(`scrape ${started + 1}: exporter answered ${r.status}\n`);
  };
  const virshCycle = () => {
    const r = spawnSync("bash", ["-c", "virsh -c qemu:///system domstats --raw >/dev/null; times"], {
      encoding: "utf8",
    });
    // `times`: the shell's own, then its children's user and system time, e.g. "0m0.012s 0m0.004s".
    const line = r.stdout.trim().split("\n").at(-1) ?? "";
    return line
      .split(/\s+/)
      .map((t) => /(\d+)m([\d.]+)s/.exec(t))
      .reduce((a, m) => a + (m ? Number(m[1]) * 60 + Number(m[2]) : 0), 0);
  };
  await sleep(1000);
  const rss = { c: [] as number[], e: [] as number[] };
  const sampler = setInterval(() => {
    rss.c.push(procRssKiB(collector.pid!));
    rss.e.push(procRssKiB(exporter.pid!));
  }, 2000);
  let virshS = 0;
  let virshRuns = 0;
  const ticker = setInterval(() => {
    void scrape().catch((e) => process.stderr.write(`scrape: ${e}\n`));
    virshS += virshCycle();
    virshRuns++;
  }, intervalS * 1000);
  await scrape();
  // The first interval is warm-up (start-up, the first cycle, identity look-ups).
  await sleep(intervalS * 1000 + 500);
  const c0 = {
    c: procCpuS(collector.pid!),
    e: procCpuS(exporter.pid!),
    t: Date.now(),
    s: scrapes,
    v: virshS,
    vr: virshRuns,
  };
  rss.c.length = 0;
  rss.e.length = 0;
  await sleep(durationS * 1000);
  const c1 = {
    c: procCpuS(collector.pid!),
    e: procCpuS(exporter.pid!),
    t: Date.now(),
    s: scrapes,
    v: virshS,
    vr: virshRuns,
  };
  clearInterval(ticker);
  clearInterval(sampler);
  collector.kill("SIGTERM");
  exporter.kill("SIGTERM");
  rx.close();

  const cycles = Math.round((c1.t - c0.t) / 1000 / intervalS);
  const scrapesN = c1.s - c0.s;
  const per = (cpuS: number, n: number) => (cpuS * 1000) / n / guestCount;
  const cpu = {
    c: per(c1.c - c0.c, cycles),
    e: per(c1.e - c0.e, scrapesN),
    v: per(c1.v - c0.v, c1.vr - c0.vr),
  };
  const mem = { c: median(rss.c) / 1024, e: median(rss.e) / 1024 };
  const row = (name: string, a: string, b: string, ratio: number) =>
    `${name.padEnd(32)}${a.padStart(14)}${b.padStart(18)}${ratio.toFixed(2).padStart(10)}x\n`;
  process.stdout.write(
    `\nbench:collector: ${guestCount} guests, ${durationS} s at ${intervalS} s, node ${process.version}; ${bodies} bodies received\n` +
      `${"".padEnd(32)}${"svc-collector".padStart(14)}${"libvirt-exporter".padStart(18)}${"ratio".padStart(11)}\n` +
      row("cycles / scrapes measured", `${cycles}`, `${scrapesN}`, cycles / scrapesN) +
      row("CPU per domain per cycle (ms)", cpu.c.toFixed(2), cpu.e.toFixed(2), cpu.c / cpu.e) +
      row("RSS median (MiB)", mem.c.toFixed(1), mem.e.toFixed(1), mem.c / mem.e) +
      `virsh domstats --raw per cycle: ${cpu.v.toFixed(2)} ms CPU per domain (${(cpu.v * guestCount || 0).toFixed(1)} ms per call)\n` +
      `goals: CPU per domain <= 1.0x, RSS <= 2x the exporter's. Figures are only meaningful on a quiet machine.\n` +
      `${loadAverageLine()}\n`,
  );
} finally {
  cleanup();
}
process.exit(0);

function numberArg(name: string): number | undefined {
  const i = process.argv.indexOf(name);
  if (i < 0) return undefined;
  const n = Number(process.argv[i + 1]);
  if (!(n > 0)) throw new Error(`${name}: "${process.argv[i + 1]}" is not a positive number`);
  return n;
}
