import { spawnSync } from "node:child_process";
import { join } from "node:path";

const repoRoot = join(import.meta.dirname, "..", "..", "..");
export const AGENT_PACKAGE_DIST = join(repoRoot, "packages", "agent", "dist");

let built = false;
/** Builds the guest agent's .deb once per test process (skipped when up to date); returns its folder. */
export function buildAgentPackage(): string {
  if (!built) {
    const r = spawnSync(process.execPath, [join(repoRoot, "scripts", "build-agent.mjs")], {
      cwd: repoRoot,
      encoding: "utf8",
    });
    if (r.status !== 0) throw new Error(`agent package build failed: ${r.stderr || r.stdout}`);
    built = true;
  }
  return AGENT_PACKAGE_DIST;
}
