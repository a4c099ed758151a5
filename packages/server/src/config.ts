import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join, resolve } from "node:path";
import { rootCertificates } from "node:tls";
import { fileURLToPath } from "node:url";
import type { AlertOptions } from "./alerts/options.ts";
import { DEFAULT_AUDIT_RETENTION_DAYS } from "./audit/events.ts";
import { DEFAULT_SHARDS } from "./cluster/shards.ts";
import type { CiOptions } from "./iam/ci/options.ts";
import { DEFAULT_DECODE_WORKERS, DEFAULT_INLINE_BYTES } from "./ingest/decode/defaults.ts";
import type { MetricsOptions } from "./metrics/options.ts";
import { parseHeaderList, type RemoteMetricsOptions } from "./metrics/remote/options.ts";
import type { NotifyOptions } from "./notify/options.ts";
import { DEFAULT_INLINE_QUERY_COST } from "./promql/cost.ts";

/** Everything configurable, with its default, read once at start-up from the environment. */
export interface Config {
  /** Listen address. Default 127.0.0.1. */
  readonly host: string;
  /** Listen port. Default 8080; 0 picks a free port (tests). */
  readonly port: number;
  /** Public origin clients use (no trailing slash). Default http://<host>:<port>. */
  readonly baseUrl?: string;
  /** Data directory: SQLite file, TSDB, secrets. Default ./.data */
  readonly dataDir: string;
  /** Load balancers in front (SVC_TRUSTED_PROXIES: comma-separated addresses or CIDRs): a request from
   * one of them is taken to come from the client its X-Forwarded-For names (per-address rate limits).
   * Default none: the header is ignored, so a client cannot choose its own address. */
  readonly trustedProxies: readonly string[];
  /** SVC_METRICS_LISTEN (`host:port`, e.g. 127.0.0.1:9464): a second listener serving only /metrics,
   * without auth, for a Prometheus on a private network. Unset: /metrics only on the main listener,
   * with the operator token. Port 0 picks a free port (tests). */
  readonly metricsListen?: { readonly host: string; readonly port: number };
  /** Build svc's own metrics (svc_*) (SVC_SELF_METRICS). Default true; `false` is the benchmark's
   * reference arm: no domain is instrumented, /metrics keeps Node's and the HTTP families. */
  readonly selfMetrics: boolean;
  /** postgres://… selects PostgreSQL for the control plane; otherwise SQLite in dataDir. */
  readonly databaseUrl?: string;
  /** The provider's operator token for svc.admin.v1 (SVC_ADMIN_TOKEN). Generated into dataDir when unset. */
  readonly adminToken: string;
  /** Key that signs page tokens (SVC_SECRET_KEY, 32+ bytes hex/base64). Generated into dataDir when unset. */
  readonly secretKey: Buffer;
  /** pino level. */
  readonly logLevel: string;
  /** SVC_LOG_FORMAT: `json` (one JSON object per line) or `pretty` (readable lines). Default: pretty on a
   * terminal, json otherwise (files, pipes, log collectors). */
  readonly logFormat: "json" | "pretty";
  /** Largest request body accepted on RPC routes, bytes. */
  readonly maxRequestBytes: number;
  /** Create the demo project on an empty data directory. Default true. */
  readonly demo: boolean;
  /** The hypervisor collector's remote-write token (SVC_COLLECTOR_TOKEN). Generated into dataDir when unset. */
  readonly collectorToken: string;
  /** Metrics retention, ms (SVC_RETENTION_HOURS). Default 7 days. */
  readonly retentionMs: number;
  /** How long audit events are kept, days (SVC_AUDIT_RETENTION_DAYS). Default 400. */
  readonly auditRetentionDays: number;
  /** Record the audit log (docs/audit.md). Always on; off only in bench/audit to measure its cost. */
  readonly audit: boolean;
  /** Track when each key was last used (docs/audit.md). Always on; off only in bench/audit to measure its cost. */
  readonly lastUse: boolean;
  /** Where metrics live (SVC_METRICS_BACKEND): `embedded` (the TSDB in dataDir, default) or `remote` (a
   * Prometheus-compatible engine; see docs/deploy.md "Remote metrics backend"). */
  readonly metricsBackend: "embedded" | "remote";
  /** With `remote` only: SVC_REMOTE_WRITE_URL, SVC_REMOTE_QUERY_URL (base of the engine's Prometheus API)
   * and SVC_REMOTE_HEADERS (`Name: value` pairs, comma- or newline-separated; never logged). */
  readonly remoteMetrics?: {
    readonly remoteWriteUrl: string;
    readonly queryUrl: string;
    readonly headers: Readonly<Record<string, string>>;
  } & Partial<RemoteMetricsOptions>; // the rest (timeouts, retries) only from code: tests and tools
  /** Longest block the embedded store merges its 2-hour blocks into, ms (SVC_TSDB_MAX_BLOCK_HOURS,
   * Prometheus' --storage.tsdb.max-block-duration). Default 0: a seventh of the retention (24 h);
   * 2 hours or less: no merging. */
  readonly maxBlockDurationMs: number;
  /** Out-of-order window for late samples, ms (SVC_OOO_WINDOW_MINUTES). Default 1 hour. */
  readonly outOfOrderWindowMs: number;
  /**
   * SVC_LIBVIRT_URI (e.g. qemu:///system): also run the hypervisor collector in this process against
   * the host's libvirtd (docs/hypervisor.md); SVC_LIBVIRT_SOCKET names its socket. Unset: no collector.
   */
  readonly libvirt?: { readonly uri: string; readonly socket?: string };
  /** Run the hypervisor simulator for the inventory's VMs (SVC_SIMULATOR). Default: on with the demo. */
  readonly simulator: boolean;
  /** CI trust options (iam/ci/options.ts): SVC_CI_ISSUER (default issuer), SVC_CI_ALLOWED_ISSUERS
   * (comma-separated), SVC_CI_JWKS_COOLDOWN_SECONDS. Unset fields take the component's defaults. */
  readonly ci: Partial<CiOptions>;
  /** What this process does (SVC_ROLES, comma-separated; default all): `api` (Connect, the Prometheus
   * API, scrape and export, the console), `ingest` (remote write), `evaluator` (alert cycles; one replica
   * per shard of projects, each under its own lease), `notifier` (the outbox dispatcher; deliveries are claimed row by row). */
  readonly roles: ReadonlySet<Role>;
  /** Run the alert evaluator's 30 s cycle (SVC_EVALUATOR). Default true; tests drive cycles themselves. */
  readonly evaluatorAutoStart: boolean;
  /** Shards the projects are hashed into for evaluation across replicas (SVC_EVALUATOR_SHARDS, 60). */
  readonly evaluatorShards: number;
  /** Projects per `svc_project_usage_*` family on /metrics (SVC_USAGE_TOP_K, 10; 0: none). */
  readonly usageTopK: number;
  /** Worker threads evaluating Prometheus-API queries off the event loop (SVC_QUERY_WORKERS). Default:
   * the machine's available parallelism; 0 evaluates on the event loop (no threads). */
  readonly queryWorkers: number;
  /** With workers: queries estimated at up to this many sample visits run inline instead
   * (SVC_QUERY_INLINE_COST, default 100,000; 0 sends every query to a worker). metrics/backend.ts;
   * a function (benches only) is read per query. */
  readonly queryInlineCost: number | (() => number);
  /** Worker threads decoding remote-write bodies off the event loop (SVC_INGEST_DECODE_WORKERS). Default:
   * one per core beyond the event loop's, at most 4 (one on 2 cores); 0 decodes on the event loop. */
  readonly ingestDecodeWorkers: number;
  /** Remote-write bodies below this many compressed bytes are decoded inline even with workers
   * (SVC_INGEST_INLINE_BYTES, default 1024): docs/decisions.md "Ingest on both cores". */
  readonly ingestInlineBytes: number;
  /** Alerts: SVC_EVALUATION_INTERVAL_SECONDS (30), SVC_ALERT_MAX_RULES (20), SVC_ALERT_MAX_INSTANCES
   * (10,000) per project. */
  readonly alerts: Partial<AlertOptions>;
  /** Options of the VM metrics services (tests shorten the sampling interval; no environment variable). */
  readonly metrics?: Partial<MetricsOptions>;
  /** The built console served at / (SVC_CONSOLE_DIR). Default packages/console/dist of this checkout. */
  readonly consoleDir: string;
  /** The guest agent package published at /v1/agent/packages (SVC_AGENT_PACKAGE_DIR, holding SHA256SUMS
   * and the .deb from scripts/build-agent.mjs). Default packages/agent/dist of this checkout. */
  readonly agentPackageDir: string;
  /** The packed CLI published at /v1/cli/packages (SVC_CLI_PACKAGE_DIR, holding SHA256SUMS and the .tgz
   * from scripts/build-cli.mjs). Default packages/cli/dist of this checkout. */
  readonly cliPackageDir: string;
  /** Notifications: SVC_SMTP_URL (smtp://… ; unset = emails are logged), SVC_EMAIL_FROM,
   * SVC_NOTIFY_ALLOW_HOSTS (comma-separated hosts allowed although loopback/private; off by default),
   * SVC_NOTIFY_CA_FILE (extra CA for webhook TLS, PEM), SVC_MAX_DESTINATIONS (5), SVC_DISPATCHER (true),
   * SVC_NOTIFY_LEASE_SECONDS (25: how long a claimed delivery is held before another pass may retry it). */
  readonly notify: {
    readonly smtpUrl?: string;
    readonly ca?: string;
    readonly dispatcherAutoStart: boolean;
    readonly options: Partial<NotifyOptions>;
  };
}

