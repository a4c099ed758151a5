import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../src/net/free-port.ts";

/**
 * Real Prometheus-compatible engines (the Debian packages `prometheus` and `victoria-metrics`) for
 * tests of the remote metrics backend: each runs on a free loopback port with a temporary data
 * directory, configured as docs/deploy.md ("Remote metrics backend") says an installation should be.
 */
export type EngineKind = "prometheus" | "victoria-metrics";

export const ENGINE_KINDS: readonly EngineKind[] = ["prometheus", "victoria-metrics"];

export interface RunningEngine {
  readonly kind: EngineKind;
  /** Where svc's SVC_REMOTE_WRITE_URL points. */
  readonly remoteWriteUrl: string;
  /** Base of the engine's Prometheus HTTP API (SVC_REMOTE_QUERY_URL). */
  readonly queryUrl: string;
  /** The running process's id (benches read its CPU time from /proc), or undefined while it is down. */
  readonly pid: number | undefined;
  /**
   * Makes everything acknowledged so far readable. VictoriaMetrics serves new samples about a second
   * after it acknowledged them (its in-memory parts are flushed every second); Prometheus at once.
   */
  flush(): Promise<void>;
  /** Stops the process, keeping its data and port: the engine is down until `up()`. */
  down(): Promise<void>;
  /** Starts it again on the same port and data; resolves once it is ready. */
  up(): Promise<void>;
  /** Stops it and deletes its data. */
  stop(): Promise<void>;
}

/** Out-of-order window given to Prometheus, so svc's own (SVC_OOO_WINDOW_MINUTES, 1 h) works there too. */
const PROMETHEUS_OOO_WINDOW = "1h";

/**
 * Why tests of `kind` are skipped (the binary is missing), or undefined when it is installed. Under
 * CI=true a missing engine throws instead: CI must run them.
 */
export function engineSkipReason(kind: EngineKind): string | undefined {
  try {
    // Both print their version and exit 0; neither reads a config for it.
    execFileSync(kind, [kind === "prometheus" ? "--version" : "-version"], { stdio: "ignore" });
    return undefined;
  } catch {
    if (process.env.CI === "true")
      throw new Error(`CI=true but the Debian package ${kind} is not installed (.ci/run installs it)`);
    return `${kind} is not installed (apt-get install ${kind}); skipped`;
  }
}

/** Starts `kind` on 127.0.0.1 and resolves once it answers its readiness endpoint. */
export async function startEngine(kind: EngineKind, opts: { port?: number } = {}): Promise<RunningEngine> {
  const dir = mkdtempSync(join(tmpdir(), `svc-${kind}-`));
  const port = opts.port ?? (await freePort("127.0.0.1"));
  const base = `http://127.0.0.1:${port}`;
  const argv = kind === "prometheus" ? prometheusArgs(dir, port) : victoriaArgs(dir, port);
  let proc: ChildProcess | undefined;
  let log = "";
  const up = async () => {
    const p = spawn(kind, argv, { stdio: ["ignore", "pipe", "pipe"] });
    proc = p;
    const keep = (d: Buffer) => {
      log = (log + d.toString()).slice(-8000);
    };
    p.stdout?.on("data", keep);
    p.stderr?.on("data", keep);
    const ready = `${base}${kind === "prometheus" ? "/-/ready" : "/health"}`;
    const deadline = Date.now() + 120_000;
    for (;;) {
      if (p.exitCode !== null || p.signalCode !== null)
        throw new Error(`${kind} exited: ${log.slice(-2000)}`);
      if (Date.now() > deadline) throw new Error(`${kind} was not ready within 120 s: ${log.slice(-2000)}`);
      const ok = await fetch(ready).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) return;
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const down = async () => {
    const p = proc;
    proc = undefined;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise((r) => p.once("exit", r));
    p.kill("SIGTERM");
    await exited;
  };
  await up();
  return {
    kind,
    remoteWriteUrl: `${base}/api/v1/write`,
    queryUrl: base,
    get pid() {
      return proc?.pid;
    },
    async flush() {
      if (kind !== "victoria-metrics") return;
      const res = await fetch(`${base}/internal/force_flush`);
      await res.arrayBuffer();
      if (!res.ok) throw new Error(`${kind}: force_flush answered ${res.status}`);
    },
    down,
    up,
    async stop() {
      await down();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function prometheusArgs(dir: string, port: number): string[] {
  const config = join(dir, "prometheus.yml");
  writeFileSync(config, `storage:\n  tsdb:\n    out_of_order_time_window: ${PROMETHEUS_OOO_WINDOW}\n`);
  return [
    `--config.file=${config}`,
    `--storage.tsdb.path=${join(dir, "data")}`,
    `--web.listen-address=127.0.0.1:${port}`,
    "--web.enable-remote-write-receiver",
    "--storage.tsdb.retention.time=3650d",
    "--log.level=warn",
  ];
}

function victoriaArgs(dir: string, port: number): string[] {
  return [
    `-httpListenAddr=127.0.0.1:${port}`,
    `-storageDataPath=${join(dir, "data")}`,
    // Points newer than now − 30 s are hidden by default; svc reads what it acknowledged.
    "-search.latencyOffset=0s",
    // A retried batch is stored again; identical timestamps collapse into one sample.
    "-dedup.minScrapeInterval=1ms",
    // Tests write samples from the recent past (TestClock); the default retention is one month.
    "-retentionPeriod=10y",
    "-loggerLevel=WARN",
  ];
}
