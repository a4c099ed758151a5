import { execFileSync, spawnSync } from "node:child_process";

/**
 * Prometheus' promtool (Debian package prometheus), for the tests that hold the monitoring mixin and
 * docs/operations.md to the code: why a test is skipped without it (CI must have it).
 */
export const promtoolSkip = (() => {
  try {
    execFileSync("promtool", ["--version"], { stdio: "ignore" });
    return undefined;
  } catch {
    if (process.env.CI === "true")
      throw new Error("CI=true but promtool (Debian package prometheus) is missing");
    return "promtool is not installed (apt-get install prometheus); skipped";
  }
})();

/** Runs promtool with `args` (and `input` on stdin): its exit status and everything it printed. */
export function promtool(args: string[], input?: string): { status: number; out: string } {
  const r = spawnSync("promtool", args, { input, encoding: "utf8" });
  return { status: r.status ?? 1, out: `${r.stdout}${r.stderr}` };
}
