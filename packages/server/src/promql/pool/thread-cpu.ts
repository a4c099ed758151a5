import { openSync, readFileSync, readSync } from "node:fs";
import { isMainThread } from "node:worker_threads";

/**
 * CPU seconds the calling thread has run, for charging a query's evaluation to its project. Linux
 * gives one thread's time in /proc/thread-self/schedstat (nanoseconds on a CPU), so a worker's figure
 * is its own even while other workers and the event loop run; Node 20 has no thread CPU call. Where
 * that file is missing it falls back to the process' CPU (process.cpuUsage), which counts every
 * thread: still right for a query alone, an over-count under concurrency (docs/operations.md says so).
 */
export function threadCpuSeconds(): number {
  if (schedstat) {
    try {
      if (isMainThread || workerFd >= 0) return keptSchedstat();
      return Number(readFileSync("/proc/thread-self/schedstat", "latin1").split(" ", 1)[0]) / 1e9;
    } catch {
      schedstat = false;
    }
  }
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

let schedstat = process.platform === "linux";

/**
 * The main thread keeps its schedstat open and re-reads it from offset 0 (a /proc file is produced
 * anew by each read from its start): one pread instead of open, read and close, ~1.7 µs instead of
 * ~12 µs, for the evaluator's thousands of charged reads a cycle. A query worker does the same once it
 * has called {@link keepWorkerSchedstat}; Node closes that fd when the worker exits, terminated or not
 * (lifecycle/worker-script.ts).
 */
let mainFd = -1;
let workerFd = -1;
const mainBuf = Buffer.alloc(128);
function keptSchedstat(): number {
  let fd: number;
  if (isMainThread) {
    if (mainFd < 0) mainFd = openSync("/proc/thread-self/schedstat", "r");
    fd = mainFd;
  } else fd = workerFd;
  const n = readSync(fd, mainBuf, 0, mainBuf.length, 0);
  const space = mainBuf.indexOf(32);
  return Number(mainBuf.toString("latin1", 0, space >= 0 && space < n ? space : n)) / 1e9;
}

/**
 * In a worker: opens this thread's schedstat once and keeps it, for the reads of every query after
 * (two a query: before and after). Returns the fd, or -1 where there is no such file. Nobody closes
 * it by hand: Node does when the thread exits, and a second close would hit whatever file took its
 * number by then.
 */
export function keepWorkerSchedstat(): number {
  if (isMainThread || !schedstat || workerFd >= 0) return -1;
  try {
    workerFd = openSync("/proc/thread-self/schedstat", "r");
  } catch {
    return -1;
  }
  return workerFd;
}

/** Runs a synchronous `fn` and hands its thread CPU seconds to `charge` (even when it throws). */
export function chargingCpu<T>(charge: ((seconds: number) => void) | undefined, fn: () => T): T {
  if (!charge) return fn();
  const before = threadCpuSeconds();
  try {
    return fn();
  } finally {
    charge(Math.max(0, threadCpuSeconds() - before));
  }
}
