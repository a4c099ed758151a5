/**
 * The three targets, each a child process on loopback with a temp data directory: svc (the real
 * server's production build, packages/server/dist/main.js, as bench:startup runs it, receiving on its
 * remote-write endpoint with the collector token), Prometheus 2.42 and VictoriaMetrics from Debian. Every figure comes from /proc of that
 * process and from its data directory, so the three are measured alike.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { createSvcClients } from "@svc/sdk";
import type { Workload } from "./workload.ts";

export interface Running {
  readonly proc: ChildProcess;
  readonly base: string;
  log(): string;
}

export interface TargetSpec {
  readonly name: string;
  /** Executable that must be on PATH (peers), or undefined for svc. */
  readonly bin?: string;
  start(dir: string, port: number): { cmd: string; argv: string[]; env?: NodeJS.ProcessEnv };
  /** Work before a start, not timed (svc: the production build, when a source is newer than it). */
  before?(): Promise<unknown>;
  /** GET answering 200 once the store is open (WAL replayed). */
  readonly ready: string;
  readonly write: string;
  readonly token: string;
  /** Directory whose size counts as the store's disk use. */
  dataDir(dir: string): string;
  /** Work before the timed ingest (svc: the inventory the workload's `vm` labels name). */
  prepare?(base: string, w: Workload): Promise<void>;
  /** Makes buffered data durable/visible after the ingest (VictoriaMetrics buffers ~1 s in memory). */
  readonly flush?: string;
  /** A query that must answer with data after a restart, or undefined when the target has none. */
  readonly probe?: string;
  /** Its own metrics: path and bearer token (svc: /metrics with the operator token). */
  readonly selfScrape?: { readonly path: string; readonly token: string };
}

export const ADMIN_TOKEN = "bench-operator-token-0123456789";
const COLLECTOR_TOKEN = "bench-collector-token-0123456789";
const MAIN = resolve(import.meta.dirname, "../../packages/server/src/main.ts");
// The production build (what a provider runs, and what bench:startup starts), built first when a
// source is newer; BENCH_SVC_SOURCES=1 runs the sources through tsx instead.
const PROD_MAIN = resolve(import.meta.dirname, "../../packages/server/dist/main.js");
const fromSources = () => process.env.BENCH_SVC_SOURCES === "1";
/** What the svc targets run, for the bench's output. */
export const svcRuns = () =>
  fromSources()
    ? "svc from its sources through tsx (BENCH_SVC_SOURCES=1)"
    : "svc's production build (dist/main.js)";
const svcEntry = () => (fromSources() ? ["--import", "tsx", MAIN] : [PROD_MAIN]);
let svcBuild: Promise<unknown> | undefined;
function svcBuilt(): Promise<unknown> {
  if (fromSources()) return Promise.resolve();
  svcBuild ??= buildServerIfStale();
  return svcBuild;
}
async function buildServerIfStale(): Promise<unknown> {
  // A plain .mjs script with no type declarations: loaded by a specifier TypeScript does not resolve.
  const script: string = "../../scripts/build-server.mjs";
  const { buildServer } = (await import(script)) as { buildServer(): Promise<boolean> };
  return buildServer();
}

