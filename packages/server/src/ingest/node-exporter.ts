/**
 * node_exporter's series (as a remote-write sender forwards them) turned into guest-map parts; the
 * rules are docs/agent.md's "Use the agent you already run". Labels the sender adds (`instance`,
 * `job`, external labels) are ignored: the VM is the token's.
 */
import type { Label } from "@svc/remotewrite";
import {
  diskLeftOut,
  filesystemLeftOut,
  interfaceLeftOut,
  leaveOut,
  type MapResult,
  NOT_BUSY,
  type Part,
  refuse,
} from "./guest-map.ts";

const MEMORY: Readonly<Record<string, string>> = {
  node_memory_MemTotal_bytes: "total",
  node_memory_MemFree_bytes: "free",
  node_memory_Cached_bytes: "cached",
  node_memory_Buffers_bytes: "buffers",
  node_memory_MemAvailable_bytes: "available",
};

const FILESYSTEM: Readonly<Record<string, string>> = {
  node_filesystem_size_bytes: "size",
  node_filesystem_free_bytes: "free",
  node_filesystem_avail_bytes: "avail",
  node_filesystem_readonly: "readonly",
};

const DISK: Readonly<Record<string, string>> = {
  node_disk_read_bytes_total: "svc_vm_guest_disk_read_bytes_total",
  node_disk_written_bytes_total: "svc_vm_guest_disk_written_bytes_total",
  node_disk_reads_completed_total: "svc_vm_guest_disk_reads_completed_total",
  node_disk_writes_completed_total: "svc_vm_guest_disk_writes_completed_total",
};

const NETWORK: Readonly<Record<string, string>> = {
  node_network_receive_bytes_total: "svc_vm_guest_network_receive_bytes_total",
  node_network_transmit_bytes_total: "svc_vm_guest_network_transmit_bytes_total",
  node_network_receive_packets_total: "svc_vm_guest_network_receive_packets_total",
  node_network_transmit_packets_total: "svc_vm_guest_network_transmit_packets_total",
};

/** Every node_exporter series svc maps (the sender's keep-list in docs/agent.md). */
export const NODE_EXPORTER_SERIES: readonly string[] = [
  "node_cpu_seconds_total",
  ...Object.keys(MEMORY),
  ...Object.keys(FILESYSTEM),
  ...Object.keys(DISK),
  ...Object.keys(NETWORK),
];

export interface SampleRun {
  readonly t: ArrayLike<number>;
  readonly v: ArrayLike<number>;
  readonly stale: (k: number) => boolean;
  readonly start: number;
  readonly end: number;
}

/**
 * Appends one node_exporter series' samples as parts, or refuses it (unknown series, missing label)
 * into `out`; a series a rule leaves out (lo, tmpfs, a partition) is only counted.
 */
export function nodeExporterParts(
  labels: readonly Label[],
  run: SampleRun,
  parts: Part[],
  out: MapResult,
): void {
  const get = (n: string) => labels.find((l) => l.name === n)?.value;
  const name = get("__name__") ?? "";
  const n = run.end - run.start;
  const push = (kind: Part["kind"], dev: string, comp: string) => {
    for (let k = run.start; k < run.end; k++) {
      parts.push({ kind, dev, comp, t: run.t[k]!, v: run.v[k]!, stale: run.stale(k) });
    }
  };
  const need = (label: string): string | undefined => {
    const v = get(label);
    if (v === undefined || v === "") refuse(out, "bad_labels", n, `${name}: label ${label} is required`);
    else if (v.length > 256) refuse(out, "bad_labels", n, `${name}: label ${label} is longer than 256 bytes`);
    else return v;
    return undefined;
  };
  if (name === "node_cpu_seconds_total") {
    const cpu = need("cpu");
    const mode = need("mode");
    if (cpu === undefined || mode === undefined) return;
    push("cpu", "", `${cpu}\u0000${NOT_BUSY.has(mode) ? "idle" : "busy"}\u0000${mode}`);
    return;
  }
  const mem = MEMORY[name];
  if (mem) {
    push("memory", "", mem);
    return;
  }
  const fs = FILESYSTEM[name];
  if (fs) {
    const mountpoint = need("mountpoint");
    const device = need("device");
    const fstype = get("fstype") ?? "";
    if (mountpoint === undefined || device === undefined) return;
    if (filesystemLeftOut(mountpoint, fstype)) {
      leaveOut(out, "excluded_filesystem");
      return;
    }
    push("filesystem", `${mountpoint}\u0000${fstype}\u0000${device}`, fs);
    return;
  }
  const disk = DISK[name];
  if (disk) {
    const device = need("device");
    if (device === undefined) return;
    if (diskLeftOut(device)) {
      leaveOut(out, "excluded_device");
      return;
    }
    push("disk", device, disk);
    return;
  }
  const net = NETWORK[name];
  if (net) {
    const device = need("device");
    if (device === undefined) return;
    if (interfaceLeftOut(device)) {
      leaveOut(out, "excluded_device");
      return;
    }
    push("network", device, net);
    return;
  }
  refuse(
    out,
    "unknown_metric",
    n,
    `"${name.slice(0, 100)}" is not a svc VM metric nor a node_exporter series svc maps (docs/agent.md)`,
  );
}
