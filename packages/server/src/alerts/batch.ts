import type { Db } from "../db/database.ts";
import type { AlertInstanceTable } from "../db/schema.ts";
import type { VmTimeline } from "./condition.ts";
import { type MaintenanceRow, type StateEventRow, timelinesOf } from "./read.ts";
import type { LiveVm } from "./rules.ts";

/**
 * What the evaluator reads from the database for a batch of projects, in a few statements for the
 * whole batch instead of a few per rule (issue 33): the live VMs, the stored instances of the rules,
 * and the VM timelines of the projects that have inventory rules.
 */
export interface ProjectBatch {
  /** Live VMs by project id (every project of the batch; empty when it has none). */
  readonly vms: ReadonlyMap<string, readonly LiveVm[]>;
  /** The projects of `vms` this call read from the database (the others were kept). */
  readonly vmsRead: ReadonlyMap<string, readonly LiveVm[]>;
  /** Stored instance rows by rule id (retired rows included). */
  readonly instances: ReadonlyMap<string, readonly AlertInstanceTable[]>;
  /** VM timelines by project id, for the projects asked for. */
  readonly timelines: ReadonlyMap<string, Map<string, VmTimeline>>;
}

export interface BatchRequest {
  readonly projectIds: readonly string[];
  readonly ruleIds: readonly string[];
  /** Projects with an unexpected-stop or telemetry-age rule. */
  readonly timelineProjectIds: readonly string[];
  /**
   * Live VMs the caller kept under the eval revision it read before this batch (evaluator.ts): the
   * projects found here are not read again.
   */
  readonly keptVms?: ReadonlyMap<string, readonly LiveVm[]>;
}

function push<K, V>(m: Map<K, V[]>, k: K, v: V): void {
  const list = m.get(k);
  if (list) list.push(v);
  else m.set(k, [v]);
}

export async function loadProjectBatch(db: Db, req: BatchRequest, atMs: number): Promise<ProjectBatch> {
  const tl = req.timelineProjectIds;
  const kept = req.keptVms;
  const vmProjectIds = kept ? req.projectIds.filter((p) => !kept.has(p)) : req.projectIds;
  const [vmRows, instanceRows, events, windows] = await Promise.all([
    vmProjectIds.length === 0
      ? []
      : db
          .selectFrom("vms")
          .select(["project_id", "location", "vm_id", "state", "create_time"])
          .where("project_id", "in", vmProjectIds)
          .where("state", "!=", "DELETED")
          .execute(),
    req.ruleIds.length === 0
      ? []
      : db.selectFrom("alert_instances").selectAll().where("rule_id", "in", req.ruleIds).execute(),
    tl.length === 0
      ? []
      : db
          .selectFrom("vm_state_events")
          .select(["project_id", "vm_id", "state", "stop_reason", "time"])
          .where("project_id", "in", tl)
          .where("time", "<=", atMs)
          .orderBy("time")
          .orderBy("id")
          .execute(),
    tl.length === 0
      ? []
      : db
          .selectFrom("maintenance_windows")
          .select(["project_id", "vm_ids", "start_time", "end_time"])
          .where("project_id", "in", tl)
          .execute(),
  ]);
  const vms = new Map<string, readonly LiveVm[]>(vmProjectIds.map((p) => [p, []]));
  for (const r of vmRows)
    (vms.get(r.project_id) as LiveVm[]).push({
      name: `projects/${r.project_id}/locations/${r.location}/vms/${r.vm_id}`,
      state: r.state,
      createTime: r.create_time,
    });
  /** The projects whose VMs this call read (not kept): the caller keeps them. */
  const read = new Map(vms);
  if (kept) for (const p of req.projectIds) if (!vms.has(p)) vms.set(p, kept.get(p) ?? []);
  const instances = new Map<string, AlertInstanceTable[]>();
  for (const r of instanceRows) push(instances, r.rule_id, r);
  const eventsBy = new Map<string, StateEventRow[]>();
  for (const e of events) push(eventsBy, e.project_id, e);
  const windowsBy = new Map<string, MaintenanceRow[]>();
  for (const w of windows) push(windowsBy, w.project_id, w);
  const timelines = new Map<string, Map<string, VmTimeline>>();
  for (const p of tl)
    timelines.set(p, timelinesOf(vms.get(p) ?? [], eventsBy.get(p) ?? [], windowsBy.get(p) ?? []));
  return { vms, vmsRead: read, instances, timelines };
}
