/**
 * The top-k projects by each usage figure as svc's own metrics (`svc_project_usage_*{project}`), for
 * the provider's dashboards and alerts on a noisy tenant. At most k series per family however many
 * projects there are: a project id is a label value here only because k bounds it (docs/operations.md,
 * "The metrics"). Read at scrape time from one pass over every project (readProjectUsage), kept for
 * `refreshMs` so frequent scrapes (or several Prometheus servers) do not repeat the pass.
 */
import type { Db } from "../db/database.ts";
import { observed, type Registry } from "../instrument.ts";
import type { MetricsBackend } from "./backend.ts";
import {
  figureOf,
  heaviest,
  type ProjectUsageView,
  readProjectUsage,
  type UsageOrder,
  type UsageSources,
} from "./usage.ts";

export const DEFAULT_USAGE_TOP_K = 10;
const DEFAULT_REFRESH_MS = 60_000;

const families: readonly { order: UsageOrder; name: string; help: string }[] = [
  {
    order: "active_series",
    name: "svc_project_usage_active_series",
    help: "Series with a sample in the last 5 minutes, of the k projects holding most (SVC_USAGE_TOP_K).",
  },
  {
    order: "samples_per_second",
    name: "svc_project_usage_samples_per_second",
    help: "Samples stored per second over the last 5 minutes, of the k projects writing most.",
  },
  {
    order: "query_cpu_seconds",
    name: "svc_project_usage_query_cpu_seconds",
    help: "CPU seconds this process spent on the project's queries over the last 5 minutes, of the k projects using most.",
  },
  {
    order: "stored_bytes",
    name: "svc_project_usage_stored_bytes",
    help: "Encoded chunk bytes of the project's series in the embedded store, of the k projects holding most (absent on the remote backend).",
  },
];

export function registerProjectUsageMetrics(
  registry: Registry,
  deps: {
    db: Db;
    metrics: MetricsBackend;
    sources: UsageSources;
    now: () => number;
    /** Projects per family (SVC_USAGE_TOP_K); 0 registers none. */
    topK: number;
    refreshMs?: number;
  },
): void {
  if (deps.topK <= 0) return;
  const refreshMs = deps.refreshMs ?? DEFAULT_REFRESH_MS;
  let last: { atMs: number; rows: ProjectUsageView[] } | undefined;
  let pending: Promise<ProjectUsageView[]> | undefined;
  const rows = async (): Promise<ProjectUsageView[]> => {
    const nowMs = deps.now();
    if (last && nowMs - last.atMs < refreshMs) return last.rows;
    pending ??= readProjectUsage(deps.db, deps.metrics, deps.sources, nowMs)
      .then((r) => {
        last = { atMs: nowMs, rows: r.rows };
        return r.rows;
      })
      .finally(() => {
        pending = undefined;
      });
    return pending;
  };
  for (const f of families) {
    if (f.order === "stored_bytes" && !deps.sources.storedBytes) continue;
    observed(registry, "gauge", f.name, f.help, async () => {
      // A failed pass (the remote engine down) leaves the family empty: missing, not zero.
      const all = await rows().catch(() => undefined);
      if (!all) return undefined;
      return heaviest(
        // A project without the figure (no query in the window) is not ranked on it.
        all.filter((u) => f.order !== "query_cpu_seconds" || u.queryCpuSeconds !== undefined),
        f.order,
        deps.topK,
      ).map((u) => ({
        labels: { project: u.project.slice("projects/".length) },
        value: figureOf(u, f.order),
      }));
    });
  }
}
