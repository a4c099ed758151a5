import { readFileSync } from "node:fs";

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
      return Number(readFileSync("/proc/thread-self/schedstat", "latin1").split(" ", 1)[0]) / 1e9;
    } catch {
      schedstat = false;
    }
  }
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

let schedstat = process.platform === "linux";

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
