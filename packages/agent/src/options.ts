import type { FetchLike } from "@svc/remotewrite";
import { createLogger, type Logger } from "@svc/remotewrite";
import type { CollectorSources } from "./procfs/collect.ts";

/** Everything the agent needs; defaults in `defaultAgentOptions`, checked once by `resolveAgentOptions`. */
export interface AgentOptions {
  /** Server origin, e.g. "https://monitoring.example.com" (no trailing slash needed). */
  readonly server: string;
  /** Path of the remote-write endpoint under `server`. */
  readonly writePath: string;
  /** Full VM resource name; becomes the `vm` label on every series. */
  readonly vm: string;
  /** Returns the per-VM token; called before each send so a rotated token file is picked up. */
  readonly token: () => string;
  /** Collection interval, ms. */
  readonly intervalMs: number;
  /** Deadline of one push, ms. */
  readonly timeoutMs: number;
  /** Spool directory (created 0700). */
  readonly spoolDir: string;
  /** Spool disk bound, bytes (inclusive). */
  readonly spoolMaxBytes: number;
  /** Spooled batches older than this are dropped, ms. */
  readonly spoolMaxAgeMs: number;
  /** Largest decompressed protobuf one push may carry when catching up a backlog, bytes. */
  readonly maxSendBytes: number;
  /** First retry delay after a failed push, ms; doubles up to `retryMaxMs`. */
  readonly retryMinMs: number;
  readonly retryMaxMs: number;
  readonly sources: CollectorSources;
  readonly logger: Logger;
  readonly fetch?: FetchLike;
  /** Clock, ms. */
  readonly now: () => number;
}

const MiB = 1024 * 1024;
const DAY_MS = 24 * 3600 * 1000;

export const defaultAgentOptions = {
  writePath: "/v1/ingest/prometheus/api/v1/write",
  intervalMs: 30_000,
  timeoutMs: 10_000,
  spoolDir: "/var/lib/svc-agent/spool",
  spoolMaxBytes: 50 * MiB,
  spoolMaxAgeMs: 7 * DAY_MS,
  maxSendBytes: 1 * MiB,
  retryMinMs: 1_000,
  retryMaxMs: 30_000,
  sources: { procRoot: "/proc", sysRoot: "/sys" },
  now: () => Date.now(),
} as const;

export class AgentConfigError extends Error {
  override readonly name = "AgentConfigError";
}

type Required = "server" | "vm" | "token";

/** Merges onto the defaults, validates and freezes. Throws AgentConfigError naming the bad option. */
export function resolveAgentOptions(
  o: Pick<AgentOptions, Required> & Partial<Omit<AgentOptions, Required>>,
): AgentOptions {
  const r: AgentOptions = { ...defaultAgentOptions, logger: createLogger("info"), ...o };
  let url: URL;
  try {
    url = new URL(r.writePath, r.server);
  } catch {
    throw new AgentConfigError("server must be an absolute http(s) URL");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new AgentConfigError("server must be an absolute http(s) URL");
  }
  if (url.username || url.password) throw new AgentConfigError("server URL must not carry credentials");
  if (r.vm.trim() === "") throw new AgentConfigError("vm (the VM's full resource name) is required");
  const positive: (keyof AgentOptions)[] = [
    "intervalMs",
    "timeoutMs",
    "spoolMaxBytes",
    "spoolMaxAgeMs",
    "maxSendBytes",
    "retryMinMs",
    "retryMaxMs",
  ];
  for (const k of positive) {
    const v = r[k] as number;
    if (!Number.isFinite(v) || v <= 0) throw new AgentConfigError(`${k} must be a positive number`);
  }
  if (r.spoolMaxBytes < 64 * 1024) throw new AgentConfigError("spoolMaxBytes must be at least 64 KiB");
  if (r.retryMaxMs < r.retryMinMs) throw new AgentConfigError("retryMaxMs must be >= retryMinMs");
  return Object.freeze(r);
}

/** The remote-write URL the agent posts to. */
export function writeUrl(o: AgentOptions): string {
  return new URL(o.writePath, o.server).toString();
}
