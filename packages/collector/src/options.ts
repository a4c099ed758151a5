import type { FetchLike, Logger } from "@svc/remotewrite";

/** Everything the collector needs; `resolveCollectorOptions` fills defaults and checks each field. */
export interface CollectorOptions {
  /** svc's origin, e.g. https://monitoring.example.com. */
  readonly server: string;
  /** Returns the collector token; called before each send so a rotated token file is picked up. */
  readonly token: () => string;
  /** libvirtd's unix socket. */
  readonly socketPath: string;
  /** The libvirt driver URI opened on it. */
  readonly libvirtUri: string;
  /**
   * Ask the QEMU guest agent for filesystem usage (needs a read-write libvirt connection; with false
   * the collector opens the read-only socket and sends no filesystem series).
   */
  readonly guestAgent: boolean;
  /** Collection interval, ms. */
  readonly intervalMs: number;
  /** Deadline of one libvirt call, ms; a guest-agent call gets a third of the interval at most. */
  readonly libvirtTimeoutMs: number;
  /** Deadline of one push to svc, ms. */
  readonly timeoutMs: number;
  /**
   * Which svc VM a domain is, when the caller knows (the demo maps the host's domains to VMs it made);
   * undefined reads the domain's metadata element (identity.ts).
   */
  readonly vmOf?: (domain: { readonly name: string; readonly uuid: string }) => string | undefined;
  /** How long a domain's identity (its metadata element) is cached, ms. */
  readonly identityRefreshMs: number;
  /** Spool directory (created 0700) and the state file beside it. */
  readonly spoolDir: string;
  readonly spoolMaxBytes: number;
  readonly spoolMaxAgeMs: number;
  readonly retryMinMs: number;
  readonly retryMaxMs: number;
  readonly logger: Logger;
  readonly fetch?: FetchLike;
  readonly now: () => number;
}

const MiB = 1024 * 1024;
const HOUR_MS = 3_600_000;

export const defaultCollectorOptions = {
  socketPath: "/var/run/libvirt/libvirt-sock",
  libvirtUri: "qemu:///system",
  guestAgent: true,
  intervalMs: 30_000,
  libvirtTimeoutMs: 10_000,
  timeoutMs: 10_000,
  identityRefreshMs: 5 * 60_000,
  spoolDir: "/var/lib/svc-collector/spool",
  spoolMaxBytes: 200 * MiB,
  // svc refuses samples older than its out-of-order window (1 h by default) per sample; a day keeps a
  // backlog for a server configured with a longer window.
  spoolMaxAgeMs: 24 * HOUR_MS,
  retryMinMs: 1_000,
  retryMaxMs: 30_000,
  now: () => Date.now(),
} as const;

export class CollectorConfigError extends Error {
  override readonly name = "CollectorConfigError";
}

type Required = "server" | "token" | "logger";

export function resolveCollectorOptions(
  o: Pick<CollectorOptions, Required> & Partial<Omit<CollectorOptions, Required>>,
): CollectorOptions {
  const r: CollectorOptions = { ...defaultCollectorOptions, ...o };
  let url: URL;
  try {
    url = new URL(r.server);
  } catch {
    throw new CollectorConfigError("server: must be an absolute http(s) URL");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:")
    throw new CollectorConfigError("server: must be http(s)");
  for (const k of [
    "intervalMs",
    "libvirtTimeoutMs",
    "timeoutMs",
    "identityRefreshMs",
    "spoolMaxBytes",
    "spoolMaxAgeMs",
    "retryMinMs",
    "retryMaxMs",
  ] as const) {
    if (!Number.isFinite(r[k]) || r[k] <= 0)
      throw new CollectorConfigError(`${k}: must be a positive number`);
  }
  if (r.intervalMs < 1000) throw new CollectorConfigError("intervalMs: must be at least 1000");
  if (!r.socketPath) throw new CollectorConfigError("socketPath: must name libvirtd's unix socket");
  return Object.freeze(r);
}
