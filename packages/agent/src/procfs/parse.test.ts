import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseDiskstats, parseMeminfo, parseMounts, parseNetDev, parseProcStat } from "./parse.ts";

describe("parseProcStat()", () => {
  it("sums user+nice+system+irq+softirq+steal over USER_HZ and counts cpuN lines", () => {
    const text = `cpu  1000 50 300 9000 40 10 20 5 7 0
cpu0 500 25 150 4500 20 5 10 2 0 0
cpu1 500 25 150 4500 20 5 10 3 0 0
intr 12345
ctxt 999`;
    assert.deepEqual(parseProcStat(text), { secondsTotal: (1000 + 50 + 300 + 10 + 20 + 5) / 100, cpus: 2 });
  });
  it("returns undefined without an aggregate line (missing, not zero)", () => {
    assert.equal(parseProcStat("intr 1\n"), undefined);
  });
});

describe("parseMeminfo()", () => {
  it("reads the five fields in bytes and ignores the rest", () => {
    const text =
      "MemTotal:  2048 kB\nMemFree:  1024 kB\nMemAvailable: 1500 kB\nBuffers:  10 kB\nCached: 300 kB\nSwapCached: 0 kB\n";
    assert.deepEqual(parseMeminfo(text), {
      totalBytes: 2048 * 1024,
      freeBytes: 1024 * 1024,
      availableBytes: 1500 * 1024,
      buffersBytes: 10 * 1024,
      cachedBytes: 300 * 1024,
    });
  });
  it("leaves a missing field absent (old kernels have no MemAvailable)", () => {
    assert.equal(parseMeminfo("MemTotal: 1 kB\n").availableBytes, undefined);
  });
});

describe("parseDiskstats()", () => {
  const text = `   7       0 loop0 10 0 80 0 0 0 0 0 0 0 0 0 0 0 0 0 0
 254       0 vda 69259 16930 3965618 76843 27198 18986 2434936 10989 0 11632 88708
 254       1 vda1 100 0 800 1 50 0 400 1 0 1 2
 253       0 dm-0 5 0 40 0 5 0 40 0 0 0 0
 259       0 nvme0n1 7 0 16 0 3 0 8 0 0 0 0`;
  it("keeps whole disks, converts 512-byte sectors, skips partitions, loop and dm", () => {
    const whole = new Set(["vda", "nvme0n1", "loop0", "dm-0"]);
    assert.deepEqual(
      parseDiskstats(text, (n) => whole.has(n)),
      [
        {
          device: "vda",
          readsCompleted: 69259,
          readBytes: 3965618 * 512,
          writesCompleted: 27198,
          writtenBytes: 2434936 * 512,
        },
        {
          device: "nvme0n1",
          readsCompleted: 7,
          readBytes: 16 * 512,
          writesCompleted: 3,
          writtenBytes: 8 * 512,
        },
      ],
    );
  });
});

describe("parseNetDev()", () => {
  it("reads rx/tx bytes and packets and skips lo", () => {
    const text = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:   65324     844    0    0    0     0          0         0    65324     844    0    0    0     0       0          0
  eth0: 221343481    7527    0    0    0     0          0         0   617707    5484    0    0    0     0       0          0`;
    assert.deepEqual(parseNetDev(text), [
      { iface: "eth0", rxBytes: 221343481, rxPackets: 7527, txBytes: 617707, txPackets: 5484 },
    ]);
  });
});

describe("parseMounts()", () => {
  it("keeps real filesystems once per device, unescapes octal, skips pseudo, overlay, squashfs and fuse.*", () => {
    const text = `proc /proc proc rw 0 0
sysfs /sys sysfs rw 0 0
tmpfs /run tmpfs rw 0 0
/dev/vda1 / ext4 rw 0 0
/dev/vda1 /var/lib/bind ext4 rw 0 0
/dev/vdb /data\\040disk xfs rw 0 0
overlay /var/lib/docker/overlay2/x/merged overlay rw 0 0
/dev/loop3 /snap/core/1 squashfs ro 0 0
gvfsd-fuse /run/user/1000/gvfs fuse.gvfsd-fuse rw 0 0
server:/export /mnt/nfs nfs4 rw 0 0`;
    assert.deepEqual(parseMounts(text), [
      { device: "/dev/vda1", mountpoint: "/", fstype: "ext4" },
      { device: "/dev/vdb", mountpoint: "/data disk", fstype: "xfs" },
      { device: "server:/export", mountpoint: "/mnt/nfs", fstype: "nfs4" },
    ]);
  });
});