export const ROLES = ["api", "ingest", "evaluator", "notifier"] as const;
export type Role = (typeof ROLES)[number];

function rolesOf(v: string | undefined): ReadonlySet<Role> {
  if (v === undefined || v.trim() === "" || v.trim() === "all") return new Set(ROLES);
  const roles = v.split(",").map((r) => r.trim());
  for (const r of roles)
    if (!(ROLES as readonly string[]).includes(r))
      throw new Error(`SVC_ROLES: unknown role "${r}"; use all or a list of ${ROLES.join(", ")}`);
  return new Set(roles as Role[]);
}

function logFormatOf(v: string | undefined): "json" | "pretty" {
  if (v === undefined || v === "") return process.stdout.isTTY ? "pretty" : "json";
  if (v === "json" || v === "pretty") return v;
  throw new Error("SVC_LOG_FORMAT: must be json or pretty");
}

function persistedSecret(dataDir: string, file: string, make: () => string): string {
  const path = join(dataDir, file);
  if (existsSync(path)) return readFileSync(path, "utf8").trim();
  const v = make();
  writeFileSync(path, `${v}\n`, { mode: 0o600 });
  return v;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Partial<Config> = {}): Config {
  const dataDir = resolve(overrides.dataDir ?? env.SVC_DATA_DIR ?? ".data");
  mkdirSync(dataDir, { recursive: true });
  const port = overrides.port ?? Number(env.PORT ?? 8080);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new Error(`PORT: "${env.PORT}" is not a port number`);
  const adminToken =
    overrides.adminToken ??
    env.SVC_ADMIN_TOKEN ??
    persistedSecret(dataDir, "admin-token", () => `svcadmin_${randomBytes(24).toString("base64url")}`);
  if (adminToken.length < 16) throw new Error("SVC_ADMIN_TOKEN: must be at least 16 characters");
  const secretKey =
    overrides.secretKey ??
    Buffer.from(
      env.SVC_SECRET_KEY ?? persistedSecret(dataDir, "secret-key", () => randomBytes(32).toString("hex")),
      "hex",
    );
  if (secretKey.length < 32) throw new Error("SVC_SECRET_KEY: must be at least 32 bytes of hex");
  return Object.freeze({
    host: overrides.host ?? env.HOST ?? "127.0.0.1",
    port,
    baseUrl: overrides.baseUrl ?? env.SVC_BASE_URL,
    dataDir,
    agentPackageDir: resolve(
      overrides.agentPackageDir ??
        env.SVC_AGENT_PACKAGE_DIR ??
        fileURLToPath(new URL("../../agent/dist", import.meta.url)),
    ),
    cliPackageDir: resolve(
      overrides.cliPackageDir ??
        env.SVC_CLI_PACKAGE_DIR ??
        fileURLToPath(new URL("../../cli/dist", import.meta.url)),
    ),
    consoleDir: resolve(
      overrides.consoleDir ??
        env.SVC_CONSOLE_DIR ??
        fileURLToPath(new URL("../../console/dist", import.meta.url)),
    ),
    databaseUrl: overrides.databaseUrl ?? env.SVC_DATABASE_URL,
    trustedProxies:
      overrides.trustedProxies ??
      (env.SVC_TRUSTED_PROXIES ?? "")
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean),
    adminToken,
    secretKey,
    metricsListen: overrides.metricsListen ?? listenAddressOf(env.SVC_METRICS_LISTEN),
    selfMetrics: overrides.selfMetrics ?? env.SVC_SELF_METRICS !== "false",
    logLevel: overrides.logLevel ?? env.SVC_LOG_LEVEL ?? "info",
    logFormat: overrides.logFormat ?? logFormatOf(env.SVC_LOG_FORMAT),
    maxRequestBytes: overrides.maxRequestBytes ?? 4 * 1024 * 1024,
    demo: overrides.demo ?? env.SVC_DEMO !== "false",
    collectorToken:
      overrides.collectorToken ??
      env.SVC_COLLECTOR_TOKEN ??
      persistedSecret(dataDir, "collector-token", () => `svcc_${randomBytes(24).toString("base64url")}`),
    retentionMs:
      overrides.retentionMs ?? positive(env.SVC_RETENTION_HOURS, "SVC_RETENTION_HOURS", 7 * 24) * 3_600_000,
    audit: overrides.audit ?? true,
    lastUse: overrides.lastUse ?? true,
    auditRetentionDays:
      overrides.auditRetentionDays ??
      positive(env.SVC_AUDIT_RETENTION_DAYS, "SVC_AUDIT_RETENTION_DAYS", DEFAULT_AUDIT_RETENTION_DAYS),
    ...metricsBackendOf(env, overrides),
    maxBlockDurationMs:
      overrides.maxBlockDurationMs ??
      (env.SVC_TSDB_MAX_BLOCK_HOURS
        ? positive(env.SVC_TSDB_MAX_BLOCK_HOURS, "SVC_TSDB_MAX_BLOCK_HOURS", 24) * 3_600_000
        : 0),
    outOfOrderWindowMs:
      overrides.outOfOrderWindowMs ??
      positive(env.SVC_OOO_WINDOW_MINUTES, "SVC_OOO_WINDOW_MINUTES", 60) * 60_000,
    simulator:
      overrides.simulator ??
      (env.SVC_SIMULATOR ? env.SVC_SIMULATOR !== "false" : (overrides.demo ?? env.SVC_DEMO !== "false")),
    ci: overrides.ci ?? ciFromEnv(env),
    roles: overrides.roles ?? rolesOf(env.SVC_ROLES),
    evaluatorAutoStart: overrides.evaluatorAutoStart ?? env.SVC_EVALUATOR !== "false",
    evaluatorShards: overrides.evaluatorShards ?? shardsOf(env.SVC_EVALUATOR_SHARDS),
    usageTopK: overrides.usageTopK ?? usageTopKOf(env.SVC_USAGE_TOP_K),
    notify: overrides.notify ?? notifyFromEnv(env),
    queryWorkers: overrides.queryWorkers ?? queryWorkersOf(env.SVC_QUERY_WORKERS),
    metrics: overrides.metrics,
    libvirt:
      overrides.libvirt ??
      (env.SVC_LIBVIRT_URI
        ? { uri: env.SVC_LIBVIRT_URI, socket: env.SVC_LIBVIRT_SOCKET || undefined }
        : undefined),
    queryInlineCost: overrides.queryInlineCost ?? inlineCostOf(env.SVC_QUERY_INLINE_COST),
    ingestDecodeWorkers:
      overrides.ingestDecodeWorkers ??
      countOf(env.SVC_INGEST_DECODE_WORKERS, "SVC_INGEST_DECODE_WORKERS", "threads", 256) ??
      DEFAULT_DECODE_WORKERS,
    ingestInlineBytes:
      overrides.ingestInlineBytes ??
      countOf(env.SVC_INGEST_INLINE_BYTES, "SVC_INGEST_INLINE_BYTES", "bytes", 2 ** 31) ??
      DEFAULT_INLINE_BYTES,
    alerts: overrides.alerts ?? {
      ...(env.SVC_EVALUATION_INTERVAL_SECONDS
        ? {
            evaluationIntervalMs:
              positive(env.SVC_EVALUATION_INTERVAL_SECONDS, "SVC_EVALUATION_INTERVAL_SECONDS", 30) * 1000,
          }
        : {}),
      ...(env.SVC_ALERT_MAX_RULES
        ? { maxRulesPerProject: positive(env.SVC_ALERT_MAX_RULES, "SVC_ALERT_MAX_RULES", 20) }
        : {}),
      ...(env.SVC_ALERT_MAX_INSTANCES
        ? { maxInstancesPerProject: positive(env.SVC_ALERT_MAX_INSTANCES, "SVC_ALERT_MAX_INSTANCES", 10_000) }
        : {}),
    },
  });
}

