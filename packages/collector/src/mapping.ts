import type { Label, TimeSeries } from "@svc/remotewrite";
import type { TypedValue } from "./libvirt/remote.ts";

/**
 * libvirt's per-domain fields → svc's hypervisor series (docs/hypervisor.md has the table). Pure: the
 * same params give the same series. A field libvirt did not report gives no sample, never a zero.
 */

/** virDomainState. */
export const DomainState = {
  NOSTATE: 0,
  RUNNING: 1,
  BLOCKED: 2,
  PAUSED: 3,
  SHUTDOWN: 4,
  SHUTOFF: 5,
  CRASHED: 6,
  PMSUSPENDED: 7,
} as const;

/** virDomainShutoffReason. */
export const ShutoffReason = {
  UNKNOWN: 0,
  SHUTDOWN: 1,
  DESTROYED: 2,
  CRASHED: 3,
  MIGRATED: 4,
  SAVED: 5,
  FAILED: 6,
  FROM_SNAPSHOT: 7,
  DAEMON: 8,
} as const;

/** virDomainPausedReason values that mean the guest stopped by itself rather than by the provider. */
const PAUSED_UNEXPECTED = new Set([
  5 /* IOERROR */, 6 /* WATCHDOG */, 10 /* CRASHED */, 13 /* POSTCOPY_FAILED */,
]);
const PAUSED_STARTING_UP = 11;
const PAUSED_SHUTTING_DOWN = 8;

/** svc's inventory state of a VM as RecordVMStateEvent takes it. */
export interface VmState {
  readonly state: "RUNNING" | "STOPPED" | "STARTING" | "STOPPING";
  /** For STOPPED: USER (the guest or the provider stopped it) or UNEXPECTED. */
  readonly stopReason: "" | "USER" | "UNEXPECTED";
}

/**
 * libvirt's (state, reason) → svc's state. A guest shutdown, the provider's shutdown, save, migration
 * and a revert are intentional; a destroy from the host side, a crash, a QEMU process that died
 * (libvirt: shutoff/crashed or shutoff/failed) and the daemon killing it on reconnect are unexpected.
 * Undefined for a state libvirt does not know (NOSTATE): nothing is reported.
 */
export function mapState(state: number, reason: number): VmState | undefined {
  switch (state) {
    case DomainState.RUNNING:
    case DomainState.BLOCKED:
      return { state: "RUNNING", stopReason: "" };
    case DomainState.SHUTDOWN:
      return { state: "STOPPING", stopReason: "" };
    case DomainState.CRASHED:
      return { state: "STOPPED", stopReason: "UNEXPECTED" };
    case DomainState.PMSUSPENDED:
      return { state: "STOPPED", stopReason: "USER" };
    case DomainState.PAUSED:
      if (reason === PAUSED_STARTING_UP) return { state: "STARTING", stopReason: "" };
      if (reason === PAUSED_SHUTTING_DOWN) return { state: "STOPPING", stopReason: "" };
      return { state: "STOPPED", stopReason: PAUSED_UNEXPECTED.has(reason) ? "UNEXPECTED" : "USER" };
    case DomainState.SHUTOFF:
      switch (reason) {
        case ShutoffReason.DESTROYED:
        case ShutoffReason.CRASHED:
        case ShutoffReason.FAILED:
        case ShutoffReason.DAEMON:
          return { state: "STOPPED", stopReason: "UNEXPECTED" };
        default:
          // SHUTDOWN, MIGRATED, SAVED, FROM_SNAPSHOT, and UNKNOWN (defined, never started since the
          // daemon started): nobody's failure.
          return { state: "STOPPED", stopReason: "USER" };
      }
    default:
      return undefined;
  }
}

function num(v: TypedValue | undefined): number | undefined {
  if (typeof v === "bigint") return Number(v);
  if (typeof v === "number") return v;
  return undefined;
}

function str(v: TypedValue | undefined): string | undefined {
  return typeof v === "string" ? v : undefined;
}

export interface MappedDomain {
  readonly series: TimeSeries[];
  /** undefined when libvirt reported no state field. */
  readonly state: VmState | undefined;
  /** Whether libvirt reported the domain active (running, paused, …): only then are samples sent. */
  readonly active: boolean;
}

const KIB = 1024;

/**
 * One domain's stats at `timestampMs` as remote-write series for the svc VM `vm` (its full name).
 * The per-device label is the device libvirt names: the disk's target (vda) and the interface's host
 * device (the tap, e.g. vnet3), as the guest's own names are not visible to the host.
 */
