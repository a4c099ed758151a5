import { join } from "node:path";
import {
  type Collector,
  createCollector,
  LibvirtClient,
  resolveCollectorOptions,
  STATS_STATE,
  uuidString,
} from "@svc/collector";
import type { Logger } from "pino";
import type { Db } from "../db/database.ts";
import { vmName } from "../inventory/names.ts";
import { createVm } from "../inventory/vms.ts";
import { DEMO_PROJECT } from "./demo-collector.ts";

export interface HostCollectorOptions {
  readonly db: Db;
  readonly baseUrl: string;
  readonly collectorToken: string;
  readonly dataDir: string;
  readonly log: Logger;
  /** SVC_LIBVIRT_URI, e.g. qemu:///system. */
  readonly libvirtUri: string;
  /** SVC_LIBVIRT_SOCKET; default libvirtd's system socket. */
  readonly libvirtSocket?: string;
  /** Register the host's domains as VMs of the demo project (the demo), else read each domain's metadata. */
  readonly demo: boolean;
  readonly onProgress?: (line: string) => void;
}

const DEMO_LOCATION = "dc-1";

/** A libvirt domain name as a VM id of the demo project: kvm-<name>, lowercased, other characters as -. */
export function demoVmId(domainName: string): string {
  const id = `kvm-${domainName.toLowerCase().replace(/[^a-z0-9-]+/g, "-")}`.replace(/-+$/, "");
  return id.slice(0, 63);
}

/**
 * `npm start` with SVC_LIBVIRT_URI: the real hypervisor collector (packages/collector) in this process,
 * sending through this server's own endpoints with the collector token like an installed one. With the
 * demo, every domain on the host when svc starts becomes a VM `kvm-<domain name>` of the demo project
 * (created once; a domain defined later appears after a restart); without it, domains are identified
 * by their metadata element (docs/hypervisor.md). Returns the VM ids it reports for, so that the
 * simulated collector leaves them alone.
 */
export async function startHostCollector(
  o: HostCollectorOptions,
): Promise<{ collector: Collector; vmIds: Set<string> }> {
  const socketPath = o.libvirtSocket ?? "/var/run/libvirt/libvirt-sock";
  const byUuid = new Map<string, string>();
  const vmIds = new Set<string>();
  if (o.demo) {
    const client = await LibvirtClient.connect({
      socketPath,
      uri: o.libvirtUri,
      readOnly: true,
      timeoutMs: 10_000,
    });
    try {
      for (const rec of await client.getAllDomainStats(STATS_STATE)) {
        const vmId = demoVmId(rec.domain.name);
        const name = vmName({ projectId: DEMO_PROJECT, location: DEMO_LOCATION, vmId });
        const exists = await o.db
          .selectFrom("vms")
          .select("vm_id")
          .where("project_id", "=", DEMO_PROJECT)
          .where("vm_id", "=", vmId)
          .executeTakeFirst();
        if (!exists) {
          await createVm(
            o.db,
            {
              parent: `projects/${DEMO_PROJECT}`,
              vmId,
              location: DEMO_LOCATION,
              displayName: rec.domain.name,
              distribution: "",
              monitoringLevel: "BASELINE",
              vcpus: 1,
              memoryBytes: 1n << 30n,
              state: "RUNNING",
            },
            Date.now(),
          );
        }
        byUuid.set(uuidString(rec.domain.uuid), name);
        vmIds.add(vmId);
      }
    } finally {
      client.close();
    }
    o.onProgress?.(
      `libvirt collector: ${byUuid.size} domain(s) of ${o.libvirtUri} as VMs of projects/${DEMO_PROJECT}: ${[...vmIds].join(", ") || "none"}`,
    );
  }
  const log = o.log.child({ component: "host-collector" });
  const collector = createCollector(
    resolveCollectorOptions({
      server: o.baseUrl,
      token: () => o.collectorToken,
      socketPath,
      libvirtUri: o.libvirtUri,
      spoolDir: join(o.dataDir, "collector-spool"),
      vmOf: o.demo ? (d) => byUuid.get(d.uuid) : undefined,
      logger: {
        debug: (msg, f) => log.debug(f ?? {}, msg),
        info: (msg, f) => log.info(f ?? {}, msg),
        warn: (msg, f) => log.warn(f ?? {}, msg),
        error: (msg, f) => log.error(f ?? {}, msg),
      },
    }),
  );
  collector.start();
  return { collector, vmIds };
}