function metricsBackendOf(
  env: NodeJS.ProcessEnv,
  overrides: Partial<Config>,
): Pick<Config, "metricsBackend" | "remoteMetrics"> {
  const backend = overrides.metricsBackend ?? (env.SVC_METRICS_BACKEND || "embedded");
  if (backend !== "embedded" && backend !== "remote")
    throw new Error(`SVC_METRICS_BACKEND: "${backend}" is not embedded or remote`);
  const write = env.SVC_REMOTE_WRITE_URL || undefined;
  const query = env.SVC_REMOTE_QUERY_URL || undefined;
  if (backend === "embedded") {
    const set = [write && "SVC_REMOTE_WRITE_URL", query && "SVC_REMOTE_QUERY_URL"].filter(Boolean);
    if (set.length > 0 || env.SVC_REMOTE_HEADERS)
      throw new Error(
        `${set[0] ?? "SVC_REMOTE_HEADERS"} is set but SVC_METRICS_BACKEND is embedded; set SVC_METRICS_BACKEND=remote or unset it`,
      );
    return { metricsBackend: "embedded" };
  }
  if (overrides.remoteMetrics) return { metricsBackend: "remote", remoteMetrics: overrides.remoteMetrics };
  for (const [name, v] of [
    ["SVC_REMOTE_WRITE_URL", write],
    ["SVC_REMOTE_QUERY_URL", query],
  ] as const) {
    if (!v) throw new Error(`${name}: required with SVC_METRICS_BACKEND=remote`);
    let u: URL;
    try {
      u = new URL(v);
    } catch {
      throw new Error(`${name}: not a URL`);
    }
    if (u.protocol !== "http:" && u.protocol !== "https:") throw new Error(`${name}: must be an http(s) URL`);
  }
  return {
    metricsBackend: "remote",
    remoteMetrics: {
      remoteWriteUrl: write!,
      queryUrl: query!,
      headers: parseHeaderList(env.SVC_REMOTE_HEADERS, "SVC_REMOTE_HEADERS"),
    },
  };
}

