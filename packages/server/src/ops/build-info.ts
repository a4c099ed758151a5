/**
 * Which build is running: the server package's version and the git revision it was built from. The
 * production bundle has both written in by scripts/build-server.mjs (`globalThis.SVC_BUILD_INFO`); run
 * from the sources, the version is read from packages/server/package.json and the revision from git.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

export interface BuildInfo {
  readonly version: string;
  readonly revision: string;
}

declare global {
  // Defined by the production build only.
  var SVC_BUILD_INFO: BuildInfo | undefined;
}

let cached: BuildInfo | undefined;

export function buildInfo(): BuildInfo {
  cached ??= globalThis.SVC_BUILD_INFO ?? fromSources();
  return cached;
}

function fromSources(): BuildInfo {
  // src/ops/ → the package's root; from the bundle (dist/) the build's define is used instead.
  const pkg = fileURLToPath(new URL("../../package.json", import.meta.url));
  let version = "unknown";
  try {
    version = (JSON.parse(readFileSync(pkg, "utf8")) as { version?: string }).version ?? "unknown";
  } catch {
    // A layout without the package file: say so rather than guess.
  }
  return { version, revision: gitRevision(fileURLToPath(new URL(".", import.meta.url))) };
}

/** The checkout's commit, or "unknown" outside a git checkout (or without git). */
export function gitRevision(cwd: string): string {
  const r = spawnSync("git", ["rev-parse", "HEAD"], { cwd, encoding: "utf8", timeout: 5_000 });
  const rev = r.status === 0 ? r.stdout.trim() : "";
  return /^[0-9a-f]{40}$/.test(rev) ? rev : "unknown";
}
