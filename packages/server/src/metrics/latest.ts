import type { VmTable } from "../db/schema.ts";
import { SvcError } from "../errors.ts";
import { vmName } from "../inventory/names.ts";
import type { Labels } from "../storage/interface.ts";
import type { MetricsBackend } from "./backend.ts";
import type { ProjectLimiter } from "./concurrency.ts";
import type { LatestVmMetrics, VmMonitoringView } from "./list.ts";
import type { MetricsOptions } from "./options.ts";
import { isStale } from "./quality.ts";

const CPU = "svc_vm_cpu_utilization_pct";
const MEM_USED = "svc_vm_memory_used_bytes";
const MEM_TOTAL = "svc_vm_memory_total_bytes";
const LAST = "svc_vm_last_observation_timestamp_seconds";

/** RE2 / PromQL regex matching exactly `s`. */
export function regexQuote(s: string): string {
  return s.replace(/[\\^$.|?*+()[\]{}]/g, "\\$&");
}

/**
 * ListVMMonitoring's metrics for one page: a single `latest` read over the page's VMs
 * (`vm=~"a|b|…"`, four series names) and a group-by in code, so a page of 50 VMs costs one store
 * round trip. A value older than `latestValueMaxAgeMs` is not "latest" and is left out (never 0);
 * a failed read marks every VM of the page `quality.error` instead of failing the listing.
 */
export function latestVmMetrics(deps: {
  metrics: MetricsBackend;
  limiter: ProjectLimiter;
  now: () => number;
  options: MetricsOptions;
}): LatestVmMetrics {
  const o = deps.options;
  return async (projectId, vms) => {
    type Entry = NonNullable<ReturnType<Awaited<ReturnType<LatestVmMetrics>>["get"]>>;
    const out = new Map<string, Entry>();
    if (vms.length === 0) return out;
    const names = vms.map((v: VmTable) =>
      vmName({ projectId: v.project_id, location: v.location, vmId: v.vm_id }),
    );
    const nowMs = deps.now();
    let samples: Awaited<ReturnType<MetricsBackend["latest"]>>;
    try {
      samples = await deps.limiter.run(projectId, () =>
        deps.metrics.latest(
          projectId,
          [
            { type: "=~", name: "__name__", value: [CPU, MEM_USED, MEM_TOTAL, LAST].join("|") },
            { type: "=~", name: "vm", value: names.map(regexQuote).join("|") },
          ],
          nowMs,
          o.latestLookbackMs,
        ),
      );
    } catch (err) {
      // Rate limiting stays an error of the call (429 + Retry-After): the client should retry.
      if (err instanceof SvcError && err.code === "resource_exhausted") throw err;
      for (const n of names) out.set(n, { quality: { lastObservedUnix: 0n, stale: true, error: true } });
      return out;
    }
    const fresh = nowMs - o.latestValueMaxAgeMs;
    type Acc = {
      cpu?: { t: number; v: number };
      used?: { t: number; v: number };
      total?: { t: number; v: number };
      last?: number;
    };
    const acc = new Map<string, Acc>(names.map((n) => [n, {}]));
    const newer = (a: { t: number; v: number } | undefined, t: number, v: number) =>
      a && a.t >= t ? a : { t, v };
    for (const s of samples) {
      const a = acc.get(label(s.labels, "vm"));
      if (!a) continue;
      const n = label(s.labels, "__name__");
      if (n === LAST) {
        a.last = Math.max(a.last ?? 0, s.value);
        continue;
      }
      if (s.timestampMs < fresh) continue;
      if (n === CPU) a.cpu = newer(a.cpu, s.timestampMs, s.value);
      else if (n === MEM_USED) a.used = newer(a.used, s.timestampMs, s.value);
      else if (n === MEM_TOTAL) a.total = newer(a.total, s.timestampMs, s.value);
    }
    const staleAfterS = (o.staleAfterIntervals * o.samplingIntervalMs) / 1000;
    for (const [n, a] of acc) {
      const view: Omit<VmMonitoringView, "name" | "displayName" | "state" | "location" | "monitoringLevel"> =
        {
          quality: {
            lastObservedUnix: BigInt(Math.floor(a.last ?? 0)),
            stale: isStale(a.last, nowMs / 1000, staleAfterS),
            error: false,
          },
        };
      if (a.cpu) view.cpuUtilizationPct = a.cpu.v;
      if (a.used) view.memoryUsedBytes = a.used.v;
      if (a.total) view.memoryTotalBytes = a.total.v;
      out.set(n, view);
    }
    return out;
  };
}

function label(labels: Labels, name: string): string {
  return labels.find((l) => l.name === name)?.value ?? "";
}
