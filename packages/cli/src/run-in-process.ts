import { exitCodeOf } from "./common.ts";
import { buildProgram } from "./program.ts";

/** The svc settings a test replaces: none of the caller's own leaks in. */
const SETTINGS = [
  "SVC_BASE_URL",
  "SVC_TOKEN",
  "SVC_API_KEY",
  "SVC_API_KEY_FILE",
  "SVC_PROJECT",
  "SVC_CONFIG",
];

/**
 * Runs `svc <args>` in this process (for tests) with `env` as the only svc settings, without sleeping
 * between retries; returns the exit code and what it printed.
 */
export async function runSvc(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const saved = Object.fromEntries(SETTINGS.map((n) => [n, process.env[n]]));
  for (const n of SETTINGS) delete process.env[n];
  Object.assign(process.env, env);
  const program = buildProgram({
    stdout: (s) => out.push(s),
    stderr: (s) => err.push(s),
    sleep: async () => {},
  });
  let code = 0;
  try {
    await program.parseAsync(args, { from: "user" });
  } catch (e) {
    code = exitCodeOf(e);
    if (code !== 0) err.push(String(e));
  } finally {
    for (const n of SETTINGS) {
      if (saved[n] === undefined) delete process.env[n];
      else process.env[n] = saved[n];
    }
  }
  return { code, out: out.join(""), err: err.join("") };
}
