import { existsSync, readFileSync, statfsSync } from "node:fs";
import { join } from "node:path";
import type { Label, TimeSeries } from "@svc/remotewrite";
import { parseDiskstats, parseMeminfo, parseMounts, parseNetDev, parseProcStat } from "./parse.ts";

/** Where the collector reads from; tests point these at fixture trees. */
export interface CollectorSources {
  /** Default "/proc". */
  readonly procRoot: string;
  /** Default "/sys" (only /sys/block/<dev> existence is checked, to tell disks from partitions). */
  readonly sysRoot: string;
  /** Filesystem usage of a mount point; default fs.statfsSync. */
  readonly statfs?: (path: string) => { bsize: number; blocks: number; bfree: number; bavail: number };
}

export interface Collection {
  /** One sample per series, all at `timestampMs`; labels sorted by name. Owned by the caller. */
  readonly series: TimeSeries[];
  /** Sources that could not be read this time (their series are absent, never zero). */
  readonly errors: string[];
}

/**
 * Label set shared by every agent series: the VM's full name. The server adds `source="guest_agent"`,
 * `project_id`, `vm_id` and `location` from the token's VM, and refuses them from clients.
 */
export function baseLabels(vm: string): Label[] {
  return [{ name: "vm", value: vm }];
}

/**
 * Reads /proc and statfs once and returns the agent's series at `timestampMs` (ms). Metric names:
 * memory and filesystem per docs/agent.md; the guest's own CPU, disk and network counters under
 * `svc_vm_guest_*` so they never add to the hypervisor's `svc_vm_*` series.
 */
export function collect(vm: string, timestampMs: number, src: CollectorSources): Collection {
  const series: TimeSeries[] = [];
  const errors: string[] = [];
  const base = baseLabels(vm);
  const add = (name: string, value: number, extra: Label[] = []) => {
    const labels = [{ name: "__name__", value: name }, ...base, ...extra].sort((a, b) =>
      a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
    );
    series.push({ labels, samples: [{ value, timestampMs }] });
  };
  const read = (rel: string): string | undefined => {
    try {
      return readFileSync(join(src.procRoot, rel), "utf8");
    } catch (err) {
      errors.push(`${rel}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      return undefined;
    }
  };

  const stat = read("stat");
  const cpu = stat === undefined ? undefined : parseProcStat(stat);
  if (cpu) {
    add("svc_vm_guest_cpu_seconds_total", cpu.secondsTotal);
    add("svc_vm_guest_vcpus", cpu.cpus);
  } else if (stat !== undefined) errors.push("stat: no aggregate cpu line");

  const meminfo = read("meminfo");
  if (meminfo !== undefined) {
    const m = parseMeminfo(meminfo);
    if (m.totalBytes !== undefined) add("svc_vm_memory_total_bytes", m.totalBytes);
    if (m.freeBytes !== undefined) add("svc_vm_memory_free_bytes", m.freeBytes);
    if (m.availableBytes !== undefined) add("svc_vm_memory_available_bytes", m.availableBytes);
    if (m.buffersBytes !== undefined) add("svc_vm_memory_buffers_bytes", m.buffersBytes);
    if (m.cachedBytes !== undefined) add("svc_vm_memory_cached_bytes", m.cachedBytes);
  }

  const diskstats = read("diskstats");
  if (diskstats !== undefined) {
    const isWholeDisk = (name: string) => existsSync(join(src.sysRoot, "block", name.replaceAll("/", "!")));
    for (const d of parseDiskstats(diskstats, isWholeDisk)) {
      const l = [{ name: "device", value: d.device }];
      add("svc_vm_guest_disk_read_bytes_total", d.readBytes, l);
      add("svc_vm_guest_disk_written_bytes_total", d.writtenBytes, l);
      add("svc_vm_guest_disk_reads_completed_total", d.readsCompleted, l);
      add("svc_vm_guest_disk_writes_completed_total", d.writesCompleted, l);
    }
  }

  const netdev = read("net/dev");
  if (netdev !== undefined) {
    for (const n of parseNetDev(netdev).slice(0, 32)) {
      const l = [{ name: "interface", value: n.iface }];
      add("svc_vm_guest_network_receive_bytes_total", n.rxBytes, l);
      add("svc_vm_guest_network_transmit_bytes_total", n.txBytes, l);
      add("svc_vm_guest_network_receive_packets_total", n.rxPackets, l);
      add("svc_vm_guest_network_transmit_packets_total", n.txPackets, l);
    }
  }

  const mounts = read("self/mounts");
  if (mounts !== undefined) {
    const statfs = src.statfs ?? statfsSync;
    for (const m of parseMounts(mounts)) {
      let st: { bsize: number; blocks: number; bfree: number; bavail: number };
      try {
        st = statfs(m.mountpoint);
      } catch (err) {
        errors.push(`statfs ${m.mountpoint}: ${(err as NodeJS.ErrnoException).code ?? "error"}`);
        continue;
      }
      if (st.blocks === 0) continue; // nothing to fill: a pseudo filesystem under a real-looking type
      const l = [
        { name: "device", value: m.device },
        { name: "fstype", value: m.fstype },
        { name: "mountpoint", value: m.mountpoint },
      ];
      // df's columns: Size, Used = size - free, Avail = blocks unprivileged users may still fill (free
      // minus the root reserve). df's Use% is used ÷ (used + avail); svc computes it so (docs/agent.md).
      add("svc_vm_filesystem_size_bytes", st.blocks * st.bsize, l);
      add("svc_vm_filesystem_used_bytes", (st.blocks - st.bfree) * st.bsize, l);
      add("svc_vm_filesystem_avail_bytes", st.bavail * st.bsize, l);
    }
  }
  return { series, errors };
}
