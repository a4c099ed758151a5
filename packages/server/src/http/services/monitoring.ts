import type { ConnectRouter } from "@connectrpc/connect";
import {
  MonitoringService,
  type Point,
  type QueryVMMonitoringResponse,
} from "@svc/sdk/gen/svc/monitoring/v1/monitoring_pb";
import type { Db } from "../../db/database.ts";
import { permissionDenied, SvcError } from "../../errors.ts";
import { authorizeProject, type Principal } from "../../iam/principal.ts";
import type { AgentPackage } from "../../ingest/agent-package.ts";
import { enableExpandedMonitoring } from "../../ingest/expanded.ts";
import { parseProjectName, parseVmName } from "../../inventory/names.ts";
import { type LatestVmMetrics, listVmMonitoring } from "../../metrics/list.ts";
import {
  type PointColumns,
  queryVmMonitoring,
  type VmQueryDeps,
  type VmQueryResult,
} from "../../metrics/query.ts";
import { humanOf, principalOf } from "../context.ts";
import {
  labelsBoundBytes,
  MESSAGE_BOUND_BYTES,
  POINT_BOUND_BYTES,
  stringBoundBytes,
  withSizeBound,
} from "../response-size.ts";

export interface MonitoringDeps {
  db: Db;
  pageKey: Buffer;
  latest?: LatestVmMetrics;
  /** Metrics reads of QueryVMMonitoring; absent = the RPC answers unimplemented. */
  vmQuery?: VmQueryDeps;
  /** Origin the guest agent pushes to (install command of EnableExpandedMonitoring). */
  serverOrigin?: string;
  /** The published guest agent package; without one EnableExpandedMonitoring is refused. */
  agentPackage?: AgentPackage;
  now?: () => number;
}

/** authorizeProject, with a boundary refusal that names the VM and why (another project). */
async function authorizeVm(db: Db, p: Principal, name: string): Promise<void> {
  const { projectId } = parseVmName(name);
  try {
    await authorizeProject(db, p, projectId, "monitoring.read");
  } catch (err) {
    if (err instanceof SvcError && err.reason === "PROJECT_BOUNDARY") {
      throw permissionDenied(
        "PROJECT_BOUNDARY",
        `name: ${name} belongs to project ${projectId}, which this credential cannot read (${err.message})`,
      );
    }
    throw err;
  }
}

export function registerMonitoringService(router: ConnectRouter, deps: MonitoringDeps): void {
  const { db } = deps;
  router.service(MonitoringService, {
    listVMMonitoring: async (r, ctx) => {
      await authorizeProject(db, principalOf(ctx), parseProjectName(r.projectName), "monitoring.read");
      return listVmMonitoring(db, deps.pageKey, r, deps.latest);
    },
    queryVMMonitoring: async (r, ctx) => {
      await authorizeVm(db, principalOf(ctx), r.name);
      if (!deps.vmQuery) throw new SvcError("unimplemented", "QueryVMMonitoring is not configured");
      const answer = queryResponse(await queryVmMonitoring(deps.vmQuery, r));
      return withSizeBound(answer, queryResponseBound(answer));
    },
    enableExpandedMonitoring: async (r, ctx) => {
      humanOf(ctx);
      const { projectId } = parseVmName(r.name);
      // Changing a VM's monitoring is an edit of the project, not a read.
      await authorizeProject(db, principalOf(ctx), projectId, "monitoring.write");
      const now = deps.now ?? Date.now;
      const e = await enableExpandedMonitoring(db, r.name, deps.serverOrigin ?? "", deps.agentPackage, now());
      return e;
    },
  });
}

/**
 * The answer as protobuf-es messages, built once: Connect passes a value that is already a message
 * through unchanged, where a plain object would be deep-copied by create(), an object per point.
 * The types name every field, so a field added to the contract fails type-checking here.
 */
function queryResponse(r: VmQueryResult): QueryVMMonitoringResponse {
  return {
    $typeName: "svc.monitoring.v1.QueryVMMonitoringResponse",
    startTimeUnix: r.startTimeUnix,
    endTimeUnix: r.endTimeUnix,
    stepSeconds: r.stepSeconds,
    series: r.series.map((s) => ({
      $typeName: "svc.monitoring.v1.Series",
      metricId: s.metricId,
      unit: s.unit,
      labels: s.labels,
      source: s.source,
      points: pointMessages(s.points),
    })),
    quality: {
      $typeName: "svc.monitoring.v1.Quality",
      lastObservedUnix: r.quality.lastObservedUnix,
      stale: r.quality.stale,
      partial: r.quality.partial,
      series: r.quality.series.map((q) => ({
        $typeName: "svc.monitoring.v1.SeriesQuality",
        metricId: q.metricId,
        labels: q.labels,
        source: q.source,
        expectedPoints: q.expectedPoints,
        presentPoints: q.presentPoints,
        lastObservedUnix: q.lastObservedUnix,
        stale: q.stale,
        gaps: q.gaps.map((g) => ({
          $typeName: "svc.monitoring.v1.Gap",
          startTimeUnix: g.startTimeUnix,
          endTimeUnix: g.endTimeUnix,
        })),
      })),
      errors: r.quality.errors.map((e) => ({ $typeName: "svc.monitoring.v1.QueryError", ...e })),
    },
  };
}

function pointMessages(c: PointColumns): Point[] {
  const out = new Array<Point>(c.timeUnix.length);
  for (let i = 0; i < out.length; i++)
    out[i] = { $typeName: "svc.monitoring.v1.Point", timeUnix: BigInt(c.timeUnix[i]), value: c.value[i] };
  return out;
}

/**
 * An upper bound of the answer's size in JSON and in binary (response-size.ts), from the number of
 * messages, the strings' lengths and the points: a walk over series, not points, where encoding the
 * answer to measure it cost as much as sending it.
 */
export function queryResponseBound(m: QueryVMMonitoringResponse): number {
  let n = 3 * MESSAGE_BOUND_BYTES; // the answer, its quality, and the answer's own scalars
  for (const s of m.series) {
    n += MESSAGE_BOUND_BYTES + s.points.length * POINT_BOUND_BYTES;
    n += stringBoundBytes(s.metricId) + stringBoundBytes(s.unit) + stringBoundBytes(s.source);
    n += labelsBoundBytes(s.labels);
  }
  const q = m.quality;
  if (q) {
    for (const s of q.series) {
      n += MESSAGE_BOUND_BYTES + s.gaps.length * MESSAGE_BOUND_BYTES;
      n += stringBoundBytes(s.metricId) + stringBoundBytes(s.source) + labelsBoundBytes(s.labels);
    }
    for (const e of q.errors) {
      n += MESSAGE_BOUND_BYTES;
      n += stringBoundBytes(e.metricId) + stringBoundBytes(e.code) + stringBoundBytes(e.message);
      n += stringBoundBytes(e.reason);
    }
  }
  return n;
}
