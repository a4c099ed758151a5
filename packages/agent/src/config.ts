import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { createLogger, type LogLevel } from "@svc/remotewrite";
import { AgentConfigError, type AgentOptions, defaultAgentOptions, resolveAgentOptions } from "./options.ts";

export const USAGE = `usage: svc-agent --server URL --vm NAME [options]

  --server URL          server origin (env SVC_AGENT_SERVER)
  --vm NAME             the VM's full resource name (env SVC_AGENT_VM)
  --token-file PATH     file holding the per-VM token (env SVC_AGENT_TOKEN_FILE);
                        or set the token itself in env SVC_AGENT_TOKEN. Never on the command line.
  --interval DURATION   collection interval, e.g. 30s, 500ms (env SVC_AGENT_INTERVAL; default 30s)
  --timeout DURATION    push deadline (default 10s)
  --spool-dir PATH      on-disk buffer (env SVC_AGENT_SPOOL_DIR; default ${defaultAgentOptions.spoolDir})
  --spool-max-bytes N   spool bound in bytes, suffixes KiB/MiB/GiB allowed (default 50MiB)
  --spool-max-age DUR   drop buffered batches older than this, e.g. 7d (default 7d)
  --write-path PATH     remote-write path (default ${defaultAgentOptions.writePath})
  --proc-root PATH      where procfs is mounted (default /proc)
  --sys-root PATH       where sysfs is mounted (default /sys)
  --log-level LEVEL     debug, info, warn, error (env SVC_AGENT_LOG_LEVEL; default info)
`;

const UNITS_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const UNITS_B: Record<string, number> = { "": 1, b: 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3 };

/** "30s", "500ms", "7d", or a bare number of seconds → ms. */
export function parseDuration(s: string, what: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(s.trim());
  if (!m) throw new AgentConfigError(`${what}: "${s}" is not a duration (e.g. 30s, 500ms, 7d)`);
  return Math.round(Number(m[1]) * UNITS_MS[m[2] ?? "s"]);
}

export function parseBytes(s: string, what: string): number {
  const m = /^(\d+)\s*([a-z]*)$/i.exec(s.trim());
  const unit = m ? UNITS_B[m[2].toLowerCase()] : undefined;
  if (!m || unit === undefined) throw new AgentConfigError(`${what}: "${s}" is not a size (e.g. 50MiB)`);
  return Number(m[1]) * unit;
}

/** Builds the options from argv and env. The token is read lazily and never stored in a message. */
export function configFromArgs(argv: string[], env: NodeJS.ProcessEnv): AgentOptions {
  if (argv.some((a) => a === "--token" || a.startsWith("--token="))) {
    throw new AgentConfigError(
      "tokens are not accepted on the command line (visible in ps); use SVC_AGENT_TOKEN or --token-file",
    );
  }
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      options: {
        server: { type: "string" },
        vm: { type: "string" },
        "token-file": { type: "string" },
        interval: { type: "string" },
        timeout: { type: "string" },
        "spool-dir": { type: "string" },
        "spool-max-bytes": { type: "string" },
        "spool-max-age": { type: "string" },
        "write-path": { type: "string" },
        "proc-root": { type: "string" },
        "sys-root": { type: "string" },
        "log-level": { type: "string" },
        help: { type: "boolean" },
      },
    }));
  } catch (err) {
    throw new AgentConfigError((err as Error).message);
  }
  const str = (k: string, envKey?: string) =>
    (values[k] as string | undefined) ?? (envKey ? env[envKey] : undefined);
  const server = str("server", "SVC_AGENT_SERVER");
  const vm = str("vm", "SVC_AGENT_VM");
  if (!server) throw new AgentConfigError("--server (or SVC_AGENT_SERVER) is required");
  if (!vm) throw new AgentConfigError("--vm (or SVC_AGENT_VM) is required");

  const tokenFile = str("token-file", "SVC_AGENT_TOKEN_FILE");
  const envToken = env.SVC_AGENT_TOKEN;
  let token: () => string;
  if (tokenFile) {
    token = () => {
      let t: string;
      try {
        t = readFileSync(tokenFile, "utf8").trim();
      } catch (err) {
        throw new AgentConfigError(
          `token file unreadable (${(err as NodeJS.ErrnoException).code ?? "error"})`,
        );
      }
      if (t === "") throw new AgentConfigError("token file is empty");
      return t;
    };
    token(); // fail at start-up rather than at the first push
  } else if (envToken && envToken.trim() !== "") {
    const t = envToken.trim();
    token = () => t;
  } else {
    throw new AgentConfigError("no token: set SVC_AGENT_TOKEN or --token-file / SVC_AGENT_TOKEN_FILE");
  }

  const level = (str("log-level", "SVC_AGENT_LOG_LEVEL") ?? "info") as LogLevel;
  if (!["debug", "info", "warn", "error"].includes(level))
    throw new AgentConfigError(`unknown log level ${level}`);
  const interval = str("interval", "SVC_AGENT_INTERVAL");
  const timeout = str("timeout");
  const maxBytes = str("spool-max-bytes");
  const maxAge = str("spool-max-age");
  return resolveAgentOptions({
    server,
    vm,
    token,
    logger: createLogger(level),
    ...(interval && { intervalMs: parseDuration(interval, "--interval") }),
    ...(timeout && { timeoutMs: parseDuration(timeout, "--timeout") }),
    ...(str("spool-dir", "SVC_AGENT_SPOOL_DIR") && { spoolDir: str("spool-dir", "SVC_AGENT_SPOOL_DIR") }),
    ...(maxBytes && { spoolMaxBytes: parseBytes(maxBytes, "--spool-max-bytes") }),
    ...(maxAge && { spoolMaxAgeMs: parseDuration(maxAge, "--spool-max-age") }),
    ...(str("write-path") && { writePath: str("write-path") }),
    sources: {
      procRoot: str("proc-root") ?? defaultAgentOptions.sources.procRoot,
      sysRoot: str("sys-root") ?? defaultAgentOptions.sources.sysRoot,
    },
  });
}