/** `host:port` or `[v6]:port`; undefined when unset. */
export function listenAddressOf(raw: string | undefined): { host: string; port: number } | undefined {
  if (raw === undefined || raw.trim() === "") return undefined;
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(raw.trim());
  const port = m ? Number(m[3]) : Number.NaN;
  if (!m || port > 65535)
    throw new Error(`SVC_METRICS_LISTEN: "${raw}" is not host:port (e.g. 127.0.0.1:9464 or [::1]:9464)`);
  return { host: m[1] ?? m[2], port };
}

function queryWorkersOf(raw: string | undefined): number {
  if (raw === undefined || raw === "") return Math.max(1, availableParallelism());
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 0 || n > 256)
    throw new Error(`SVC_QUERY_WORKERS: "${raw}" is not a number of threads (0–256)`);
  return n;
}

/** A whole number 0..max from the environment, or undefined when unset. */
function countOf(raw: string | undefined, name: string, unit: string, max: number): number | undefined {
  if (raw === undefined || raw === "") return undefined;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 0 || n > max)
    throw new Error(`${name}: "${raw}" is not a number of ${unit} (0–${max})`);
  return n;
}

function usageTopKOf(raw: string | undefined): number {
  if (raw === undefined || raw === "") return 10;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 0 || n > 1000)
    throw new Error(`SVC_USAGE_TOP_K: "${raw}" is not a number of projects (0–1000)`);
  return n;
}

