/**
 * Pure parsers for the /proc files the agent reads. They take file text and return numbers in base
 * units (seconds, bytes, counts); unreadable lines are skipped rather than guessed, so a missing
 * reading stays missing instead of becoming 0.
 */

/** Linux reports /proc/stat times in USER_HZ ticks, fixed at 100 per second for user space. */
export const USER_HZ = 100;

export interface CpuStat {
  /** CPU seconds consumed across all CPUs: (user+nice+system+irq+softirq+steal) / USER_HZ. */
  readonly secondsTotal: number;
  /** Online CPUs (the `cpuN` lines). */
  readonly cpus: number;
}

/** Parses /proc/stat. Returns undefined when the aggregate `cpu` line is absent or malformed. */
export function parseProcStat(text: string): CpuStat | undefined {
  let seconds: number | undefined;
  let cpus = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith("cpu")) continue;
    const f = line.trim().split(/\s+/);
    if (f[0] === "cpu") {
      // user nice system idle iowait irq softirq steal [guest guest_nice]; guest time is already in user/nice.
      const v = f.slice(1, 9).map(Number);
      if (v.length < 8 || v.some((x) => !Number.isFinite(x))) return undefined;
      const [user, nice, system, , , irq, softirq, steal] = v;
      seconds = (user + nice + system + irq + softirq + steal) / USER_HZ;
    } else if (/^cpu\d+$/.test(f[0])) cpus++;
  }
  return seconds === undefined || cpus === 0 ? undefined : { secondsTotal: seconds, cpus };
}

export interface MemInfo {
  readonly totalBytes?: number;
  readonly freeBytes?: number;
  readonly availableBytes?: number;
  readonly buffersBytes?: number;
  readonly cachedBytes?: number;
}

const MEMINFO_KEYS: Record<string, keyof MemInfo> = {
  MemTotal: "totalBytes",
  MemFree: "freeBytes",
  MemAvailable: "availableBytes",
  Buffers: "buffersBytes",
  Cached: "cachedBytes",
};

/** Parses /proc/meminfo; values are reported in kB (KiB) and returned in bytes. */
export function parseMeminfo(text: string): MemInfo {
  const out: Record<string, number> = {};
  for (const line of text.split("\n")) {
    const m = /^(\w+):\s+(\d+)(?:\s+kB)?$/.exec(line.trim());
    if (!m) continue;
    const key = MEMINFO_KEYS[m[1]];
    if (key) out[key] = Number(m[2]) * 1024;
  }
  return out;
}

export interface DiskStat {
  readonly device: string;
  readonly readBytes: number;
  readonly writtenBytes: number;
  readonly readsCompleted: number;
  readonly writesCompleted: number;
}

/** Kernel "sectors" in /proc/diskstats are always 512 bytes, whatever the device's block size. */
const SECTOR_BYTES = 512;

/** Virtual or stacked block devices whose traffic is either not disk I/O or counted again underneath. */
const SKIPPED_DISK = /^(loop|ram|zram|dm-|md|sr|fd|nbd)\d*/;

/**
 * Parses /proc/diskstats, keeping whole disks only. `isWholeDisk(name)` decides partitions (the
 * collector checks /sys/block/<name>); loop, ram, zram, device-mapper, md, optical and floppy devices
 * are skipped by name.
 */
export function parseDiskstats(text: string, isWholeDisk: (name: string) => boolean): DiskStat[] {
  const out: DiskStat[] = [];
  for (const line of text.split("\n")) {
    const f = line.trim().split(/\s+/);
    if (f.length < 14) continue;
    const device = f[2];
    if (SKIPPED_DISK.test(device) || !isWholeDisk(device)) continue;
    const n = f.slice(3, 14).map(Number);
    if (n.some((x) => !Number.isFinite(x))) continue;
    out.push({
      device,
      readsCompleted: n[0],
      readBytes: n[2] * SECTOR_BYTES,
      writesCompleted: n[4],
      writtenBytes: n[6] * SECTOR_BYTES,
    });
  }
  return out;
}

export interface NetDevStat {
  readonly iface: string;
  readonly rxBytes: number;
  readonly rxPackets: number;
  readonly txBytes: number;
  readonly txPackets: number;
}

/** Parses /proc/net/dev, skipping the loopback interface. */
export function parseNetDev(text: string): NetDevStat[] {
  const out: NetDevStat[] = [];
  for (const line of text.split("\n")) {
    const colon = line.indexOf(":");
    if (colon < 0) continue;
    const iface = line.slice(0, colon).trim();
    if (iface === "" || iface === "lo" || iface.includes("|")) continue;
    const n = line
      .slice(colon + 1)
      .trim()
      .split(/\s+/)
      .map(Number);
    if (n.length < 16 || n.some((x) => !Number.isFinite(x))) continue;
    out.push({ iface, rxBytes: n[0], rxPackets: n[1], txBytes: n[8], txPackets: n[9] });
  }
  return out;
}

export interface Mount {
  readonly device: string;
  readonly mountpoint: string;
  readonly fstype: string;
}

/**
 * Filesystem types that are not storage a customer fills: kernel interfaces, memory-backed, container
 * layers (overlay: the backing filesystem is reported instead), read-only images (squashfs snaps are
 * always 100% full) and automounter placeholders. `fuse.*` user-space filesystems are skipped too.
 */
export const PSEUDO_FSTYPES: ReadonlySet<string> = new Set([
  "proc",
  "sysfs",
  "tmpfs",
  "devtmpfs",
  "devpts",
  "ramfs",
  "cgroup",
  "cgroup2",
  "securityfs",
  "pstore",
  "bpf",
  "debugfs",
  "tracefs",
  "configfs",
  "fusectl",
  "mqueue",
  "hugetlbfs",
  "autofs",
  "binfmt_misc",
  "rpc_pipefs",
  "nsfs",
  "efivarfs",
  "selinuxfs",
  "overlay",
  "squashfs",
  "iso9660",
  "nfsd",
]);

/** /proc/self/mounts escapes space, tab, newline and backslash as octal (`\040`). */
function unescapeMount(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)));
}

/**
 * Parses /proc/self/mounts and keeps real filesystems: not a pseudo type, not `fuse.*`, first mount of
 * each device only (bind mounts repeat the same usage), at most `max` mounts.
 */
export function parseMounts(text: string, max = 64): Mount[] {
  const out: Mount[] = [];
  const seen = new Set<string>();
  for (const line of text.split("\n")) {
    const f = line.trim().split(/\s+/);
    if (f.length < 3) continue;
    const [device, mountpoint, fstype] = [unescapeMount(f[0]), unescapeMount(f[1]), f[2]];
    if (PSEUDO_FSTYPES.has(fstype) || fstype.startsWith("fuse.")) continue;
    const key = `${device}\u0000${fstype}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ device, mountpoint, fstype });
    if (out.length >= max) break;
  }
  return out;
}
