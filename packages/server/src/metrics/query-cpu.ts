/**
 * Query CPU seconds per project over a sliding window, in memory, for `svc admin usage` and the
 * top-k usage metrics: each query's CPU (measured where it ran: a pool worker's thread, the event
 * loop's reads for it, an inline evaluation) is added to its project's current 30-second bucket.
 * Bounded: a project's buckets older than the window are dropped as it is read or charged, a project
 * with none left is forgotten, and past `maxProjects` the one charged longest ago is dropped first.
 * Per process: each replica counts the queries it ran.
 */
const BUCKET_MS = 30_000;

export interface QueryCpuMeter {
  /** Adds `seconds` of CPU to the project's current bucket. */
  add(projectId: string, seconds: number): void;
  /** Each project's CPU seconds over the window ending now; projects without any are absent. */
  recent(): Map<string, number>;
  /** The window the figures cover, seconds. */
  readonly windowSeconds: number;
}

export function createQueryCpuMeter(opts: {
  now: () => number;
  /** ms; a multiple of 30 s. Default 5 minutes, the window of the other usage figures. */
  windowMs?: number;
  maxProjects?: number;
}): QueryCpuMeter {
  const windowMs = opts.windowMs ?? 300_000;
  const maxProjects = opts.maxProjects ?? 100_000;
  const buckets = windowMs / BUCKET_MS;
  /** Per project: bucket number → seconds, in the order the buckets were made (oldest first). */
  const byProject = new Map<string, Map<number, number>>();
  const trim = (b: Map<number, number>, current: number) => {
    for (const n of b.keys()) {
      if (n > current - buckets) break;
      b.delete(n);
    }
  };
  return {
    windowSeconds: windowMs / 1000,
    add(projectId, seconds) {
      if (!(seconds > 0)) return;
      const current = Math.floor(opts.now() / BUCKET_MS);
      let b = byProject.get(projectId);
      // Re-inserted, so the Map's first entry is always the project charged longest ago.
      if (b) byProject.delete(projectId);
      else b = new Map();
      byProject.set(projectId, b);
      b.set(current, (b.get(current) ?? 0) + seconds);
      trim(b, current);
      while (byProject.size > maxProjects) byProject.delete(byProject.keys().next().value as string);
    },
    recent() {
      const current = Math.floor(opts.now() / BUCKET_MS);
      const out = new Map<string, number>();
      for (const [project, b] of byProject) {
        trim(b, current);
        if (b.size === 0) {
          byProject.delete(project);
          continue;
        }
        let sum = 0;
        for (const s of b.values()) sum += s;
        out.set(project, sum);
      }
      return out;
    },
  };
}
