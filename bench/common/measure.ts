/**
 * Helpers shared by the benchmarks: a machine-speed probe, the load average, quantiles of paired
 * measurements, a CPU profile summary, and a process's CPU time and RSS from /proc.
 */
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";

const CLK_TCK = 100; // Linux USER_HZ: /proc/<pid>/stat counts CPU time in 1/100 s

/** A process's user + system CPU time so far, seconds (Linux /proc). */
export function procCpuS(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) / CLK_TCK; // utime, stime
}

/** A process's resident memory, KiB (Linux /proc); NaN when unreadable. */
export function procRssKiB(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) : Number.NaN;
}

/**
 * Time (ms, best of 5) of a fixed CPU-bound workload, as bench/vm-query prints it: this machine's
 * speed moves between runs, and the figure tells a slower machine from a slower svc.
 */
export function calibrationMs(): number {
  const values = Float64Array.from({ length: 4096 }, (_, i) => Math.sin(i) * 1000);
  let best = Number.POSITIVE_INFINITY;
  let sink = 0;
  for (let r = 0; r < 5; r++) {
    const t0 = performance.now();
    for (let k = 0; k < 40; k++) {
      sink += JSON.stringify(Array.from(values)).length;
      for (let i = 1; i < values.length; i++) sink += values[i] > values[i - 1] ? 1 : 0;
    }
    best = Math.min(best, performance.now() - t0);
  }
  return sink > 0 ? best : Number.NaN;
}

/** The machine's 1-, 5- and 15-minute load averages, as a line to print beside the figures. */
export function loadAverageLine(): string {
  return `load average ${loadavg()
    .map((x) => x.toFixed(2))
    .join(" / ")} (1 / 5 / 15 min)`;
}

/** The value at quantile `f` (0..1) of ascending `sorted` (nearest rank below); NaN when empty. */
export function quantile(sorted: ArrayLike<number>, f: number): number {
  return sorted.length === 0
    ? Number.NaN
    : sorted[Math.min(sorted.length - 1, Math.floor(f * sorted.length))];
}

/** Median of `values` (in any order; not modified): the mean of the middle two when their number is even. */
export function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/**
 * Waits until the processes `cpuSeconds` reads (their CPU seconds so far, summed) used at most
 * `idleCpuS` over an interval of `intervalMs`, or `maxMs` passed: background work a load left behind
 * (an engine's merges and compactions) is done before the next measurement. Resolves with the ms waited.
 */
export async function waitForIdle(
  cpuSeconds: () => number,
  o: { intervalMs: number; idleCpuS: number; maxMs: number },
): Promise<number> {
  const t0 = performance.now();
  for (let last = cpuSeconds(); performance.now() - t0 < o.maxMs; ) {
    await new Promise((r) => setTimeout(r, o.intervalMs));
    const now = cpuSeconds();
    if (now - last <= o.idleCpuS) break;
    last = now;
  }
  return performance.now() - t0;
}

/** Self time by function and by file of a V8 CPU profile: the top `n` of each, as table lines. */
export function profileSummary(profile: {
  nodes: {
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number };
    hitCount?: number;
  }[];
  samples?: number[];
  timeDeltas?: number[];
}): string[] {
  const selfUs = new Map<number, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  for (let j = 0; j < samples.length; j++)
    selfUs.set(samples[j], (selfUs.get(samples[j]) ?? 0) + (deltas[j + 1] ?? deltas[j] ?? 0));
  let total = 0;
  const byFn = new Map<string, number>();
  const byFile = new Map<string, number>();
  const root = /\/work\/main\/|file:\/\/\/work\/main\//;
  for (const n of profile.nodes) {
    const us = selfUs.get(n.id) ?? 0;
    total += us;
    const file =
      n.callFrame.url.replace(root, "").replace(/^.*node_modules\//, "node_modules/") || "(native)";
    const fn = `${n.callFrame.functionName || "(anonymous)"} ${file}:${n.callFrame.lineNumber + 1}`;
    byFn.set(fn, (byFn.get(fn) ?? 0) + us);
    byFile.set(file, (byFile.get(file) ?? 0) + us);
  }
  const top = (m: Map<string, number>, n: number) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(
        ([k, us]) =>
          `  ${((100 * us) / total).toFixed(1).padStart(5)}%  ${(us / 1000).toFixed(0).padStart(6)} ms  ${k}`,
      );
  return [
    `profile: ${(total / 1000).toFixed(0)} ms sampled; self time by function:`,
    ...top(byFn, 25),
    "self time by file:",
    ...top(byFile, 15),
  ];
}