const svc: TargetSpec = {
  name: "svc",
  before: svcBuilt,
  start: (dir, port) => ({
    cmd: process.execPath,
    argv: [...(process.env.BENCH_SVC_NODE_ARGS?.split(" ").filter(Boolean) ?? []), ...svcEntry()],
    env: {
      ...process.env,
      PORT: String(port),
      HOST: "127.0.0.1",
      SVC_DATA_DIR: dir,
      SVC_DEMO: "false",
      SVC_SIMULATOR: "false",
      SVC_ADMIN_TOKEN: ADMIN_TOKEN,
      SVC_COLLECTOR_TOKEN: COLLECTOR_TOKEN,
      SVC_RETENTION_HOURS: String(7 * 24),
      SVC_LOG_LEVEL: "warn",
      SVC_DATABASE_URL: "",
    },
  }),
  ready: "/readyz",
  write: "/v1/ingest/prometheus/api/v1/write",
  token: COLLECTOR_TOKEN,
  selfScrape: { path: "/metrics", token: ADMIN_TOKEN },
  dataDir: (dir) => join(dir, "tsdb"),
  async prepare(base, w) {
    const admin = createSvcClients({ baseUrl: base, token: ADMIN_TOKEN, maxRetries: 0 }).admin;
    const projects = [...new Set(w.vms.map((v) => v.projectId))];
    for (const projectId of projects)
      await admin.projects.createProject({ projectId, displayName: projectId });
    // A few RPCs in flight at once; the inventory is set up before the timed part.
    const queue = [...w.vms];
    const worker = async (): Promise<void> => {
      for (let vm = queue.shift(); vm; vm = queue.shift()) {
        await admin.vms.createVM({
          parent: `projects/${vm.projectId}`,
          vmId: vm.vmId,
          location: vm.location,
          distribution: "debian-12",
          vcpus: 4,
          memoryBytes: 8n << 30n,
        });
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
  },
};

const prometheus: TargetSpec = {
  name: "prometheus",
  bin: "prometheus",
  start: (dir, port) => {
    writeFileSync(join(dir, "prometheus.yml"), "global:\n  scrape_interval: 30s\n");
    return {
      cmd: "prometheus",
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
  token: "unused",
  dataDir: (dir) => join(dir, "data"),
  probe: "/api/v1/query?query=count(svc_vm_vcpus)",
};

const victoria: TargetSpec = {
  name: "victoria-metrics",
  bin: "victoria-metrics",
  start: (dir, port) => ({
    cmd: "victoria-metrics",
    argv: [
      `-storageDataPath=${join(dir, "data")}`,
      `-httpListenAddr=127.0.0.1:${port}`,
      "-retentionPeriod=7d",
      "-search.latencyOffset=0",
      "-search.disableCache",
    ],
  }),
  ready: "/health",
  write: "/api/v1/write",
  token: "unused",
  dataDir: (dir) => join(dir, "data"),
  flush: "/internal/force_flush",
  probe: "/api/v1/query?query=count(svc_vm_vcpus)",
};

/** svc without its own domain metrics (SVC_SELF_METRICS=false): the reference for what they cost. */
const svcWithoutSelfMetrics: TargetSpec = {
  ...svc,
  name: "svc-no-self-metrics",
  start: (dir, port) => {
    const s = svc.start(dir, port);
    return { ...s, env: { ...s.env, SVC_SELF_METRICS: "false" } };
  },
  selfScrape: undefined,
};

export const targets: readonly TargetSpec[] = [svc, svcWithoutSelfMetrics, prometheus, victoria];

/** Starts the target and resolves once its ready URL answers 200; returns the ms that took. */
export async function startTarget(
  spec: TargetSpec,
  dir: string,
  port: number,
): Promise<{ running: Running; readyMs: number }> {
  mkdirSync(dir, { recursive: true });
  await spec.before?.();
  const { cmd, argv, env } = spec.start(dir, port);
  const t0 = performance.now();
  const proc = spawn(cmd, argv, { stdio: ["ignore", "pipe", "pipe"], env: env ?? process.env });
  let log = "";
  proc.stdout!.on("data", (d) => (log = (log + d).slice(-8000)));
  proc.stderr!.on("data", (d) => (log = (log + d).slice(-8000)));
  const running: Running = { proc, base: `http://127.0.0.1:${port}`, log: () => log };
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`${spec.name} exited: ${log.slice(-2000)}`);
    if (performance.now() - t0 > 300_000) throw new Error(`${spec.name} not ready after 300 s`);
    try {
      if ((await fetch(running.base + spec.ready)).ok) break;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return { running, readyMs: performance.now() - t0 };
}

/** Polls the probe query until it returns a non-empty result; ms from `since`. */
export async function probeAnswers(spec: TargetSpec, r: Running, since: number): Promise<number | undefined> {
  if (!spec.probe) return undefined;
  for (;;) {
    if (performance.now() - since > 120_000) return Number.NaN;
    try {
      const res = await fetch(r.base + spec.probe);
      const body = (await res.json()) as { data?: { result?: unknown[] } };
      if (res.ok && (body.data?.result?.length ?? 0) > 0) return performance.now() - since;
    } catch {
      // not answering yet
    }
    await new Promise((res) => setTimeout(res, 20));
  }
}

/** SIGTERM (a clean shutdown) and wait for the exit. */
export async function stopTarget(r: Running): Promise<void> {
  if (r.proc.exitCode !== null || r.proc.signalCode !== null) return;
  const exited = new Promise((res) => r.proc.once("exit", res));
  r.proc.kill("SIGTERM");
  const timer = setTimeout(() => r.proc.kill("SIGKILL"), 60_000);
  await exited;
  clearTimeout(timer);
}
