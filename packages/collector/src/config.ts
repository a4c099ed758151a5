import { readFileSync } from "node:fs";
import { createLogger, type Logger, type LogLevel } from "@svc/remotewrite";
import {
  CollectorConfigError,
  type CollectorOptions,
  defaultCollectorOptions,
  resolveCollectorOptions,
} from "./options.ts";

export const USAGE = `usage: svc-collector

Reads every libvirt domain on this host each interval and sends svc's hypervisor series and VM states
(docs/hypervisor.md). Configured by environment (the package reads /etc/svc-collector/collector.env):

  SVC_COLLECTOR_SERVER            svc's origin, e.g. https://monitoring.example.com (required)
  SVC_COLLECTOR_TOKEN_FILE        file holding the collector token (default /etc/svc-collector/token)
  SVC_LIBVIRT_SOCKET              libvirtd's socket (default ${defaultCollectorOptions.socketPath})
  SVC_LIBVIRT_URI                 driver URI (default ${defaultCollectorOptions.libvirtUri})
  SVC_COLLECTOR_GUEST_AGENT       true|false: filesystems through the QEMU guest agent (default true;
                                  needs the read-write socket; false uses ...-sock-ro)
  SVC_COLLECTOR_INTERVAL_SECONDS  default 30
  SVC_COLLECTOR_SPOOL_DIR         default ${defaultCollectorOptions.spoolDir}
  SVC_COLLECTOR_LOG_LEVEL         debug|info|warn|error (default info)
`;

const LEVELS = ["debug", "info", "warn", "error"];

/** The token, read on every send so a rotated file is picked up; never logged. */
export function tokenFromFile(path: string): () => string {
  return () => {
    let t: string;
    try {
      t = readFileSync(path, "utf8").trim();
    } catch (err) {
      throw new Error(
        `cannot read the collector token file ${path}: ${(err as NodeJS.ErrnoException).code ?? "error"}`,
      );
    }
    if (!t) throw new Error(`the collector token file ${path} is empty`);
    return t;
  };
}

export function configFromEnv(env: NodeJS.ProcessEnv, logger?: Logger): CollectorOptions {
  const level = env.SVC_COLLECTOR_LOG_LEVEL ?? "info";
  if (!LEVELS.includes(level))
    throw new CollectorConfigError(`SVC_COLLECTOR_LOG_LEVEL: must be one of ${LEVELS.join(", ")}`);
  const server = env.SVC_COLLECTOR_SERVER;
  if (!server) throw new CollectorConfigError("SVC_COLLECTOR_SERVER: required (svc's origin)");
  const agent = env.SVC_COLLECTOR_GUEST_AGENT ?? "true";
  if (agent !== "true" && agent !== "false")
    throw new CollectorConfigError("SVC_COLLECTOR_GUEST_AGENT: must be true or false");
  const guestAgent = agent === "true";
  const interval = env.SVC_COLLECTOR_INTERVAL_SECONDS;
  const intervalS = interval === undefined ? 30 : Number(interval);
  if (!Number.isFinite(intervalS) || intervalS < 1)
    throw new CollectorConfigError("SVC_COLLECTOR_INTERVAL_SECONDS: must be a number ≥ 1");
  return resolveCollectorOptions({
    server,
    token: tokenFromFile(env.SVC_COLLECTOR_TOKEN_FILE ?? "/etc/svc-collector/token"),
    socketPath:
      env.SVC_LIBVIRT_SOCKET ??
      (guestAgent ? defaultCollectorOptions.socketPath : `${defaultCollectorOptions.socketPath}-ro`),
    libvirtUri: env.SVC_LIBVIRT_URI ?? defaultCollectorOptions.libvirtUri,
    guestAgent,
    intervalMs: intervalS * 1000,
    spoolDir: env.SVC_COLLECTOR_SPOOL_DIR ?? defaultCollectorOptions.spoolDir,
    logger: logger ?? createLogger(level as LogLevel),
  });
}
