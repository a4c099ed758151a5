// What the Debian packages of the guest agent and the hypervisor collector share: staleness by the
// newest source, writing files into the package root, maintainer scripts for a service that runs as its
// own system user, and dpkg-deb with a SHA256SUMS beside the package.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";

/**
 * Where the Debian package `svc-<name>` of packages/<name> is built from and to: its directory, dist/,
 * version (its package.json), the .deb's name and path, and the sources whose change rebuilds it (its
 * src/ and package.json, the bundled remote-write codec, and the build script `script`).
 */
export function debLayout(name, script) {
  const root = join(import.meta.dirname, "..", "..");
  const dir = join(root, "packages", name);
  const dist = join(dir, "dist");
  const { version } = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  const debName = `svc-${name}_${version}_all.deb`;
  const sources = [
    join(dir, "src"),
    join(dir, "package.json"),
    join(root, "packages", "remotewrite", "src"),
    join(root, "scripts", script),
  ];
  return { dir, dist, version, debName, deb: join(dist, debName), sources };
}

/** The newest modification time under `path` (tests and test helpers excluded), 0 when absent. */
export function newest(path) {
  if (!existsSync(path)) return 0;
  const s = statSync(path);
  if (!s.isDirectory()) return s.mtimeMs;
  let m = s.mtimeMs;
  for (const e of readdirSync(path)) {
    if (!e.endsWith(".test.ts") && e !== "testing") m = Math.max(m, newest(join(path, e)));
  }
  return m;
}

/**
 * One ESM file of `entry` with everything it imports bundled in, for the Node.js the distributions ship
 * (18.19 and later), headed by the `banner` comment; returns its bytes.
 */
export async function bundleForNode(entry, banner) {
  // Loaded only to build: npm start checks the packages on every run.
  const { build } = await import("esbuild");
  const bundle = await build({
    entryPoints: [entry],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node18.19",
    write: false,
    legalComments: "none",
    banner: { js: banner },
  });
  return bundle.outputFiles[0].contents;
}

/**
 * The program `name`: `entry` bundled (bundleForNode) to /usr/lib/<name>/<name>.mjs, and /usr/bin/<name>
 * running it with the Node.js flags `nodeFlags`.
 */
export async function putProgram(put, name, entry, banner, nodeFlags) {
  put(`usr/lib/${name}/${name}.mjs`, await bundleForNode(entry, banner), 0o644);
  put(`usr/bin/${name}`, `#!/bin/sh\nexec node ${nodeFlags} /usr/lib/${name}/${name}.mjs "$@"\n`, 0o755);
}

/** Whether `deb` is at least as new as every path in `sources` (never with `force`). */
export function debUpToDate(deb, sources, force) {
  return !force && existsSync(deb) && statSync(deb).mtimeMs >= Math.max(...sources.map(newest));
}

/** `put(path, content, mode)` writing below the package root. */
export function putter(pkgRoot) {
  return (path, content, mode) => {
    const full = join(pkgRoot, path);
    mkdirSync(join(full, ".."), { recursive: true });
    writeFileSync(full, content);
    chmodSync(full, mode);
  };
}

/**
 * postinst, prerm and postrm of a service `name` run by its own system user: postinst creates the user
 * (shell nologin, home /var/lib/<name>), /etc/<name> (0750 root:<name>), /var/lib/<name> and its spool
 * (0700 <name>), keeps the token at 0640 root:<name> and restarts a running service after an upgrade;
 * removal stops and disables it; purge removes /etc/<name>, /var/lib/<name>, the enable link, the user
 * and the group. `extra` lines run in postinst right after the user exists.
 */
export function serviceMaintainerScripts(name, envFile, extra = "") {
  return {
    postinst: `#!/bin/sh
set -e
if [ "$1" = configure ]; then
  mkdir -p /var/lib/${name}
  if ! getent passwd ${name} >/dev/null; then
    adduser --system --group --home /var/lib/${name} --no-create-home --shell /usr/sbin/nologin ${name} >/dev/null
  fi
${extra}  install -d -m 0750 -o root -g ${name} /etc/${name}
  install -d -m 0700 -o ${name} -g ${name} /var/lib/${name} /var/lib/${name}/spool
  if [ -f /etc/${name}/token ]; then chown root:${name} /etc/${name}/token; chmod 0640 /etc/${name}/token; fi
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
    if [ -f /etc/${name}/${envFile} ]; then systemctl try-restart ${name}.service >/dev/null 2>&1 || true; fi
  fi
fi
exit 0
`,
    // Disabling works without a running systemd (it removes the enable link), stopping needs one.
    prerm: `#!/bin/sh
set -e
if [ "$1" = remove ]; then
  if [ -d /run/systemd/system ]; then systemctl stop ${name}.service >/dev/null 2>&1 || true; fi
  if command -v systemctl >/dev/null; then systemctl disable ${name}.service >/dev/null 2>&1 || true; fi
fi
exit 0
`,
    // Purge removes the user and group too: everything they owned goes in the same step
    // (docs/decisions.md).
    postrm: `#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then systemctl daemon-reload >/dev/null 2>&1 || true; fi
if [ "$1" = purge ]; then
  rm -rf /etc/${name} /var/lib/${name}
  rm -f /etc/systemd/system/multi-user.target.wants/${name}.service
  if getent passwd ${name} >/dev/null; then userdel ${name} >/dev/null 2>&1 || true; fi
  if getent group ${name} >/dev/null; then groupdel ${name} >/dev/null 2>&1 || true; fi
fi
exit 0
`,
  };
}

/** Puts serviceMaintainerScripts' postinst, prerm and postrm into DEBIAN/, executable. */
export function putMaintainerScripts(put, scripts) {
  put("DEBIAN/postinst", scripts.postinst, 0o755);
  put("DEBIAN/prerm", scripts.prerm, 0o755);
  put("DEBIAN/postrm", scripts.postrm, 0o755);
}

/** dpkg-deb of `pkgRoot` into `out/debName` (files owned by root whoever builds), then SHA256SUMS. */
export function dpkgBuild(pkgRoot, out, debName) {
  const built = join(out, debName);
  const r = spawnSync("dpkg-deb", ["--root-owner-group", "-Zxz", "--build", pkgRoot, built], {
    encoding: "utf8",
  });
  if (r.status !== 0) throw new Error(`dpkg-deb failed: ${r.stderr}`);
  rmSync(pkgRoot, { recursive: true, force: true });
  const sha = createHash("sha256").update(readFileSync(built)).digest("hex");
  writeFileSync(join(out, "SHA256SUMS"), `${sha}  ${debName}\n`);
  return sha;
}
