import type { Db } from "../db/database.ts";
import { SvcError } from "../errors.ts";
import { issueAgentToken } from "../ingest/credentials.ts";
import { parseVmName } from "../inventory/names.ts";
import { expandedUnavailableReason, loadVm } from "../inventory/vms.ts";

export interface ExpandedEnrollment {
  /** The VM after the change (monitoring level EXPANDED). */
  readonly vm: {
    name: string;
    displayName: string;
    state: string;
    location: string;
    monitoringLevel: string;
  };
  /** Command the customer runs in the guest, as root; holds no secret (the token is separate). */
  readonly installCommand: string;
  /** The guest agent's per-VM token, returned this once; earlier tokens of the VM are revoked. */
  readonly agentToken: string;
}

/**
 * Opts one VM into expanded guest monitoring (SPEC §1.5): refused with failed_precondition
 * (EXPANDED_UNAVAILABLE) outside DC-1 or for an unsupported distribution. Sets the VM's monitoring
 * level and issues the agent's token. svc installs nothing and restarts nothing: the customer runs
 * the returned command inside the guest. Calling it again issues a new token (the old one stops).
 */
export async function enableExpandedMonitoring(
  db: Db,
  name: string,
  serverOrigin: string,
  nowMs: number,
): Promise<ExpandedEnrollment> {
  const ref = parseVmName(name);
  const vm = await loadVm(db, ref, name);
  if (vm.state === "DELETED")
    throw new SvcError("failed_precondition", `${name} is deleted`, {
      reason: "EXPANDED_UNAVAILABLE",
      metadata: { why: "deleted" },
    });
  const why = expandedUnavailableReason(vm.location, vm.distribution);
  if (why) {
    throw new SvcError("failed_precondition", `${name}: ${why}`, {
      reason: "EXPANDED_UNAVAILABLE",
      metadata: { why },
    });
  }
  await db
    .updateTable("vms")
    .set({ monitoring_level: "EXPANDED" })
    .where("project_id", "=", ref.projectId)
    .where("vm_id", "=", ref.vmId)
    .execute();
  const agentToken = await issueAgentToken(db, ref, nowMs);
  return {
    vm: {
      name,
      displayName: vm.display_name,
      state: vm.state,
      location: vm.location,
      monitoringLevel: "EXPANDED",
    },
    installCommand: installCommand(serverOrigin, name),
    agentToken,
  };
}

/** The guest-side steps: install the agent package, store the token in a root-only file, start it. */
export function installCommand(serverOrigin: string, name: string): string {
  return [
    "sudo install -d -m 0700 /etc/svc-agent",
    "read -rs SVC_AGENT_TOKEN && printf '%s' \"$SVC_AGENT_TOKEN\" | sudo tee /etc/svc-agent/token >/dev/null",
    "sudo chmod 0600 /etc/svc-agent/token",
    `sudo svc-agent --server ${serverOrigin} --vm ${name} --token-file /etc/svc-agent/token`,
  ].join(" && ");
}
