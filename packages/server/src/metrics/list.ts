import type { Db } from "../db/database.ts";
import type { VmTable } from "../db/schema.ts";
import { invalidArgument, SvcError } from "../errors.ts";
import { parseProjectName, parseVmName, vmName } from "../inventory/names.ts";
import { pageVms } from "../inventory/vms.ts";
import { clampPageSize, decodePageToken, encodePageToken } from "../pagination.ts";

export interface ListVmMonitoringInput {
  projectName: string;
  pageSize: number;
  pageToken: string;
  inventoryOnly: boolean;
}

export interface VmMonitoringView {
  name: string;
  displayName: string;
  state: string;
  location: string;
  monitoringLevel: string;
  cpuUtilizationPct?: number;
  memoryUsedBytes?: number;
  memoryTotalBytes?: number;
  quality?: { lastObservedUnix: bigint; stale: boolean; error: boolean };
  /** The sender that last fed the guest series (ingest/guest-seen.ts); absent before any. */
  guestSender?: { name: string; lastSeenUnix: bigint };
}

/** Latest metric values for a page of VMs, read in one round trip to the metrics store. */
export type LatestVmMetrics = (
  projectId: string,
  vms: readonly VmTable[],
) => Promise<
  Map<
    string,
    Omit<VmMonitoringView, "name" | "displayName" | "state" | "location" | "monitoringLevel" | "guestSender">
  >
>;

/**
 * One page of the project's VMs in stable name order. The caller has already checked the principal's
 * access to the project. With inventoryOnly, no metric is read.
 */
export async function listVmMonitoring(
  db: Db,
  pageKey: Buffer,
  input: ListVmMonitoringInput,
  latest?: LatestVmMetrics,
): Promise<{ vms: VmMonitoringView[]; nextPageToken?: string }> {
  const projectId = parseProjectName(input.projectName);
  // AIP-158: a negative page size is an error; 0 (unset) means the maximum, more than it is clamped.
  if (input.pageSize < 0) throw invalidArgument("pageSize", "must be 0 (the default of 50) or more");
  const size = clampPageSize(input.pageSize);
  const scope = `ListVMMonitoring:${projectId}`;
  const after = input.pageToken
    ? parseVmName(decodePageToken(pageKey, scope, input.pageToken), "pageToken")
    : undefined;
  if (!input.inventoryOnly && !latest) {
    throw new SvcError(
      "unimplemented",
      "metrics in ListVMMonitoring are not available yet; use inventoryOnly: true",
    );
  }
  const rows = await pageVms(db, projectId, after, size);
  const page = rows.slice(0, size);
  const metrics = input.inventoryOnly || !latest ? undefined : await latest(projectId, page);
  const vms = page.map((r) => {
    const name = vmName({ projectId: r.project_id, location: r.location, vmId: r.vm_id });
    return {
      name,
      displayName: r.display_name,
      state: r.state,
      location: r.location,
      monitoringLevel: r.monitoring_level,
      guestSender:
        r.guest_sender !== null && r.guest_seen_time !== null
          ? { name: r.guest_sender, lastSeenUnix: BigInt(Math.floor(Number(r.guest_seen_time) / 1000)) }
          : undefined,
      ...metrics?.get(name),
    };
  });
  const last = page[page.length - 1];
  return rows.length > size && last
    ? {
        vms,
        nextPageToken: encodePageToken(
          pageKey,
          scope,
          vmName({ projectId, location: last.location, vmId: last.vm_id }),
        ),
      }
    : { vms };
}