function inlineCostOf(raw: string | undefined): number {
  if (raw === undefined || raw === "") return DEFAULT_INLINE_QUERY_COST;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 0)
    throw new Error(`SVC_QUERY_INLINE_COST: "${raw}" is not a number of sample visits (0 or more)`);
  return n;
}

function shardsOf(raw: string | undefined): number {
  if (raw === undefined || raw === "") return DEFAULT_SHARDS;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 1 || n > 1024)
    throw new Error(`SVC_EVALUATOR_SHARDS: "${raw}" is not an integer from 1 to 1024`);
  return n;
}

function positive(raw: string | undefined, name: string, fallback: number): number {
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name}: "${raw}" is not a positive number`);
  return n;
}

function ciFromEnv(env: NodeJS.ProcessEnv): Partial<CiOptions> {
  const ci: { -readonly [K in keyof CiOptions]?: CiOptions[K] } = {};
  if (env.SVC_CI_ISSUER) ci.defaultIssuer = env.SVC_CI_ISSUER;
  if (env.SVC_CI_ALLOWED_ISSUERS) {
    ci.allowedIssuers = env.SVC_CI_ALLOWED_ISSUERS.split(",")
      .map((s) => s.trim())
      .filter(Boolean);
  }
  if (env.SVC_CI_JWKS_COOLDOWN_SECONDS) {
    const s = Number(env.SVC_CI_JWKS_COOLDOWN_SECONDS);
    if (!Number.isFinite(s) || s < 0) throw new Error("SVC_CI_JWKS_COOLDOWN_SECONDS: must be seconds >= 0");
    ci.jwksCooldownMs = s * 1000;
  }
  return ci;
}

function notifyFromEnv(env: NodeJS.ProcessEnv): Config["notify"] {
  const options: { -readonly [K in keyof NotifyOptions]?: NotifyOptions[K] } = {};
  if (env.SVC_NOTIFY_ALLOW_HOSTS)
    options.allowHosts = env.SVC_NOTIFY_ALLOW_HOSTS.split(",")
      .map((s) => s.trim())
      .filter(Boolean);
  if (env.SVC_EMAIL_FROM) options.emailFrom = env.SVC_EMAIL_FROM;
  if (env.SVC_NOTIFY_LEASE_SECONDS)
    options.leaseMs = positive(env.SVC_NOTIFY_LEASE_SECONDS, "SVC_NOTIFY_LEASE_SECONDS", 25) * 1000;
  if (env.SVC_MAX_DESTINATIONS)
    options.maxDestinationsPerProject = positive(env.SVC_MAX_DESTINATIONS, "SVC_MAX_DESTINATIONS", 5);
  if (env.SVC_MAX_SILENCES)
    options.maxSilencesPerProject = positive(env.SVC_MAX_SILENCES, "SVC_MAX_SILENCES", 100);
  return {
    smtpUrl: env.SVC_SMTP_URL || undefined,
    // Added to Node's public roots (a `ca` option alone would replace them).
    ca: env.SVC_NOTIFY_CA_FILE
      ? `${rootCertificates.join("\n")}\n${readFileSync(env.SVC_NOTIFY_CA_FILE, "utf8")}`
      : undefined,
    dispatcherAutoStart: env.SVC_DISPATCHER !== "false",
    options,
  };
}
