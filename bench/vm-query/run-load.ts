/**
 * The server side of bench/vm-query's load client (load.mjs): the rows it is given, what it measured,
 * and the server process's CPU time and in-server spans over each row's measured requests.
 */
import { spawn } from "node:child_process";
import { threadCpuSeconds } from "../../packages/server/src/promql/pool/thread-cpu.ts";

// The load client should take as little of the two cores as it can, as wrk would: without these,
// its own V8 compiler and GC threads ran up to 9 ms inside single measured requests (schedstat of
// its threads), and its main thread then waited for a CPU while the server's answer sat unread.
// One thread (GC and compiler on the main thread, warmed up before measuring) and a young
// generation large enough that it rarely collects. BENCH_CLIENT_FLAGS replaces them.
const CLIENT_FLAGS = (process.env.BENCH_CLIENT_FLAGS ?? "--single-threaded --max-semi-space-size=64")
  .split(" ")
  .filter(Boolean);

export interface LoadRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: string;
}

/**
 * One measured request as load.mjs sends it: a request, a group sent at once (a dashboard's panels;
 * done when the slowest is), or a sequence of those, one after another (a caller that needs the
 * first answers before it asks again).
 */
export type LoadItem = LoadRequest | { group: LoadItem[] } | { seq: LoadItem[] };

export interface LoadRow {
  name: string;
  n: number;
  /** Warm-up requests before measuring, stopped early after warmupMaxMs. */
  warmup?: number;
  warmupMaxMs?: number;
  /** The row's requests go to the peer, which runs (SIGCONT) during this row only. */
  peer?: boolean;
  /** Measured request i is requests[i % requests.length]. */
  requests: LoadItem[];
}

/** What the load client measured of one row, and the server process's CPU time over those requests. */
export interface RowResult {
  name: string;
  n: number;
  latenciesMs: number[];
  seconds: number;
  bytes: number;
  /** CPU time (user + system, all threads: gzip and GC helpers too) of this process while the row ran. */
  serverCpuMs: number;
  /** CPU time of this process's main thread (the event loop) over the same requests. */
  mainCpuMs: number;
  /** Time inside the server of each HTTP request the row's measured phase made (a group's members each). */
  serverMs: Span[];
}

export interface Span {
  start: number;
  end: number;
  /** Time the main thread was runnable but waiting for a CPU (Linux schedstat), when known. */
  waitMs?: number;
}

/**
 * Runs bench/vm-query/load.mjs as a child process over the rows; resolves with its latencies and, per
 * row, this (the server's) process CPU time between the client's "measuring" and "measured" marks:
 * steadier than latency percentiles on a shared 2-core machine, so it shows what a change saves. The
 * in-server times collected into `serverMs` between the same marks are handed out per row too.
 * `onStarting` runs before a row's warm-up (e.g. to resume the peer it measures and pause the other).
 */
export function runLoad(
  rows: LoadRow[],
  serverMs: Span[],
  onStarting?: (row: LoadRow) => void,
): Promise<RowResult[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [...CLIENT_FLAGS, new URL("./load.mjs", import.meta.url).pathname],
      {
        stdio: ["pipe", "pipe", "inherit"],
      },
    );
    const cpuMs = new Map<number, number>();
    const mainMs = new Map<number, number>();
    let main0 = threadCpuSeconds();
    const inServer = new Map<number, Span[]>();
    let cpu0 = process.cpuUsage();
    let last = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      const lines = (last + d).split("\n");
      last = lines.pop() ?? "";
      for (const line of lines) {
        const e = JSON.parse(line) as { starting?: number; measuring?: number; measured?: number };
        if (e.starting !== undefined) onStarting?.(rows[e.starting]);
        if (e.measuring !== undefined) {
          cpu0 = process.cpuUsage();
          main0 = threadCpuSeconds();
          serverMs.length = 0;
        }
        if (e.measured !== undefined) {
          const c = process.cpuUsage(cpu0);
          cpuMs.set(e.measured, (c.user + c.system) / 1000);
          mainMs.set(e.measured, (threadCpuSeconds() - main0) * 1000);
          inServer.set(e.measured, serverMs.splice(0));
        }
      }
    });
    child.on("error", reject);
    // "close", not "exit": the rows are the child's last stdout, which may still be unread at exit.
    child.on("close", (code) => {
      if (code !== 0) return reject(new Error(`load client exited with ${code}`));
      const got = (JSON.parse(last) as { rows: Omit<RowResult, "serverCpuMs" | "serverMs">[] }).rows;
      resolve(
        got.map((r, i) => ({
          ...r,
          serverCpuMs: cpuMs.get(i) ?? Number.NaN,
          mainCpuMs: mainMs.get(i) ?? Number.NaN,
          serverMs: inServer.get(i) ?? [],
        })),
      );
    });
    child.stdin.end(JSON.stringify({ rows }));
  });
}
