/**
 * Per-project usage of the metrics store for the provider's operator (`svc admin usage`): active series
 * and samples stored per second, read through each project's own tenant-scoped query, so the embedded
 * store and a remote engine answer alike. One query per project and figure: a full pass over the
 * projects' recent series, fine on demand, not on a scrape.
 */
import type { Db } from "../db/database.ts";
import { invalidArgument } from "../errors.ts";
import type { MetricsBackend } from "./backend.ts";

const DEFAULT_TOP = 20;
const MAX_TOP = 1000;
export const usageOrders = ["active_series", "samples_per_second"] as const;
/** Prometheus' lookback: a series is active when it has a sample this recent; also the rate's window. */
const WINDOW_S = 300;

export interface ProjectUsageView {
  project: string;
  activeSeries: bigint;
  samplesPerSecond: number;
}

/** The one value of a query answering a vector of at most one sample; undefined when empty. */
async function scalarOf(m: MetricsBackend, projectId: string, expr: string, atMs: number) {
  const r = await m.instantQuery(projectId, expr, atMs);
  if (r.value.resultType !== "vector") return undefined;
  return r.value.result[0]?.v;
}

export async function listProjectUsage(
  db: Db,
  metrics: MetricsBackend,
  nowMs: number,
  req: { pageSize: number; orderBy: string },
): Promise<{ projects: ProjectUsageView[]; timeUnix: bigint; totalProjects: bigint }> {
  if (!Number.isInteger(req.pageSize) || req.pageSize < 0 || req.pageSize > MAX_TOP)
    throw invalidArgument("pageSize", `must be from 0 (${DEFAULT_TOP}) to ${MAX_TOP}`);
  const order = req.orderBy || "active_series";
  if (!(usageOrders as readonly string[]).includes(order))
    throw invalidArgument("orderBy", `must be one of ${usageOrders.join(", ")}`);
  const top = req.pageSize || DEFAULT_TOP;
  const ids = (await db.selectFrom("projects").select("id").orderBy("id").execute()).map((r) => r.id);
  const all: ProjectUsageView[] = [];
  for (const id of ids) {
    const series = await scalarOf(metrics, id, 'count({__name__=~".+"})', nowMs);
    // No series: nothing stored recently, so no figure (missing, not zero) and not a candidate.
    if (series === undefined) continue;
    const samples = await scalarOf(
      metrics,
      id,
      `sum(count_over_time({__name__=~".+"}[${WINDOW_S}s]))`,
      nowMs,
    );
    all.push({
      project: `projects/${id}`,
      activeSeries: BigInt(series),
      samplesPerSecond: (samples ?? 0) / WINDOW_S,
    });
  }
  const key = (u: ProjectUsageView) =>
    order === "active_series" ? Number(u.activeSeries) : u.samplesPerSecond;
  all.sort((a, b) => key(b) - key(a) || a.project.localeCompare(b.project));
  return {
    projects: all.slice(0, top),
    timeUnix: BigInt(Math.floor(nowMs / 1000)),
    totalProjects: BigInt(ids.length),
  };
}
