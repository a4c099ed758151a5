// Builds the hypervisor collector into one JavaScript file (esbuild) and a Debian package (dpkg-deb)
// for Debian 12 / Ubuntu 24.04 hypervisor hosts, run by the distribution's Node.js (18.19 and later):
// packages/collector/dist/svc-collector_<version>_all.deb and SHA256SUMS. Install and configuration:
// docs/hypervisor.md. Skips the work when the sources are older than the package; `--force` always builds.
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { lockedBuild } from "./lib/build-lock.mjs";
import {
  debLayout,
  debUpToDate,
  dpkgBuild,
  putMaintainerScripts,
  putProgram,
  putter,
  serviceMaintainerScripts,
} from "./lib/deb.mjs";
import { isMain } from "./lib/is-main.mjs";

const { dir: pkgDir, dist, version, debName, deb, sources } = debLayout("collector", "build-collector.mjs");

export async function buildCollector({ force = false } = {}) {
  const upToDate = () => debUpToDate(deb, sources, force);
  if (upToDate()) return;
  if (spawnSync("dpkg-deb", ["--version"]).status !== 0)
    throw new Error("dpkg-deb is missing (apt-get install dpkg)");
  await lockedBuild(dist, upToDate, buildInto);
}

if (isMain(import.meta.url)) await buildCollector({ force: process.argv.includes("--force") });

async function buildInto(out) {
  process.stdout.write(`building the hypervisor collector package ${debName}…\n`);
  const pkgRoot = join(out, "root");
  const put = putter(pkgRoot);

  // --no-opt: no optimizing compiler. The collector runs a few milliseconds of code every 30 s, so
  // TurboFan kept compiling (and, after garbage collections dropped its code, recompiling) functions
  // that had just become hot: a third of the collector's CPU (docs/performance.md, bench:collector).
  await putProgram(
    put,
    "svc-collector",
    join(pkgDir, "src", "main.ts"),
    `// svc-collector ${version}: the svc hypervisor collector, bundled from packages/collector.`,
    "--no-warnings --no-opt --max-old-space-size=96",
  );
  // The collector reaches libvirtd's read-write socket as a member of the libvirt group (the guest
  // agent's filesystem info needs it; docs/hypervisor.md). Everything else is read-only to it.
  put(
    "lib/systemd/system/svc-collector.service",
    `[Unit]
Description=svc hypervisor collector (libvirt)
After=network-online.target libvirtd.service virtqemud.service
Wants=network-online.target
ConditionPathExists=/etc/svc-collector/collector.env

[Service]
Type=simple
User=svc-collector
Group=svc-collector
SupplementaryGroups=libvirt
EnvironmentFile=/etc/svc-collector/collector.env
Environment=SVC_COLLECTOR_TOKEN_FILE=/etc/svc-collector/token
Environment=SVC_COLLECTOR_SPOOL_DIR=/var/lib/svc-collector/spool
ExecStart=/usr/bin/svc-collector
Restart=on-failure
RestartSec=5
NoNewPrivileges=true
ProtectSystem=strict
ProtectHome=true
PrivateTmp=true
PrivateDevices=true
ProtectKernelTunables=true
ProtectKernelModules=true
ProtectControlGroups=true
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6
RestrictNamespaces=true
LockPersonality=true
CapabilityBoundingSet=
ReadWritePaths=/var/lib/svc-collector

[Install]
WantedBy=multi-user.target
`,
    0o644,
  );
  put(
    "DEBIAN/control",
    `Package: svc-collector
Version: ${version}
Architecture: all
Maintainer: svc <svc@example.com>
Depends: nodejs (>= 18.19), adduser
Recommends: libvirt-daemon-system
Section: admin
Priority: optional
Description: svc hypervisor collector for KVM/libvirt hosts
 Reads every libvirt domain's CPU, memory, disk and network counters in one
 bulk call per interval (and filesystems through the QEMU guest agent), maps
 each domain to its svc VM, and sends the series and the domains' state
 changes to svc, buffering on disk while svc is unreachable.
`,
    0o644,
  );
  // Its user reaches libvirtd's read-write socket through the libvirt group (docs/hypervisor.md).
  const scripts = serviceMaintainerScripts(
    "svc-collector",
    "collector.env",
    "  if getent group libvirt >/dev/null; then adduser svc-collector libvirt >/dev/null; fi\n",
  );
  putMaintainerScripts(put, scripts);
  const sha = dpkgBuild(pkgRoot, out, debName);
  process.stdout.write(`built ${deb} (sha256 ${sha})\n`);
}
