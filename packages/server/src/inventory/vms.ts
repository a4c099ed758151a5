import { noteCreated } from "../call-notes.ts";
import type { Db } from "../db/database.ts";
import type { VmTable } from "../db/schema.ts";
import { invalidArgument, notFound, SvcError } from "../errors.ts";
import { checkFreeText, MAX_COMMENT, MAX_DISPLAY_NAME } from "../free-text.ts";
import { newId } from "../ids.ts";
import { LOCATION, parseProjectName, parseVmName, VM_ID, type VmRef, vmName } from "./names.ts";

export const vmStates = ["RUNNING", "STOPPED", "STARTING", "STOPPING", "DELETED"] as const;
export const stopReasons = ["USER", "MAINTENANCE", "UNEXPECTED"] as const;
export const monitoringLevels = ["BASELINE", "EXPANDED"] as const;
/** Expanded guest monitoring: two distributions of one family, in DC-1 only (docs/agent.md). */
export const expandedDistributions = ["debian-12", "ubuntu-24.04"] as const;
export const expandedLocations = ["dc-1"] as const;

export interface VmView {
  name: string;
  displayName: string;
  state: string;
  location: string;
  distribution: string;
  monitoringLevel: string;
  vcpus: number;
  memoryBytes: bigint;
  createTimeUnix: bigint;
}

export function toVmView(r: VmTable): VmView {
  return {
    name: vmName({ projectId: r.project_id, location: r.location, vmId: r.vm_id }),
    displayName: r.display_name,
    state: r.state,
    location: r.location,
    distribution: r.distribution,
    monitoringLevel: r.monitoring_level,
    vcpus: r.vcpus,
    memoryBytes: BigInt(r.memory_bytes),
    createTimeUnix: BigInt(Math.floor(r.create_time / 1000)),
  };
}

/** Why expanded monitoring is not available for this VM, or undefined when it is. */
export function expandedUnavailableReason(location: string, distribution: string): string | undefined {
  if (!(expandedLocations as readonly string[]).includes(location)) {
    return `expanded monitoring is available in ${expandedLocations.join(", ")} only`;
  }
  if (!(expandedDistributions as readonly string[]).includes(distribution)) {
    return `expanded monitoring supports ${expandedDistributions.join(" and ")} only`;
  }
  return undefined;
}

export interface CreateVmInput {
  parent: string;
  vmId: string;
  location: string;
  displayName: string;
  distribution: string;
  monitoringLevel: string;
  vcpus: number;
  memoryBytes: bigint;
  state: string;
}

export async function createVm(db: Db, input: CreateVmInput, nowMs: number): Promise<VmView> {
  const projectId = parseProjectName(input.parent, "parent");
  if (!VM_ID.test(input.vmId))
    throw invalidArgument("vmId", "must be lowercase letters, digits and hyphens (1..63)");
  if (!LOCATION.test(input.location))
    throw invalidArgument("location", "must be a data center id such as dc-1");
  const level = input.monitoringLevel || "BASELINE";
  if (!(monitoringLevels as readonly string[]).includes(level)) {
    throw invalidArgument("monitoringLevel", `must be one of ${monitoringLevels.join(", ")}`);
  }
  if (level === "EXPANDED") {
    const why = expandedUnavailableReason(input.location, input.distribution);
    if (why) throw invalidArgument("monitoringLevel", why);
  }
  const state = input.state || "RUNNING";
  if (!(vmStates as readonly string[]).includes(state) || state === "DELETED") {
    throw invalidArgument("state", "must be RUNNING, STOPPED, STARTING or STOPPING");
  }
  if (!Number.isInteger(input.vcpus) || input.vcpus < 1 || input.vcpus > 1024) {
    throw invalidArgument("vcpus", "must be 1..1024");
  }
  if (input.memoryBytes <= 0n) throw invalidArgument("memoryBytes", "must be positive");
  const displayName = checkFreeText("displayName", input.displayName, { max: MAX_DISPLAY_NAME });
  const p = await db.selectFrom("projects").select("id").where("id", "=", projectId).executeTakeFirst();
  if (!p) throw notFound(input.parent);
  const exists = await db
    .selectFrom("vms")
    .select("vm_id")
    .where("project_id", "=", projectId)
    .where("vm_id", "=", input.vmId)
    .executeTakeFirst();
  if (exists)
    throw new SvcError("already_exists", `VM ${input.vmId} already exists in ${input.parent}`, {
      reason: "ALREADY_EXISTS",
    });
  const row: VmTable = {
    project_id: projectId,
    vm_id: input.vmId,
    location: input.location,
    display_name: displayName || input.vmId,
    state,
    distribution: input.distribution,
    monitoring_level: level,
    vcpus: input.vcpus,
    memory_bytes: Number(input.memoryBytes),
    create_time: nowMs,
    delete_time: null,
    guest_sender: null,
    guest_seen_time: null,
  };
  noteCreated(vmName({ projectId, location: input.location, vmId: input.vmId }));
  await db.insertInto("vms").values(row).execute();
  return toVmView(row);
}

