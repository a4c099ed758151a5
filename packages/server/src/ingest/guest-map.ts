/**
 * Guest metrics from an agent the customer already runs (node_exporter behind a remote-write sender,
 * or an OpenTelemetry host-metrics exporter), mapped onto svc's own guest series so the console, the
 * RPCs and alert rules read them unchanged. The rules are written down in docs/agent.md ("Use the
 * agent you already run"); this module applies them.
 *
 * A sender delivers *parts* (one CPU mode of one CPU, MemFree, one filesystem's size…); svc's series
 * are sums and differences of parts at one timestamp (busy CPU seconds over every CPU and busy mode,
 * used = size − free). A sender may split one scrape over several requests (Prometheus' queue flushes
 * on a timer), so parts are grouped per timestamp and a group is emitted once it holds as many parts
 * as that group had last time; an incomplete group is held up to GROUP_HOLD_MS, then dropped (missing,
 * never a partial sum) and the smaller part count becomes the new expectation.
 */
import type { Label, Sample, TimeSeries } from "@svc/remotewrite";
import { staleNaN } from "../storage/interface.ts";

/** Why a part was refused (400) — or left out by rule (counted, not an error). */
export type MapRefusal = "unknown_metric" | "too_many_series" | "bad_labels";
export type LeaveOut = "excluded_device" | "excluded_filesystem" | "late_part";

export type GroupKind = "cpu" | "memory" | "filesystem" | "disk" | "network";

/** One input value: the component `comp` of the group `kind` + `dev` at time t (ms). */
export interface Part {
  readonly kind: GroupKind;
  /** The device's identity: "" (cpu, memory), interface, disk, or mountpoint\0fstype\0device. */
  readonly dev: string;
  /**
   * cpu: "<cpu>\0<busy|idle>\0<mode>"; memory: total|free|cached|buffers|available|used|slab_reclaimable;
   * fs: size|free|avail|readonly or otel_used|otel_free|otel_reserved; disk/network: the target series' name.
   */
  readonly comp: string;
  readonly t: number;
  readonly v: number;
  /** A staleness marker (kept as a flag: the marker's NaN bits do not survive every container). */
  readonly stale: boolean;
}

/** At most this many devices per kind and VM (as svc's agent: 32 interfaces, 64 mounts). */
export const DEVICE_LIMITS: Readonly<Record<GroupKind, number>> = {
  cpu: 1, // one group whatever the CPUs: they add parts to a sum, not series
  memory: 1,
  filesystem: 64,
  disk: 64,
  network: 32,
};

/** How long parts of an incomplete group wait for the rest, ms. */
export const GROUP_HOLD_MS = 2 * 60_000;
/** A device not seen for this long no longer counts towards DEVICE_LIMITS, ms. */
const DEVICE_FORGET_MS = 60 * 60_000;

interface Pending {
  readonly comps: Map<string, number>;
  readonly first: number;
  stale: boolean;
}

/** What the mapper keeps per VM between requests. */
export interface GuestMapState {
  /** Parts each group had when last emitted complete. */
  readonly expected: Map<string, number>;
  /** Newest emitted timestamp per group: later parts at or before it are late. */
  readonly emitted: Map<string, number>;
  /** Incomplete groups by group key \0 t. */
  readonly pending: Map<string, Pending>;
  /** Devices seen per kind, with when last seen (ms). */
  readonly devices: Map<GroupKind, Map<string, number>>;
  /** The one mount point reported per filesystem device (bind mounts repeat its usage): the shortest. */
  readonly fsMount: Map<string, string>;
}

export function newGuestMapState(): GuestMapState {
  return {
    expected: new Map(),
    emitted: new Map(),
    pending: new Map(),
    devices: new Map(),
    fsMount: new Map(),
  };
}

/** The mapped series, ready for the ingester, and what was refused or left out. */
export interface MapResult {
  readonly series: TimeSeries[];
  readonly refused: Map<MapRefusal, { series: number; samples: number; example: string }>;
  readonly leftOut: Map<LeaveOut, number>;
}

export function newMapResult(): MapResult {
  return { series: [], refused: new Map(), leftOut: new Map() };
}

export function refuse(r: MapResult, reason: MapRefusal, samples: number, why: string): void {
  const x = r.refused.get(reason);
  if (x) {
    x.series++;
    x.samples += samples;
  } else r.refused.set(reason, { series: 1, samples, example: why });
}

export function leaveOut(r: MapResult, reason: LeaveOut, n = 1): void {
  r.leftOut.set(reason, (r.leftOut.get(reason) ?? 0) + n);
}

// --- What is left out, so the stored series mean what svc's agent sends (docs/agent.md). ---

/** Kernel, memory, container-layer and read-only image filesystems: svc's agent's list and node_exporter's default. */
const SKIPPED_FSTYPES = new Set(
  (
    "proc procfs sysfs tmpfs devtmpfs devpts ramfs cgroup cgroup2 securityfs pstore bpf debugfs tracefs " +
    "configfs fusectl mqueue hugetlbfs autofs binfmt_misc rpc_pipefs nsfs efivarfs selinuxfs nfsd overlay " +
    "squashfs iso9660"
  ).split(" "),
);
/** node_exporter's default --collector.filesystem.mount-points-exclude. */
const SKIPPED_MOUNTS =
  /^\/(dev|proc|run\/credentials\/.+|sys|var\/lib\/docker\/.+|var\/lib\/containers\/storage\/.+)($|\/)/;

