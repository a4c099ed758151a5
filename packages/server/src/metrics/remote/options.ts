import { defaultQueryPoolOptions } from "../../promql/index.ts";

/** The remote metrics backend's options; defaults here with their units, checked once. */
export interface RemoteMetricsOptions {
  /** Remote-write endpoint of the engine (e.g. http://vm:8428/api/v1/write). */
  readonly remoteWriteUrl: string;
  /** Base URL of the engine's Prometheus HTTP API (…/api/v1/query is appended). */
  readonly queryUrl: string;
  /** Extra headers on every request to the engine (tenant, credentials); never logged. */
  readonly headers: Readonly<Record<string, string>>;
  /** Deadline of one read request to the engine, ms. */
  readonly readTimeoutMs: number;
  /** Deadline of one remote-write POST, ms. */
  readonly writeTimeoutMs: number;
  /** How long a commit keeps retrying a batch the engine did not take (5xx, 429, no answer), ms. */
  readonly writeRetryBudgetMs: number;
  /** First retry delay, ms; doubled per attempt up to writeBackoffMaxMs. */
  readonly writeBackoffMs: number;
  /** Longest delay between two attempts, ms. */
  readonly writeBackoffMaxMs: number;
  /** A commit is sent as POSTs of at most this many samples, samples. */
  readonly maxSamplesPerWrite: number;
  /** POSTs of one round of the forwarder's group commit in flight at once. */
  readonly writeConcurrency: number;
  /** Raw samples one query may load from the engine (the embedded engine's budget), samples. */
  readonly maxSamples: number;
  /** Window aggregates (one range query each) in flight at once per call. */
  readonly readConcurrency: number;
}

export const defaultRemoteMetricsOptions: Omit<RemoteMetricsOptions, "remoteWriteUrl" | "queryUrl"> =
  Object.freeze({
    headers: Object.freeze({}),
    readTimeoutMs: 30_000, // ms
    writeTimeoutMs: 30_000, // ms
    writeRetryBudgetMs: 10_000, // ms
    writeBackoffMs: 100, // ms
    writeBackoffMaxMs: 2_000, // ms
    maxSamplesPerWrite: 10_000, // samples
    writeConcurrency: 4, // requests
    maxSamples: defaultQueryPoolOptions.maxSamples, // samples
    readConcurrency: 4, // requests
  });

const PROTOCOL_HEADERS = new Set([
  "content-encoding",
  "content-type",
  "content-length",
  "x-prometheus-remote-write-version",
  "x-prometheus-remote-read-version",
  "host",
]);

/** Merges overrides onto the defaults, validates (naming the field), freezes. */
export function resolveRemoteMetricsOptions(
  o: Partial<RemoteMetricsOptions> & Pick<RemoteMetricsOptions, "remoteWriteUrl" | "queryUrl">,
): RemoteMetricsOptions {
  const r = { ...defaultRemoteMetricsOptions, ...o };
  for (const k of ["remoteWriteUrl", "queryUrl"] as const) {
    let u: URL;
    try {
      u = new URL(r[k]);
    } catch {
      throw new RangeError(`remote metrics option ${k} is not a URL`);
    }
    if (u.protocol !== "http:" && u.protocol !== "https:")
      throw new RangeError(`remote metrics option ${k} must be an http(s) URL`);
  }
  for (const k of [
    "readTimeoutMs",
    "writeTimeoutMs",
    "writeBackoffMs",
    "writeBackoffMaxMs",
    "maxSamplesPerWrite",
    "writeConcurrency",
    "maxSamples",
    "readConcurrency",
  ] as const)
    if (!Number.isSafeInteger(r[k]) || r[k] < 1)
      throw new RangeError(`remote metrics option ${k} must be a positive integer, got ${r[k]}`);
  if (!Number.isSafeInteger(r.writeRetryBudgetMs) || r.writeRetryBudgetMs < 0)
    throw new RangeError(`remote metrics option writeRetryBudgetMs must be ≥ 0, got ${r.writeRetryBudgetMs}`);
  for (const name of Object.keys(r.headers))
    if (PROTOCOL_HEADERS.has(name.toLowerCase()))
      throw new RangeError(`remote metrics header ${name} is set by the protocol and cannot be configured`);
  return Object.freeze({
    ...r,
    queryUrl: r.queryUrl.replace(/\/+$/, ""),
    headers: Object.freeze({ ...r.headers }),
  });
}

/**
 * Parses SVC_REMOTE_HEADERS: `Name: value` pairs separated by commas or newlines. Errors name the
 * entry's position, never its value (it may be a credential).
 */
export function parseHeaderList(raw: string | undefined, field: string): Record<string, string> {
  const out: Record<string, string> = {};
  if (!raw) return out;
  const entries = raw
    .split(/[\n,]/)
    .map((e) => e.trim())
    .filter(Boolean);
  entries.forEach((e, i) => {
    const colon = e.indexOf(":");
    const name = colon > 0 ? e.slice(0, colon).trim() : "";
    if (!/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(name))
      throw new Error(`${field}: entry ${i + 1} is not "Name: value"`);
    const value = e.slice(colon + 1).trim();
    if (value === "" || /[\r\n]/.test(value)) throw new Error(`${field}: header ${name} has no value`);
    out[name] = value;
  });
  return out;
}
