/**
 * Per-project usage of the metrics store for the provider's operator (`svc admin usage`): active series
 * and samples stored per second, read through each project's own tenant-scoped query, so the embedded
 * store and a remote engine answer alike; query CPU seconds from the in-process meter (query-cpu.ts);
 * stored bytes from the embedded store's chunks. One query per project and figure: a full pass over
 * the projects' recent series, fine on demand, not on a scrape (the top-k metrics use the cheap
 * figures only: usage-metrics.ts).
 */
import type { Db } from "../db/database.ts";
import { invalidArgument } from "../errors.ts";
import type { MetricsBackend } from "./backend.ts";
import type { QueryCpuMeter } from "./query-cpu.ts";

const DEFAULT_TOP = 20;
const MAX_TOP = 1000;
export const usageOrders = [
  "active_series",
  "samples_per_second",
  "query_cpu_seconds",
  "stored_bytes",
] as const;
export type UsageOrder = (typeof usageOrders)[number];

/** Where the figures not read by query come from; absent: the backend cannot give them. */
export interface UsageSources {
  readonly queryCpu: QueryCpuMeter;
  /** Encoded chunk bytes per project id (the embedded store); absent on the remote backend. */
  readonly storedBytes?: () => Map<string, number>;
}

/** Why the remote backend has no stored bytes: said in the answer, never reported as 0. */
export const STORED_BYTES_UNAVAILABLE =
  "stored_bytes: not available from the engine (the remote backend's Prometheus API has no per-tenant storage size)";
/** Prometheus' lookback: a series is active when it has a sample this recent; also the rate's window. */
const WINDOW_S = 300;

export interface ProjectUsageView {
  project: string;
  activeSeries: bigint;
  samplesPerSecond: number;
  queryCpuSeconds?: number;
  storedBytes?: bigint;
}

/** The one value of a query answering a vector of at most one sample; undefined when empty. */
async function scalarOf(m: MetricsBackend, projectId: string, expr: string, atMs: number) {
  // The operator's reads are not the tenant's queries: not charged to its query CPU.
  const r = await m.instantQuery(projectId, expr, atMs, { charge: false });
  if (r.value.resultType !== "vector") return undefined;
  return r.value.result[0]?.v;
}

export async function listProjectUsage(
  db: Db,
  metrics: MetricsBackend,
  sources: UsageSources,
  nowMs: number,
  req: { pageSize: number; orderBy: string },
): Promise<{
  projects: ProjectUsageView[];
  timeUnix: bigint;
  totalProjects: bigint;
  unavailable: string[];
}> {
  if (!Number.isInteger(req.pageSize) || req.pageSize < 0 || req.pageSize > MAX_TOP)
    throw invalidArgument("pageSize", `must be from 0 (${DEFAULT_TOP}) to ${MAX_TOP}`);
  const order = req.orderBy || "active_series";
  if (!(usageOrders as readonly string[]).includes(order))
    throw invalidArgument("orderBy", `must be one of ${usageOrders.join(", ")}`);
  if (order === "stored_bytes" && !sources.storedBytes)
    throw invalidArgument("orderBy", STORED_BYTES_UNAVAILABLE);
  const top = req.pageSize || DEFAULT_TOP;
  const { rows: all, totalProjects, unavailable } = await readProjectUsage(db, metrics, sources, nowMs);
  return {
    projects: heaviest(all, order as UsageOrder, top),
    timeUnix: BigInt(Math.floor(nowMs / 1000)),
    totalProjects: BigInt(totalProjects),
    unavailable,
  };
}

/** A usage figure of a row as a number; a figure the row lacks counts as none. */
export function figureOf(u: ProjectUsageView, order: UsageOrder): number {
  switch (order) {
    case "active_series":
      return Number(u.activeSeries);
    case "samples_per_second":
      return u.samplesPerSecond;
    case "query_cpu_seconds":
      return u.queryCpuSeconds ?? 0;
    case "stored_bytes":
      return Number(u.storedBytes ?? 0n);
  }
}

/** The `top` rows heaviest by `order`, ties by project name. */
export function heaviest(
  rows: readonly ProjectUsageView[],
  order: UsageOrder,
  top: number,
): ProjectUsageView[] {
  return [...rows]
    .sort((a, b) => figureOf(b, order) - figureOf(a, order) || a.project.localeCompare(b.project))
    .slice(0, top);
}

/**
 * Every project's usage row (projects without any figure left out), the inventory's project count and
 * the figures this backend cannot give. One tenant-scoped query per project and figure.
 */
export async function readProjectUsage(
  db: Db,
  metrics: MetricsBackend,
  sources: UsageSources,
  nowMs: number,
): Promise<{ rows: ProjectUsageView[]; totalProjects: number; unavailable: string[] }> {
  const cpu = sources.queryCpu.recent();
  const bytes = sources.storedBytes?.();
  const ids = (await db.selectFrom("projects").select("id").orderBy("id").execute()).map((r) => r.id);
  const all: ProjectUsageView[] = [];
  for (const id of ids) {
    const series = await scalarOf(metrics, id, 'count({__name__=~".+"})', nowMs);
    const queryCpuSeconds = cpu.get(id);
    const stored = bytes?.get(id);
    // Nothing stored recently, no query and nothing held: no figure (missing, not zero), no row.
    if (series === undefined && queryCpuSeconds === undefined && stored === undefined) continue;
    const samples = await scalarOf(
      metrics,
      id,
      `sum(count_over_time({__name__=~".+"}[${WINDOW_S}s]))`,
      nowMs,
    );
    all.push({
      project: `projects/${id}`,
      activeSeries: BigInt(series ?? 0),
      samplesPerSecond: (samples ?? 0) / WINDOW_S,
      queryCpuSeconds,
      // On the embedded store a project without chunks holds none: 0 is measured, not missing.
      storedBytes: bytes ? BigInt(stored ?? 0) : undefined,
    });
  }
  return { rows: all, totalProjects: ids.length, unavailable: bytes ? [] : [STORED_BYTES_UNAVAILABLE] };
}