export function mapDomainStats(
  vm: string,
  params: ReadonlyMap<string, TypedValue>,
  timestampMs: number,
): MappedDomain {
  const series: TimeSeries[] = [];
  const base: Label[] = [{ name: "vm", value: vm }];
  const add = (name: string, value: number | undefined, extra: Label[] = []) => {
    if (value === undefined || !Number.isFinite(value)) return;
    series.push({
      labels: [{ name: "__name__", value: name }, ...base, ...extra],
      samples: [{ value, timestampMs }],
    });
  };
  const stateNum = num(params.get("state.state"));
  const state = stateNum === undefined ? undefined : mapState(stateNum, num(params.get("state.reason")) ?? 0);
  const active = stateNum === DomainState.RUNNING || stateNum === DomainState.BLOCKED;
  if (stateNum === undefined || stateNum === DomainState.SHUTOFF || stateNum === DomainState.CRASHED) {
    return { series, state, active: false };
  }
  const cpuNs = num(params.get("cpu.time"));
  add("svc_vm_cpu_seconds_total", cpuNs === undefined ? undefined : cpuNs / 1e9);
  add("svc_vm_vcpus", num(params.get("vcpu.current")));

  // Guest memory only from the guest's own balloon report: available − unused (cache counts as used).
  const available = num(params.get("balloon.available"));
  const unused = num(params.get("balloon.unused"));
  if (available !== undefined && unused !== undefined) {
    add("svc_vm_memory_total_bytes", available * KIB);
    add("svc_vm_memory_free_bytes", unused * KIB);
    const caches = num(params.get("balloon.disk_caches"));
    if (caches !== undefined) add("svc_vm_memory_cached_bytes", caches * KIB);
  }

  const blocks = num(params.get("block.count")) ?? 0;
  for (let i = 0; i < blocks; i++) {
    const device = str(params.get(`block.${i}.name`));
    if (!device) continue;
    const l = [{ name: "device", value: device }];
    add("svc_vm_disk_read_bytes_total", num(params.get(`block.${i}.rd.bytes`)), l);
    add("svc_vm_disk_written_bytes_total", num(params.get(`block.${i}.wr.bytes`)), l);
    add("svc_vm_disk_reads_completed_total", num(params.get(`block.${i}.rd.reqs`)), l);
    add("svc_vm_disk_writes_completed_total", num(params.get(`block.${i}.wr.reqs`)), l);
  }
  const nets = num(params.get("net.count")) ?? 0;
  for (let i = 0; i < nets; i++) {
    const iface = str(params.get(`net.${i}.name`));
    if (!iface) continue;
    const l = [{ name: "interface", value: iface }];
    add("svc_vm_network_receive_bytes_total", num(params.get(`net.${i}.rx.bytes`)), l);
    add("svc_vm_network_transmit_bytes_total", num(params.get(`net.${i}.tx.bytes`)), l);
    add("svc_vm_network_receive_packets_total", num(params.get(`net.${i}.rx.pkts`)), l);
    add("svc_vm_network_transmit_packets_total", num(params.get(`net.${i}.tx.pkts`)), l);
  }
  return { series, state, active };
}

/**
 * The guest agent's filesystems (virDomainGetGuestInfo, FILESYSTEM) as used/size series per mount.
 * qemu-ga's total-bytes is used + available to unprivileged users, so size = total-bytes; used-bytes is
 * what df shows as Used. A filesystem the agent reports without sizes (e.g. no statvfs) gives nothing.
 */
export function mapGuestFilesystems(
  vm: string,
  params: ReadonlyMap<string, TypedValue>,
  timestampMs: number,
): TimeSeries[] {
  const out: TimeSeries[] = [];
  const n = num(params.get("fs.count")) ?? 0;
  for (let i = 0; i < n; i++) {
    const mountpoint = str(params.get(`fs.${i}.mountpoint`));
    const used = num(params.get(`fs.${i}.used-bytes`));
    const total = num(params.get(`fs.${i}.total-bytes`));
    if (!mountpoint || used === undefined || total === undefined) continue;
    const labels: Label[] = [
      { name: "vm", value: vm },
      { name: "mountpoint", value: mountpoint },
      { name: "fstype", value: str(params.get(`fs.${i}.fstype`)) ?? "" },
      { name: "device", value: str(params.get(`fs.${i}.name`)) ?? "" },
    ];
    out.push({
      labels: [{ name: "__name__", value: "svc_vm_filesystem_used_bytes" }, ...labels],
      samples: [{ value: used, timestampMs }],
    });
    out.push({
      labels: [{ name: "__name__", value: "svc_vm_filesystem_size_bytes" }, ...labels],
      samples: [{ value: total, timestampMs }],
    });
  }
  return out;
}