export async function loadVm(db: Db, ref: VmRef, name: string): Promise<VmTable> {
  const r = await db
    .selectFrom("vms")
    .selectAll()
    .where("project_id", "=", ref.projectId)
    .where("vm_id", "=", ref.vmId)
    .executeTakeFirst();
  if (!r || r.location !== ref.location) throw notFound(name);
  return r;
}

export async function getVm(db: Db, name: string): Promise<VmView> {
  return toVmView(await loadVm(db, parseVmName(name), name));
}

export async function updateVm(
  db: Db,
  input: { name: string; displayName?: string; vcpus?: number; memoryBytes?: bigint },
): Promise<VmView> {
  const ref = parseVmName(input.name);
  await loadVm(db, ref, input.name);
  const set: Partial<VmTable> = {};
  if (input.displayName !== undefined)
    set.display_name = checkFreeText("displayName", input.displayName, { max: MAX_DISPLAY_NAME });
  if (input.vcpus !== undefined) {
    if (!Number.isInteger(input.vcpus) || input.vcpus < 1 || input.vcpus > 1024)
      throw invalidArgument("vcpus", "must be 1..1024");
    set.vcpus = input.vcpus;
  }
  if (input.memoryBytes !== undefined) {
    if (input.memoryBytes <= 0n) throw invalidArgument("memoryBytes", "must be positive");
    set.memory_bytes = Number(input.memoryBytes);
  }
  if (Object.keys(set).length > 0) {
    await db
      .updateTable("vms")
      .set(set)
      .where("project_id", "=", ref.projectId)
      .where("vm_id", "=", ref.vmId)
      .execute();
  }
  return getVm(db, input.name);
}

export async function deleteVm(db: Db, name: string, nowMs: number): Promise<VmView> {
  const ref = parseVmName(name);
  await loadVm(db, ref, name);
  await db
    .updateTable("vms")
    .set({ state: "DELETED", delete_time: nowMs })
    .where("project_id", "=", ref.projectId)
    .where("vm_id", "=", ref.vmId)
    .execute();
  return getVm(db, name);
}

export async function listVms(db: Db, parent: string): Promise<VmView[]> {
  const projectId = parseProjectName(parent, "parent");
  const rows = await db
    .selectFrom("vms")
    .selectAll()
    .where("project_id", "=", projectId)
    .orderBy("location")
    .orderBy("vm_id")
    .execute();
  return rows.map(toVmView);
}

/**
 * One page of a project's VMs in name order, strictly after `after` (a VM name), not deleted.
 * Fetches limit + 1 rows so the caller knows whether more exist.
 */
export async function pageVms(
  db: Db,
  projectId: string,
  after: VmRef | undefined,
  limit: number,
): Promise<VmTable[]> {
  let q = db
    .selectFrom("vms")
    .selectAll()
    .where("project_id", "=", projectId)
    .where("state", "!=", "DELETED");
  if (after) {
    q = q.where((eb) =>
      eb.or([
        eb("location", ">", after.location),
        eb.and([eb("location", "=", after.location), eb("vm_id", ">", after.vmId)]),
      ]),
    );
  }
  return q
    .orderBy("location")
    .orderBy("vm_id")
    .limit(limit + 1)
    .execute();
}

export interface StateEventView {
  vm: string;
  state: string;
  stopReason: string;
  timeUnix: bigint;
}