export function filesystemLeftOut(mountpoint: string, fstype: string): boolean {
  return SKIPPED_FSTYPES.has(fstype) || fstype.startsWith("fuse.") || SKIPPED_MOUNTS.test(mountpoint);
}

/** Partitions (their disk counts them), and devices that are not disk traffic or count the same I/O again. */
const SKIPPED_DISKS =
  /^(loop|ram|zram|dm-|md|nbd|sr|fd)\d*|^(h|s|v|xv)d[a-z]+\d+$|^(nvme\d+n\d+|mmcblk\d+)p\d+$/;

export function diskLeftOut(device: string): boolean {
  return SKIPPED_DISKS.test(device);
}

/** Loopback and virtual interfaces (bridges, container pairs, tunnels): they count the same traffic again. */
const SKIPPED_INTERFACES =
  /^(lo|veth.*|docker.*|br-.*|virbr.*|vnet\d+|ifb\d+|cni.*|flannel.*|cali.*|vxlan.*|tunl\d+|tun\d+|tap.*|kube-.*|weave.*|dummy.*|lxcbr.*|lxc.*|podman.*)$/;

export function interfaceLeftOut(name: string): boolean {
  return SKIPPED_INTERFACES.test(name);
}

/** CPU states that are not busy time: svc counts busy as every state but these. */
export const NOT_BUSY = new Set(["idle", "iowait", "wait", "steal"]);

// --- Grouping and emission. ---

/**
 * Adds parts to the VM's groups and emits every group that is complete (or carries a staleness
 * marker) as svc series labelled with `vm`. `now` is the receive time (ms).
 */
export function emitGroups(
  state: GuestMapState,
  parts: readonly Part[],
  vm: string,
  now: number,
  out: MapResult,
): void {
  const byGroup = new Map<
    string,
    { kind: GroupKind; dev: string; t: number; comps: Map<string, number>; stale: boolean }
  >();
  // First, so this request's parts already meet the lowered expectation.
  for (const [key, p] of state.pending) {
    if (now - p.first < GROUP_HOLD_MS) continue;
    // Never completed: drop it (missing, not a partial sum) and expect as many parts as it had.
    state.pending.delete(key);
    state.expected.set(key.slice(0, key.indexOf("\u0002")), p.comps.size);
  }
  // Each filesystem device once, as svc's agent: under its shortest mount point seen.
  for (const p of parts) {
    if (p.kind !== "filesystem") continue;
    const [mount, , device] = p.dev.split("\u0000") as [string, string, string];
    const owner = state.fsMount.get(device);
    if (
      owner === undefined ||
      mount.length < owner.length ||
      (mount.length === owner.length && mount < owner)
    ) {
      if (state.fsMount.size < 4 * DEVICE_LIMITS.filesystem || owner !== undefined)
        state.fsMount.set(device, mount);
    }
  }
  for (const p of parts) {
    if (p.kind === "filesystem") {
      const [mount, , device] = p.dev.split("\u0000") as [string, string, string];
      if (state.fsMount.get(device) !== mount) {
        leaveOut(out, "excluded_filesystem");
        continue;
      }
    }
    const gk = `${p.kind}\u0001${p.dev}`;
    if (!admitDevice(state, p.kind, p.dev, now)) {
      refuse(
        out,
        "too_many_series",
        1,
        `more than ${DEVICE_LIMITS[p.kind]} ${p.kind} devices from one VM (${JSON.stringify(p.dev.split("\u0000")[0]!.slice(0, 60))} refused)`,
      );
      continue;
    }
    const done = state.emitted.get(gk);
    if (done !== undefined && p.t <= done) {
      leaveOut(out, "late_part");
      continue;
    }
    const key = `${gk}\u0002${p.t}`;
    let g = byGroup.get(key);
    if (!g) {
      const held = state.pending.get(key);
      g = { kind: p.kind, dev: p.dev, t: p.t, comps: held ? held.comps : new Map(), stale: !!held?.stale };
      byGroup.set(key, g);
    }
    g.comps.set(p.comp, p.stale ? 0 : p.v);
    if (p.stale) g.stale = true;
  }
  const samples = new Map<string, { labels: Label[]; samples: Sample[] }>();
  // Oldest first, so a group's newer timestamp never blocks its older one as "late".
  const groups = [...byGroup.entries()].sort((a, b) => a[1].t - b[1].t);
  for (const [key, g] of groups) {
    const gk = `${g.kind}\u0001${g.dev}`;
    const stale = g.stale;
    const want = state.expected.get(gk) ?? 0;
    if (!stale && g.comps.size < want) {
      const held = state.pending.get(key);
      if (held) held.stale ||= g.stale;
      else state.pending.set(key, { comps: g.comps, first: now, stale: g.stale });
      continue;
    }
    state.pending.delete(key);
    state.expected.set(gk, g.comps.size);
    state.emitted.set(gk, g.t);
    for (const [name, labels, v] of compute(g.kind, g.dev, g.comps)) {
      addSample(samples, name, labels, vm, g.t, stale ? staleNaN() : v);
    }
  }
  for (const ts of samples.values()) {
    ts.samples.sort((a, b) => a.timestampMs - b.timestampMs);
    out.series.push(ts);
  }
}

