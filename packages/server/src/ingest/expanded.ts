import type { Db } from "../db/database.ts";
import { SvcError } from "../errors.ts";
import { parseVmName } from "../inventory/names.ts";
import { expandedUnavailableReason, loadVm } from "../inventory/vms.ts";
import { AGENT_PACKAGE_PATH, type AgentPackage } from "./agent-package.ts";
import { issueAgentToken } from "./credentials.ts";

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
  /** The guest agent's per-VM token, returned this once; earlier tokens of the VM stop at its first use (or in 24 h). */
  readonly agentToken: string;
}

/**
 * Opts one VM into expanded guest monitoring (docs/agent.md): refused with failed_precondition
 * (EXPANDED_UNAVAILABLE) outside DC-1 or for an unsupported distribution. Sets the VM's monitoring
 * level and issues the agent's token. svc installs nothing and restarts nothing: the customer runs
 * the returned command inside the guest. Calling it again issues a new token; the old one keeps working until the
 * new one is first used or 24 hours pass (ingest/credentials.ts), so a running agent loses nothing.
 */
export async function enableExpandedMonitoring(
  db: Db,
  name: string,
  serverOrigin: string,
  agentPackage: AgentPackage | undefined,
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
  // Without a published package there is no command that installs a verified agent: refuse before
  // changing anything.
  if (!agentPackage) {
    throw new SvcError(
      "failed_precondition",
      "the guest agent package is not published on this server (the operator builds it with npm run build:agent)",
      { reason: "EXPANDED_UNAVAILABLE", metadata: { why: "agent package not published" } },
    );
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
    installCommand: installCommand(serverOrigin, name, agentPackage),
    agentToken,
  };
}

/**
 * The guest-side steps, as root on Debian 12 or Ubuntu 24.04 (apt pulls their own Node.js): fetch the package from
 * svc, check its SHA-256 (the command carries the sum), install it (the package creates the svc-agent
 * user and the directories), write the server and VM, read the token from the terminal into a file
 * only root and the agent can read, start the service. The command holds no secret.
 */
export function installCommand(serverOrigin: string, name: string, pkg: AgentPackage): string {
  const deb = `/tmp/${pkg.file}`;
  return [
    `curl -fsSLo ${deb} ${serverOrigin}${AGENT_PACKAGE_PATH}/${pkg.file}`,
    `echo '${pkg.sha256}  ${deb}' | sha256sum -c -`,
    `sudo apt-get install -y ${deb}`,
    `printf 'SVC_AGENT_SERVER=%s\\nSVC_AGENT_VM=%s\\n' '${serverOrigin}' '${name}' | sudo tee /etc/svc-agent/agent.env >/dev/null`,
    "echo 'Paste the agent token, then Enter:'",
    "read -rs SVC_AGENT_TOKEN && printf '%s' \"$SVC_AGENT_TOKEN\" | sudo install -m 0640 -o root -g svc-agent /dev/stdin /etc/svc-agent/token",
    "sudo systemctl enable --now svc-agent",
  ].join(" && ");
}
