import { readlinkSync } from "node:fs";
import { setPriority } from "node:os";

/**
 * Lowers the scheduling priority of the calling thread (a worker thread) to `nice` on Linux, so that
 * on a busy machine the kernel gives the event loop's thread the CPU first: a tenant's heavy query
 * then slows down itself, not the other tenants' requests and the collector's writes waiting on the
 * main thread. Linux applies setpriority(PRIO_PROCESS, tid) to one thread, and raising one's own
 * nice value needs no privilege. Elsewhere (or when /proc is missing) it does nothing and says so.
 */
export function lowerThreadPriority(nice: number): boolean {
  if (process.platform !== "linux" || nice <= 0) return false;
  try {
    // "/proc/thread-self" → "<pid>/task/<tid>"
    const tid = Number(readlinkSync("/proc/thread-self").split("/").pop());
    if (!Number.isInteger(tid) || tid <= 0) return false;
    setPriority(tid, Math.min(19, nice));
    return true;
  } catch {
    return false;
  }
}
