import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";

const repoRoot = join(import.meta.dirname, "..", "..", "..");

export interface ServerProcess {
  readonly child: ChildProcess;
  /** What it printed so far (stdout and stderr). */
  output(): string;
  /** The origin from its "svc listening on" line. */
  readonly baseUrl: string;
  /** Resolves when it has exited, with its exit code (null when killed by a signal). */
  readonly exited: Promise<number | null>;
}

/**
 * Starts the server as its own process (by default its TypeScript entry point through tsx; `npm start`
 * runs scripts/start.mjs, the bundle) and resolves
 * once it printed `ready` (default: the "svc listening on" line), or rejects with what it printed when
 * it exits first or takes longer than `timeoutMs`.
 */
export function startServerProcess(opts: {
  env: NodeJS.ProcessEnv;
  args?: readonly string[];
  ready?: RegExp;
  timeoutMs?: number;
}): Promise<ServerProcess> {
  const child = spawn(
    process.execPath,
    [...(opts.args ?? ["--import", "tsx", "packages/server/src/main.ts"])],
    {
      cwd: repoRoot,
      env: opts.env,
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  child.stdout?.on("data", (d) => {
    out += d;
  });
  child.stderr?.on("data", (d) => {
    out += d;
  });
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  const ready = opts.ready ?? /svc listening on (\S+)/;
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + (opts.timeoutMs ?? 120_000);
    const timer = setInterval(() => {
      const url = /svc listening on (\S+)/.exec(out)?.[1];
      if (url && ready.test(out)) {
        clearInterval(timer);
        resolve({ child, output: () => out, baseUrl: url, exited });
      } else if (Date.now() > deadline) {
        clearInterval(timer);
        child.kill("SIGKILL");
        reject(new Error(`the server was not ready in time:\n${out}`));
      }
    }, 50);
    void exited.then((code) => {
      clearInterval(timer);
      reject(new Error(`the server exited (${code ?? child.signalCode}):\n${out}`));
    });
  });
}
