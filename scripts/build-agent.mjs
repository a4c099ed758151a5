// Builds the guest agent into one JavaScript file (esbuild) and a Debian package (dpkg-deb) for
// Debian 12 and Ubuntu 24.04, run by the Node.js they ship (18.19 and later, docs/decisions.md): packages/agent/dist/svc-agent_<version>_all.deb and SHA256SUMS, which the
// server publishes at /v1/agent/packages/. Skips the work when the sources are older than the package;
// `--force` always builds. `npm start` runs it first, as it does for the console.
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

const { dir: agentDir, dist, version, debName, deb, sources } = debLayout("agent", "build-agent.mjs");

// V8 flags of the installed agent (docs/agent.md "Footprint"): a young generation of 1 MiB and no optimizing
// compiler (the agent runs a few ms of code every 30 s: compiling it costs more than it saves) took its RSS
// from 51 to 45 MiB and its CPU per collection from 6 to 4.5 ms on Node 20 (bench:agent, 2 s interval);
// no worker threads for V8 tasks; the heap bound leaves room for a 1 MiB backlog merge.
// --no-expose-wasm: lite mode turns WebAssembly off anyway and warns on stderr unless told.
const NODE_FLAGS =
  "--max-semi-space-size=1 --max-old-space-size=32 --lite-mode --no-expose-wasm --v8-pool-size=0";

/**
 * Builds the package unless it is newer than its sources (or `force`). Without dpkg-deb it fails, or
 * with `optional` (npm start) says so and resolves: the service runs without the package, and
 * EnableExpandedMonitoring says why.
 */
export async function buildAgent({ force = false, optional = false } = {}) {
  const upToDate = () => debUpToDate(deb, sources, force);
  if (upToDate()) return;
  if (spawnSync("dpkg-deb", ["--version"]).status !== 0) {
    process.stderr.write(
      "build-agent: dpkg-deb is missing (apt-get install dpkg); the agent package is not built\n",
    );
    if (optional) return;
    throw new Error("dpkg-deb is missing");
  }
  await lockedBuild(dist, upToDate, buildInto);
}

if (isMain(import.meta.url)) {
  await buildAgent({
    force: process.argv.includes("--force"),
    optional: process.argv.includes("--optional"),
  }).catch((err) => {
    if (err.message !== "dpkg-deb is missing") throw err;
    process.exit(1);
  });
}

async function buildInto(out) {
  process.stdout.write(`building the guest agent package ${debName}…\n`);
  const pkgRoot = join(out, "root");
  const put = putter(pkgRoot);

  // One file, no node_modules: the agent's only dependency (the remote-write codec) is bundled in.
  // --no-warnings: Node 18 warns on the first fetch (experimental there), which would break the agent's
  // JSON-lines log. The V8 flags bound the heap of a process that holds one collection at a time
  // (docs/agent.md "Footprint").
  await putProgram(
    put,
    "svc-agent",
    join(agentDir, "src", "main.ts"),
    `// svc-agent ${version}: the svc guest agent, bundled from packages/agent.`,
    `--no-warnings ${NODE_FLAGS}`,
  );

  // The unit reads the server and VM from agent.env, the token from a file only root and the agent read.
  put(
    "lib/systemd/system/svc-agent.service",
    `[Unit]
Description=svc guest agent (expanded monitoring)
After=network-online.target
Wants=network-online.target
ConditionPathExists=/etc/svc-agent/agent.env

[Service]
Type=simple
User=svc-agent
Group=svc-agent
EnvironmentFile=/etc/svc-agent/agent.env
Environment=SVC_AGENT_TOKEN_FILE=/etc/svc-agent/token
Environment=SVC_AGENT_SPOOL_DIR=/var/lib/svc-agent/spool
ExecStart=/usr/bin/svc-agent
Restart=on-failure
RestartSec=5
NoNewPrivileges=true
ProtectSystem=strict
ProtectHome=true
PrivateTmp=true
ReadWritePaths=/var/lib/svc-agent

[Install]
WantedBy=multi-user.target
`,
    0o644,
  );

  put(
    "DEBIAN/control",
    `Package: svc-agent
Version: ${version}
Architecture: all
Maintainer: svc <svc@example.com>
Depends: nodejs (>= 18.19), adduser
Section: admin
Priority: optional
Description: svc guest agent for expanded VM monitoring
 Reads memory, filesystem, disk and network figures from /proc and /sys and
 sends them to svc with Prometheus remote write, buffering on disk while the
 server is unreachable. Runs as the unprivileged svc-agent user.
`,
    0o644,
  );
  // The home exists before adduser (which warns otherwise); install -d then sets owner and mode on
  // first install and again on upgrade, leaving what the directories hold (token, spool) alone.
  const scripts = serviceMaintainerScripts("svc-agent", "agent.env");
  putMaintainerScripts(put, scripts);

  const sha = dpkgBuild(pkgRoot, out, debName);
  process.stdout.write(`built ${deb} (sha256 ${sha})\n`);
}
