/**
 * Real libvirt + QEMU guests for the collector's end-to-end test (no mock of libvirt). Starts libvirtd
 * and virtlogd without systemd when they are not running (stopping only the ones it started), and boots
 * tiny guests: Debian's kernel with the virtio modules, a busybox initramfs running qemu-ga, a raw disk
 * the guest reads and writes (vda), a second disk it formats ext2 and mounts at /data (vdb), a
 * link-local tap NIC and a balloon with a stats period. The guest burns CPU from `burnAfterS` of uptime.
 *
 * The kernel, its modules and qemu-ga are fetched once (apt-get download) into <repo>/.cache/libvirt-guest/
 * (git-ignored); each guest's initramfs, disks and console log live in a temporary directory removed
 * with the guest. Everything runs as root (libvirtd's system socket).
 */
import { execFileSync, spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const repoRoot = join(import.meta.dirname, "..", "..", "..");
const cacheDir = join(repoRoot, ".cache", "libvirt-guest");
export const LIBVIRT_SOCKET = "/var/run/libvirt/libvirt-sock";
const URI = "qemu:///system";

const MODULES = [
  "virtio_ring",
  "virtio",
  "virtio_pci_modern_dev",
  "virtio_pci_legacy_dev",
  "virtio_pci",
  "virtio_blk",
  "failover",
  "net_failover",
  "virtio_net",
  "virtio_balloon",
  "virtio_console",
  // ext2 through ext4's driver, with its dependencies in load order
  "crc16",
  "mbcache",
  "jbd2",
  "crc32c_generic",
  "libcrc32c",
  "ext4",
];

/** Why real guests cannot run here, or undefined. In CI (CI=true) that is a failure, not a skip. */
export function libvirtUnavailable(): string | undefined {
  const why = probe();
  if (why && process.env.CI === "true") throw new Error(`libvirt test cannot run: ${why}`);
  return why;
}

function probe(): string | undefined {
  if (process.platform !== "linux") return "not Linux";
  if (process.getuid?.() !== 0) return "not root (libvirtd's system socket, taps)";
  for (const tool of [
    "virsh",
    "libvirtd",
    "virtlogd",
    "qemu-system-x86_64",
    "busybox",
    "apt-get",
    "dpkg-deb",
  ]) {
    if (spawnSync("sh", ["-c", `command -v ${tool}`]).status !== 0) {
      return `${tool} is missing (apt-get install qemu-system-x86 libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients busybox-static)`;
    }
  }
  if (!existsSync("/usr/lib/x86_64-linux-gnu/libvirt/connection-driver/libvirt_driver_qemu.so")) {
    return "libvirt's QEMU driver is missing (apt-get install libvirt-daemon-driver-qemu)";
  }
  return undefined;
}

export function virsh(...args: string[]): string {
  return execFileSync("virsh", ["-c", URI, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

/** `virsh domstats --raw` of one domain as field → value. */
export function domstats(domain: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of virsh("domstats", "--raw", domain).split("\n")) {
    const m = /^\s+([^=]+)=(.*)$/.exec(line);
    if (m) out.set(m[1], m[2]);
  }
  return out;
}

const pidAlive = (file: string) => {
  try {
    process.kill(Number(readFileSync(file, "utf8").trim()), 0);
    return true;
  } catch {
    return false;
  }
};

function libvirtResponds(): boolean {
  return spawnSync("virsh", ["-c", URI, "version"], { stdio: "ignore" }).status === 0;
}

/**
 * The daemons this process started, so stopLibvirt() stops only those; a libvirtd that ran before the
 * first startLibvirt() stays ours to leave running even after a test stopped and restarted it.
 */
const started: { libvirtd?: number; virtlogd?: number } = {};
let libvirtdWasRunning: boolean | undefined;

/** Starts virtlogd and libvirtd unless running; waits until libvirtd answers. */
export async function startLibvirt(log: (line: string) => void = () => {}): Promise<void> {
  // libvirt's QEMU driver needs its compiled-in user to exist (libvirt-daemon-system would create it).
  if (spawnSync("getent", ["group", "libvirt-qemu"]).status !== 0)
    execFileSync("groupadd", ["--system", "libvirt-qemu"]);
  if (spawnSync("getent", ["passwd", "libvirt-qemu"]).status !== 0) {
    execFileSync("useradd", [
      "--system",
      "--no-create-home",
      "--home-dir",
      "/var/lib/libvirt",
      "--shell",
      "/usr/sbin/nologin",
      "-g",
      "libvirt-qemu",
      "libvirt-qemu",
    ]);
  }
  for (const d of [
    "/etc/libvirt",
    "/var/run/libvirt",
    "/var/log/libvirt/qemu",
    "/var/lib/libvirt/qemu",
    "/var/cache/libvirt",
  ]) {
    mkdirSync(d, { recursive: true });
  }
  const qemuConf = "/etc/libvirt/qemu.conf";
  const conf = existsSync(qemuConf) ? readFileSync(qemuConf, "utf8") : "";
  if (!conf.includes("svc test guests")) {
    if (conf) writeFileSync(`${qemuConf}.bak.${Date.now()}`, conf);
    // QEMU as root without a security driver: the guests' files are in a temporary directory.
    writeFileSync(
      qemuConf,
      '# svc test guests (also guest.sh): QEMU as root, no SELinux/AppArmor, no chown of images\nuser = "root"\ngroup = "root"\ndynamic_ownership = 0\nremember_owner = 0\nsecurity_driver = "none"\n',
    );
  }
  if (!pidAlive("/run/virtlogd.pid")) {
    log("starting virtlogd");
    execFileSync("virtlogd", ["-d"]);
    started.virtlogd = Number(readFileSync("/run/virtlogd.pid", "utf8").trim());
  }
  const running = pidAlive("/run/libvirtd.pid") && libvirtResponds();
  libvirtdWasRunning ??= running;
  if (!running) {
    log("starting libvirtd");
    mkdirSync(cacheDir, { recursive: true });
    execFileSync("libvirtd", ["-d"], {
      env: { ...process.env, LIBVIRT_LOG_OUTPUTS: `3:file:${join(cacheDir, "libvirtd.log")}` },
    });
    if (!libvirtdWasRunning) started.libvirtd = Number(readFileSync("/run/libvirtd.pid", "utf8").trim());
  }
  for (let i = 0; i < 60 && !libvirtResponds(); i++) await sleep(500);
  if (!libvirtResponds()) throw new Error("libvirtd does not answer on qemu:///system");
}

/** Stops libvirtd (as an operator's outage would); startLibvirt() brings it back. */
export async function stopLibvirtd(): Promise<void> {
  const pid = Number(readFileSync("/run/libvirtd.pid", "utf8").trim());
  process.kill(pid, "SIGTERM");
  for (let i = 0; i < 100; i++) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await sleep(100);
  }
  throw new Error(`libvirtd ${pid} did not stop`);
}

/** Stops the daemons startLibvirt() started (none that were already running). */
export function stopLibvirt(): void {
  for (const pid of [started.libvirtd, started.virtlogd]) {
    if (pid === undefined) continue;
    try {
      process.kill(pid, "SIGTERM");
    } catch {
      // already gone
    }
  }
  started.libvirtd = undefined;
  started.virtlogd = undefined;
}

/** The kernel, the modules above and qemu-ga (with its libraries' paths), fetched once. */
function guestAssets(log: (line: string) => void): { vmlinuz: string; kmod: string; qga: string } {
  const vmlinuz = join(cacheDir, "vmlinuz");
  const kmod = join(cacheDir, "kmod");
  const qga = join(cacheDir, "qga", "qemu-ga");
  mkdirSync(cacheDir, { recursive: true });
  if (!existsSync(vmlinuz) || !MODULES.every((m) => existsSync(join(kmod, `${m}.ko`)))) {
    const kernelPackage = () =>
      /Depends: (linux-image-[0-9]\S*)/.exec(
        spawnSync("apt-cache", ["depends", "linux-image-amd64"], { encoding: "utf8" }).stdout ?? "",
      )?.[1];
    // A fresh machine may have no package lists yet.
    if (!kernelPackage()) execFileSync("apt-get", ["update", "-qq"], { stdio: "ignore" });
    const pkg = kernelPackage();
    if (!pkg) throw new Error("cannot find the kernel package linux-image-amd64 depends on");
    log(`fetching ${pkg}`);
    const x = mkdtempSync(join(cacheDir, "kx-"));
    try {
      execFileSync("apt-get", ["download", pkg], { cwd: x, stdio: "ignore" });
      const deb = readdirSync(x).find((f) => f.endsWith(".deb"));
      if (!deb) throw new Error(`apt-get download ${pkg} produced no .deb`);
      execFileSync("dpkg-deb", ["-x", deb, "root"], { cwd: x });
      const boot = readdirSync(join(x, "root", "boot")).find((f) => f.startsWith("vmlinuz-"));
      if (!boot) throw new Error(`${pkg} has no /boot/vmlinuz-*`);
      rmSync(kmod, { recursive: true, force: true });
      mkdirSync(kmod);
      const found = execFileSync("find", [join(x, "root", "lib", "modules"), "-name", "*.ko"], {
        encoding: "utf8",
      }).split("\n");
      for (const m of MODULES) {
        const path = found.find((f) => f.endsWith(`/${m}.ko`));
        // A module built into this kernel has no .ko: nothing to load.
        if (path) execFileSync("cp", [path, join(kmod, `${m}.ko`)]);
        else writeFileSync(join(kmod, `${m}.ko`), "");
      }
      execFileSync("cp", [join(x, "root", "boot", boot), vmlinuz]);
    } finally {
      rmSync(x, { recursive: true, force: true });
    }
  }
  if (!existsSync(qga)) {
    log("fetching qemu-guest-agent");
    const x = mkdtempSync(join(cacheDir, "qgax-"));
    try {
      execFileSync("apt-get", ["download", "qemu-guest-agent"], { cwd: x, stdio: "ignore" });
      const deb = readdirSync(x).find((f) => f.endsWith(".deb"));
      if (!deb) throw new Error("apt-get download qemu-guest-agent produced no .deb");
      execFileSync("dpkg-deb", ["-x", deb, "root"], { cwd: x });
      mkdirSync(join(cacheDir, "qga"), { recursive: true });
      execFileSync("cp", [join(x, "root", "usr", "sbin", "qemu-ga"), qga]);
    } finally {
      rmSync(x, { recursive: true, force: true });
    }
  }
  return { vmlinuz, kmod, qga };
}

export interface GuestOptions {
  readonly name: string;
  /** Guest uptime before the CPU burner and the disk/network loop start, s. */
  readonly burnAfterS?: number;
  readonly memoryMiB?: number;
  /** The svc VM this domain is, written as the collector's metadata element; none when undefined. */
  readonly svcVm?: string;
  /** Host tap device for the NIC; no NIC when undefined. */
  readonly tap?: string;
  readonly log?: (line: string) => void;
}

export interface Guest {
  readonly name: string;
  readonly dir: string;
  readonly consoleLog: string;
  /** Runs a program in the guest through the agent (guest-exec) and returns its stdout. */
  exec(path: string, args: string[]): Promise<string>;
  /** Destroys and undefines the domain, removes its files. */
  remove(): void;
}

function initScript(): string {
  const mods = MODULES.join(" ");
  return `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev 2>/dev/null
for m in ${mods}; do [ -s /modules/$m.ko ] && insmod /modules/$m.ko 2>&1 | sed "s/^/insmod $m: /"; done
sleep 1
ip link set lo up
if [ -b /dev/vdb ]; then
  mke2fs -q /dev/vdb && mkdir -p /data && mount -t ext2 /dev/vdb /data && dd if=/dev/urandom of=/data/blob bs=64k count=37 2>/dev/null && sync
  echo "INIT: /data mounted: $(df -P /data | tail -1)"
fi
# qemu-ga's shutdown runs /sbin/shutdown -P +0 (virsh shutdown --mode agent); busybox has poweroff.
# It runs with an empty environment: absolute paths.
printf '#!/bin/sh\\n/bin/sync; /bin/poweroff -f\\n' > /sbin/shutdown; chmod +x /sbin/shutdown
mkdir -p /var/run /run /etc/qemu
for n in /sys/class/virtio-ports/*; do
  if [ "$(cat $n/name 2>/dev/null)" = org.qemu.guest_agent.0 ]; then
    ( qemu-ga -m virtio-serial -p /dev/$(basename $n) 2>&1 | sed 's/^/QGA: /' ) &
    echo "INIT: qemu-ga on /dev/$(basename $n)"
  fi
done
[ -e /sys/class/net/eth0 ] && { ip link set eth0 up; ip addr add 169.254.10.2/16 dev eth0; }
BURN_AFTER=0
for a in $(cat /proc/cmdline); do case $a in burn_after=*) BURN_AFTER=\${a#burn_after=};; esac; done
waitup() { while [ "$(cut -d. -f1 /proc/uptime)" -lt "$BURN_AFTER" ]; do sleep 1; done; }
# The burner at the lowest priority, so that qemu-ga still answers promptly.
( waitup; echo "INIT: BURN START"; sh -c 'while true; do :; done' & renice -n 19 -p $! >/dev/null; wait ) &
( waitup; n=0
  while true; do n=$((n+1))
    dd if=/dev/urandom of=/dev/vda bs=64k count=16 seek=$((n % 100 * 16)) conv=fsync 2>/dev/null
    dd if=/dev/vda of=/dev/null bs=64k count=16 skip=$(((n+37) % 100 * 16)) iflag=direct 2>/dev/null
    [ -e /sys/class/net/eth0 ] && ping -c 2 -W 1 169.254.10.1 >/dev/null 2>&1
    sleep 2
  done ) &
echo "INIT: LOOP RUNNING"
while true; do sleep 3600; done
`;
}

function domainXml(o: GuestOptions, dir: string, vmlinuz: string): string {
  const mem = o.memoryMiB ?? 192;
  const nic = o.tap
    ? `<interface type='ethernet'><target dev='${o.tap}' managed='yes'/><model type='virtio'/></interface>`
    : "";
  const meta = o.svcVm
    ? `<metadata><svc:vm xmlns:svc='urn:svc:collector:1' name='${o.svcVm}'/></metadata>`
    : "";
  return `<domain type='qemu'>
  <name>${o.name}</name>
  ${meta}
  <memory unit='MiB'>${mem}</memory>
  <currentMemory unit='MiB'>${mem}</currentMemory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>${vmlinuz}</kernel>
    <initrd>${join(dir, "initramfs.gz")}</initrd>
    <cmdline>console=ttyS0 quiet panic=-1 no_timer_check burn_after=${o.burnAfterS ?? 0}</cmdline>
  </os>
  <features><acpi/></features>
  <cpu mode='custom' match='exact'><model fallback='allow'>qemu64</model></cpu>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff><on_reboot>destroy</on_reboot><on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='${join(dir, "vda.raw")}'/><target dev='vda' bus='virtio'/></disk>
    <disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='${join(dir, "vdb.raw")}'/><target dev='vdb' bus='virtio'/></disk>
    ${nic}
    <serial type='file'><source path='${join(dir, "console.log")}'/><target port='0'/></serial>
    <console type='file'><source path='${join(dir, "console.log")}'/><target type='serial' port='0'/></console>
    <channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>
    <memballoon model='virtio'><stats period='2'/></memballoon>
  </devices>
</domain>
`;
}

/** Defines and starts a guest; resolves once its init loop runs and its agent answers. */
export async function startGuest(o: GuestOptions): Promise<Guest> {
  const log = o.log ?? (() => {});
  const assets = guestAssets(log);
  const dir = mkdtempSync(join(tmpdir(), `svc-guest-${o.name}-`));
  const root = join(dir, "root");
  for (const d of ["bin", "sbin", "proc", "sys", "dev", "tmp", "modules", "usr/bin", "usr/sbin"]) {
    mkdirSync(join(root, d), { recursive: true });
  }
  execFileSync("cp", ["/bin/busybox", join(root, "bin", "busybox")]);
  for (const m of MODULES) execFileSync("cp", [join(assets.kmod, `${m}.ko`), join(root, "modules")]);
  writeFileSync(join(root, "init"), initScript(), { mode: 0o755 });
  execFileSync("cp", [assets.qga, join(root, "bin", "qemu-ga")]);
  const ldd = execFileSync("ldd", [assets.qga], { encoding: "utf8" });
  if (ldd.includes("not found")) throw new Error(`qemu-ga's libraries are missing on the host:\n${ldd}`);
  for (const lib of ldd.match(/\/\S+/g) ?? []) {
    mkdirSync(join(root, lib, ".."), { recursive: true });
    execFileSync("cp", ["-L", lib, join(root, lib)]);
  }
  execFileSync("sh", [
    "-c",
    `cd "${root}" && find . | busybox cpio -o -H newc -R 0:0 2>/dev/null | gzip -1 > ../initramfs.gz`,
  ]);
  rmSync(root, { recursive: true });
  execFileSync("truncate", ["-s", "16M", join(dir, "vda.raw")]);
  execFileSync("truncate", ["-s", "8M", join(dir, "vdb.raw")]);
  const xml = join(dir, "domain.xml");
  writeFileSync(xml, domainXml(o, dir, assets.vmlinuz));
  try {
    virsh("destroy", o.name);
  } catch {}
  try {
    virsh("undefine", o.name);
  } catch {}
  virsh("define", xml);
  virsh("start", o.name);
  const consoleLog = join(dir, "console.log");
  const guest: Guest = {
    name: o.name,
    dir,
    consoleLog,
    exec: (path, args) => guestExec(o.name, path, args),
    remove() {
      try {
        virsh("destroy", o.name);
      } catch {}
      try {
        virsh("undefine", o.name);
      } catch {}
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await until(() => readText(consoleLog).includes("INIT: LOOP RUNNING"), 120_000, `${o.name}'s init loop`);
    await until(
      () =>
        spawnSync("virsh", ["-c", URI, "qemu-agent-command", o.name, '{"execute":"guest-ping"}'], {
          stdio: "ignore",
        }).status === 0,
      60_000,
      `${o.name}'s guest agent`,
    );
  } catch (err) {
    const tail = readText(consoleLog).split("\n").slice(-30).join("\n");
    guest.remove();
    throw new Error(`${(err as Error).message}; console:\n${tail}`);
  }
  return guest;
}

/**
 * Several guests booted together; when one fails the others are removed before the error is thrown,
 * so no domain outlives a failed set-up.
 */
export async function startGuests(opts: readonly GuestOptions[]): Promise<Guest[]> {
  const settled = await Promise.allSettled(opts.map((o) => startGuest(o)));
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (!failed) return settled.map((r) => (r as PromiseFulfilledResult<Guest>).value);
  for (const r of settled) if (r.status === "fulfilled") r.value.remove();
  throw failed.reason;
}

async function guestExec(domain: string, path: string, args: string[]): Promise<string> {
  const cmd = JSON.stringify({
    execute: "guest-exec",
    arguments: { path, arg: args, "capture-output": true },
  });
  const { return: r } = JSON.parse(virsh("qemu-agent-command", domain, cmd)) as { return: { pid: number } };
  for (let i = 0; i < 100; i++) {
    const st = JSON.parse(
      virsh(
        "qemu-agent-command",
        domain,
        JSON.stringify({ execute: "guest-exec-status", arguments: { pid: r.pid } }),
      ),
    ) as { return: { exited: boolean; exitcode?: number; "out-data"?: string } };
    if (st.return.exited) {
      if (st.return.exitcode !== 0)
        throw new Error(`${path} ${args.join(" ")} exited ${st.return.exitcode} in ${domain}`);
      return Buffer.from(st.return["out-data"] ?? "", "base64").toString("utf8");
    }
    await sleep(200);
  }
  throw new Error(`${path} did not finish in ${domain}`);
}

function readText(path: string): string {
  try {
    return readFileSync(path, "utf8").replaceAll("\r", "");
  } catch {
    return "";
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function until(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await check()) return;
    await sleep(250);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}
