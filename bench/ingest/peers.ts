/** Peer targets: Debian's prometheus and victoria-metrics, started on loopback with temp storage. */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pushRemoteWrite } from "@svc/remotewrite";
import { duBytes, type TargetResult } from "./svc.ts";
import { bodiesFor, type Workload } from "./workload.ts";

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

async function waitReady(url: string, p: ChildProcess, log: () => string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (p.exitCode !== null) throw new Error(`peer exited: ${log().slice(-2000)}`);
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`peer not ready at ${url}`);
}

interface PeerSpec {
  name: string;
  args: (dir: string, port: number) => { bin: string; argv: string[] };
  ready: string;
  write: string;
  flush?: string;
}

export const peers: PeerSpec[] = [
  {
    name: "prometheus",
    args: (dir, port) => {
      writeFileSync(join(dir, "prometheus.yml"), "global:\n  scrape_interval: 30s\n");
      return {
        bin: "prometheus",
        argv: [
          `--config.file=${join(dir, "prometheus.yml")}`,
          `--storage.tsdb.path=${join(dir, "data")}`,
          `--web.listen-address=127.0.0.1:${port}`,
          "--web.enable-remote-write-receiver",
          "--storage.tsdb.retention.time=7d",
        ],
      };
    },
    ready: "/-/ready",
    write: "/api/v1/write",
  },
  {
    name: "victoria-metrics",
    args: (dir, port) => ({
      bin: "victoria-metrics",
      argv: [
        `-storageDataPath=${join(dir, "data")}`,
        `-httpListenAddr=127.0.0.1:${port}`,
        "-retentionPeriod=1",
      ],
    }),
    ready: "/health",
    write: "/api/v1/write",
    flush: "/internal/force_flush",
  },
];

export async function runPeer(spec: PeerSpec, w: Workload, concurrency: number): Promise<TargetResult> {
  const dir = mkdtempSync(join(tmpdir(), `svc-bench-${spec.name}-`));
  const port = await freePort();
  const { bin, argv } = spec.args(dir, port);
  const p = spawn(bin, argv, { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  p.stdout!.on("data", (d) => (log = (log + d).slice(-8000)));
  p.stderr!.on("data", (d) => (log = (log + d).slice(-8000)));
  const base = `http://127.0.0.1:${port}`;
  try {
    await waitReady(base + spec.ready, p, () => log);
    const rss0 = rssMiB(p.pid!);
    const t0 = performance.now();
    let failed = 0;
    const worker = async (_: unknown, k: number): Promise<void> => {
      for (const i of bodiesFor(w, k, concurrency)) {
        const r = await pushRemoteWrite(base + spec.write, "bench", w.bodies[i]);
        if (r.status >= 300) failed++;
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    const seconds = (performance.now() - t0) / 1000;
    if (spec.flush) await fetch(base + spec.flush);
    const rss = rssMiB(p.pid!);
    return {
      name: spec.name,
      seconds,
      samplesPerSec: w.samples / seconds,
      rssMiB: rss - rss0,
      diskBytes: duBytes(join(dir, "data")),
      notes: failed > 0 ? [`${spec.name}: ${failed} requests failed`] : [],
    };
  } finally {
    p.kill("SIGTERM");
    await new Promise((r) => (p.exitCode !== null ? r(null) : p.once("exit", r)));
    rmSync(dir, { recursive: true, force: true });
  }
}