export async function recordStateEvent(
  db: Db,
  input: { vm: string; state: string; stopReason: string; timeUnix: bigint },
  nowMs: number,
): Promise<StateEventView> {
  const ref = parseVmName(input.vm, "vm");
  await loadVm(db, ref, input.vm);
  if (!(vmStates as readonly string[]).includes(input.state)) {
    throw invalidArgument("state", `must be one of ${vmStates.join(", ")}`);
  }
  let stopReason = input.stopReason;
  if (input.state === "STOPPED") {
    if (!(stopReasons as readonly string[]).includes(stopReason)) {
      throw invalidArgument("stopReason", `a stop needs a reason: ${stopReasons.join(", ")}`);
    }
  } else if (stopReason) {
    throw invalidArgument("stopReason", "is only for STOPPED events");
  } else {
    stopReason = "";
  }
  const t = input.timeUnix > 0n ? Number(input.timeUnix) * 1000 : nowMs;
  await db.transaction().execute(async (tx) => {
    await tx
      .insertInto("vm_state_events")
      .values({
        id: newId(),
        project_id: ref.projectId,
        vm_id: ref.vmId,
        state: input.state,
        stop_reason: stopReason,
        time: t,
      })
      .execute();
    await tx
      .updateTable("vms")
      .set({ state: input.state })
      .where("project_id", "=", ref.projectId)
      .where("vm_id", "=", ref.vmId)
      .execute();
  });
  return { vm: input.vm, state: input.state, stopReason, timeUnix: BigInt(Math.floor(t / 1000)) };
}

export async function listStateEvents(db: Db, vm: string): Promise<StateEventView[]> {
  const ref = parseVmName(vm, "vm");
  await loadVm(db, ref, vm);
  const rows = await db
    .selectFrom("vm_state_events")
    .selectAll()
    .where("project_id", "=", ref.projectId)
    .where("vm_id", "=", ref.vmId)
    .orderBy("time")
    .orderBy("id")
    .execute();
  return rows.map((r) => ({
    vm,
    state: r.state,
    stopReason: r.stop_reason,
    timeUnix: BigInt(Math.floor(r.time / 1000)),
  }));
}

export interface MaintenanceWindowView {
  name: string;
  vms: string[];
  startTimeUnix: bigint;
  endTimeUnix: bigint;
  reason: string;
}

export async function createMaintenanceWindow(
  db: Db,
  input: { parent: string; vms: string[]; startTimeUnix: bigint; endTimeUnix: bigint; reason: string },
): Promise<MaintenanceWindowView> {
  const projectId = parseProjectName(input.parent, "parent");
  if (input.endTimeUnix <= input.startTimeUnix)
    throw invalidArgument("endTimeUnix", "must be after startTimeUnix");
  const reason = checkFreeText("reason", input.reason, { max: MAX_COMMENT, multiline: true });
  for (const [i, v] of input.vms.entries()) {
    const ref = parseVmName(v, `vms[${i}]`);
    if (ref.projectId !== projectId) throw invalidArgument(`vms[${i}]`, "belongs to another project");
    await loadVm(db, ref, v);
  }
  const id = newId();
  noteCreated(`${input.parent}/maintenanceWindows/${id}`);
  await db
    .insertInto("maintenance_windows")
    .values({
      id,
      project_id: projectId,
      vm_ids: JSON.stringify(input.vms),
      start_time: Number(input.startTimeUnix) * 1000,
      end_time: Number(input.endTimeUnix) * 1000,
      reason,
    })
    .execute();
  return {
    name: `${input.parent}/maintenanceWindows/${id}`,
    vms: input.vms,
    startTimeUnix: input.startTimeUnix,
    endTimeUnix: input.endTimeUnix,
    reason,
  };
}

export async function listMaintenanceWindows(db: Db, parent: string): Promise<MaintenanceWindowView[]> {
  const projectId = parseProjectName(parent, "parent");
  const rows = await db
    .selectFrom("maintenance_windows")
    .selectAll()
    .where("project_id", "=", projectId)
    .orderBy("start_time")
    .execute();
  return rows.map((r) => ({
    name: `${parent}/maintenanceWindows/${r.id}`,
    vms: JSON.parse(r.vm_ids) as string[],
    startTimeUnix: BigInt(Math.floor(r.start_time / 1000)),
    endTimeUnix: BigInt(Math.floor(r.end_time / 1000)),
    reason: r.reason,
  }));
}