function admitDevice(state: GuestMapState, kind: GroupKind, dev: string, now: number): boolean {
  let seen = state.devices.get(kind);
  if (!seen) {
    seen = new Map();
    state.devices.set(kind, seen);
  }
  if (seen.has(dev)) {
    seen.set(dev, now);
    return true;
  }
  if (seen.size >= DEVICE_LIMITS[kind]) {
    for (const [d, at] of seen) if (now - at > DEVICE_FORGET_MS) seen.delete(d);
    if (seen.size >= DEVICE_LIMITS[kind]) return false;
  }
  seen.set(dev, now);
  return true;
}

type Out = [name: string, labels: Label[], v: number];

/** svc's series from one complete group (docs/agent.md, "Use the agent you already run"). */
function compute(kind: GroupKind, dev: string, c: ReadonlyMap<string, number>): Out[] {
  switch (kind) {
    case "cpu": {
      let busy = 0;
      const cpus = new Set<string>();
      for (const [k, v] of c) {
        const [cpu, which] = k.split("\u0000") as [string, string];
        cpus.add(cpu);
        if (which === "busy") busy += v;
      }
      const out: Out[] = [["svc_vm_guest_cpu_seconds_total", [], busy]];
      // A sender that sums over CPUs (no CPU attribute) does not say how many there are.
      if (!cpus.has("")) out.push(["svc_vm_guest_vcpus", [], cpus.size]);
      return out;
    }
    case "memory": {
      const out: Out[] = [];
      // OpenTelemetry reports states that add up to the capacity; node_exporter reports MemTotal.
      const total =
        c.get("total") ??
        (c.has("used") && c.has("free")
          ? (c.get("used") ?? 0) +
            (c.get("free") ?? 0) +
            (c.get("buffers") ?? 0) +
            (c.get("cached") ?? 0) +
            (c.get("slab_reclaimable") ?? 0)
          : undefined);
      if (total !== undefined) out.push(["svc_vm_memory_total_bytes", [], total]);
      for (const [comp, name] of MEMORY_SERIES) {
        const v = c.get(comp);
        if (v !== undefined) out.push([name, [], v]);
      }
      return out;
    }
    case "filesystem": {
      if (c.get("readonly") === 1) return [];
      const [mountpoint, fstype, device] = dev.split("\u0000") as [string, string, string];
      const labels: Label[] = [
        { name: "mountpoint", value: mountpoint },
        { name: "fstype", value: fstype },
        { name: "device", value: device },
      ];
      // OpenTelemetry's states: used + free + reserved = size; free is what ordinary users may use.
      const otel = c.has("otel_used") || c.has("otel_free");
      const [oUsed, oFree, oReserved] = ["otel_used", "otel_free", "otel_reserved"].map((k) => c.get(k) ?? 0);
      const size = otel ? oUsed! + oFree! + oReserved! : c.get("size");
      const free = otel ? (c.has("otel_free") ? oFree! + oReserved! : undefined) : c.get("free");
      const avail = otel ? c.get("otel_free") : c.get("avail");
      if (size === undefined || size === 0) return [];
      // As df: used = size − free (blocks not free, the root reserve included); usage = used ÷ (used + avail).
      const out: Out[] = [["svc_vm_filesystem_size_bytes", labels, size]];
      if (free !== undefined) out.push(["svc_vm_filesystem_used_bytes", labels, size - free]);
      if (avail !== undefined) out.push(["svc_vm_filesystem_avail_bytes", labels, avail]);
      return out;
    }
    case "disk":
      return [...c].map(([name, v]): Out => [name, [{ name: "device", value: dev }], v]);
    case "network":
      return [...c].map(([name, v]): Out => [name, [{ name: "interface", value: dev }], v]);
  }
}

const MEMORY_SERIES: readonly [string, string][] = [
  ["free", "svc_vm_memory_free_bytes"],
  ["cached", "svc_vm_memory_cached_bytes"],
  ["buffers", "svc_vm_memory_buffers_bytes"],
  ["available", "svc_vm_memory_available_bytes"],
];

function addSample(
  into: Map<string, { labels: Label[]; samples: Sample[] }>,
  name: string,
  labels: readonly Label[],
  vm: string,
  t: number,
  v: number,
): void {
  const key = `${name}\u0000${labels.map((l) => l.value).join("\u0000")}`;
  let ts = into.get(key);
  if (!ts) {
    ts = { labels: [{ name: "__name__", value: name }, { name: "vm", value: vm }, ...labels], samples: [] };
    into.set(key, ts);
  }
  ts.samples.push({ value: v, timestampMs: t });
}
