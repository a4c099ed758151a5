import { createHmac } from "node:crypto";
import { join } from "node:path";
import type { ConnectRouter } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { sql } from "kysely";
import pino, { type Logger } from "pino";
import pretty from "pino-pretty";
import { createEvaluator, type Evaluator } from "./alerts/evaluator.ts";
import { purgeIncidentHistory } from "./alerts/incidents.ts";
import { createAlertMetrics } from "./alerts/instrumentation.ts";
import { resolveAlertOptions } from "./alerts/options.ts";
import { purgeAuditEvents } from "./audit/events.ts";
import { withAuditedTransactions } from "./audit/transactions.ts";
import { createBackupMetrics } from "./backup/instrumentation.ts";
import { processHolderId } from "./cluster/lease.ts";
import { createShardLeases } from "./cluster/shards.ts";
import { createLimits } from "./cluster/shared-limits.ts";
import type { Config } from "./config.ts";
import { consoleRoutes } from "./console/routes.ts";
import { type DbHandle, openDb } from "./db/database.ts";
import { startMetricsListener } from "./http/instrumentation.ts";
import { RPC_ROUTES } from "./http/rpc-routes.ts";
import { scrapeRoutes } from "./http/scrape.ts";
import { buildServer, redactPaths } from "./http/server.ts";
import type { ServicesDeps } from "./http/services/index.ts";
import { CiAutomation } from "./iam/ci/service.ts";
import { pruneIdempotency } from "./iam/idempotency.ts";
import { createSignInLimits } from "./iam/sign-in-limits.ts";
import {
  agentPackageRoutes,
  cliPackageRoutes,
  loadAgentPackage,
  loadCliPackage,
} from "./ingest/agent-package.ts";
import { createDecodePool, type DecodePool } from "./ingest/decode/pool.ts";
import { ingestRoutes } from "./ingest/http.ts";
import { createIngester } from "./ingest/ingest.ts";
import { createIngestMetrics } from "./ingest/instrumentation.ts";
import { createRegistry, type Registry } from "./instrument.ts";
import { BackgroundWorker } from "./lifecycle/background.ts";
import { createMetricsBackend, type MetricsBackend } from "./metrics/backend.ts";
import type { ProjectLimiter } from "./metrics/concurrency.ts";
import { instrumentLimiter } from "./metrics/instrumentation.ts";
import { latestVmMetrics } from "./metrics/latest.ts";
import { resolveMetricsOptions } from "./metrics/options.ts";
import { createQueryCpuMeter } from "./metrics/query-cpu.ts";
import { openRemoteMetrics } from "./metrics/remote/open.ts";
import { registerProjectUsageMetrics } from "./metrics/usage-metrics.ts";
import { createLogSender, createSmtpSender } from "./notify/channels/email.ts";
import { createDispatcher, type Dispatcher } from "./notify/dispatcher.ts";
import { closeIdleConnections, postJson } from "./notify/http.ts";
import { createNotifyMetrics } from "./notify/instrumentation.ts";
import { resolveNotifyOptions } from "./notify/options.ts";
import { createSealer } from "./notify/seal.ts";
import { buildInfo } from "./ops/build-info.ts";
import { registerProcessMetrics } from "./ops/instrumentation.ts";
import { createQueryMetrics } from "./promapi/instrumentation.ts";
import { promApiFrameworkError, promApiRoutes } from "./promapi/plugin.ts";
import { createQueryPool, type QueryPool, registerQueryPoolMetrics, TENANT_LABEL } from "./promql/index.ts";
import { mergeRanges } from "./tsdb/compactor.ts";
import { checkTsdbFormat, openTsdb, type Tsdb } from "./tsdb/index.ts";

/** The whole service in one process: every role, wired together. */
export interface App {
  readonly config: Config;
  readonly db: DbHandle;
  readonly tsdb: Tsdb;
  readonly metrics: MetricsBackend;
  /** The worker threads decoding remote-write bodies (absent with SVC_INGEST_DECODE_WORKERS=0). */
  readonly decodePool?: DecodePool;
  /** The worker threads of Prometheus-API queries (absent with SVC_QUERY_WORKERS=0). */
  readonly queryPool?: QueryPool;
  /** Per-project query concurrency shared by the RPCs and the Prometheus API. */
  readonly limiter: ProjectLimiter;
  /** The alert evaluator (its 30 s timer runs from the server's listen when config.evaluatorAutoStart). */
  readonly evaluator: Evaluator;
  /** The notification dispatcher (polls the outbox from the server's listen when config.notify.dispatcherAutoStart). */
  readonly dispatcher: Dispatcher;
  readonly server: FastifyInstance;
  readonly log: Logger;
  /** svc's own metrics, as /metrics serves them. */
  readonly registry: Registry;
  /** The SVC_METRICS_LISTEN listener's port, when configured. */
  readonly metricsPort?: number;
  /**
   * Runs `start` once the service is past ready: after its first /readyz answer of 200, or
   * {@link BACKGROUND_START_FALLBACK_MS} after it listens when nothing asks (at once if already past;
   * never once closing). Background work goes here (the evaluator, the dispatcher, the workers'
   * start), so none of it is on the path to the first ready answer (docs/decisions.md, "Background
   * work starts after ready").
   */
  afterReady(start: () => void): void;
  close(): Promise<void>;
}

/** When nothing asks /readyz, the background work starts this long after the server listens. */
export const BACKGROUND_START_FALLBACK_MS = 1000;

export interface AppOptions {
  readonly now?: () => number;
  readonly logger?: Logger;
}

export function createLogger(level: string, format: "json" | "pretty" = "json"): Logger {
  const options = { level, redact: { paths: redactPaths, censor: "[redacted]" } };
  if (format === "json") return pino(options);
  // Readable lines for a person at a terminal; synchronous, so the last lines before an exit are kept.
  return pino(
    options,
    pretty({ sync: true, translateTime: "SYS:HH:MM:ss", ignore: "pid,hostname", singleLine: true }),
  );
}

export async function createApp(config: Config, opts: AppOptions = {}): Promise<App> {
  const log = opts.logger ?? createLogger(config.logLevel, config.logFormat);
  const now = opts.now ?? Date.now;
  // A newer build's metrics store is refused before the database is opened (and perhaps migrated).
  if (config.metricsBackend !== "remote") checkTsdbFormat(join(config.dataDir, "tsdb"));
  const registry = createRegistry();
  // Without self-metrics (the benchmark's peer) no domain is instrumented; /metrics keeps the defaults.
  const instruments = config.selfMetrics ? registry : undefined;
  const opened = await openDb({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    registry: instruments,
  });
  // An audited call's first committed transaction carries its audit event (audit/transactions.ts).
  const db = { ...opened, db: withAuditedTransactions(opened.db) };
  // Prometheus-API queries run in worker threads (started on first use), so a heavy one never holds
  // the event loop; SVC_QUERY_WORKERS=0 keeps them inline.
  // Query CPU per project over the last 5 minutes (svc admin usage, the top-k usage metrics).
  const queryCpu = createQueryCpuMeter({ now });
  const chargeCpu = (projectId: string, seconds: number) => queryCpu.add(projectId, seconds);
  const queryPool =
    config.queryWorkers > 0 ? createQueryPool({ workers: config.queryWorkers, onCpu: chargeCpu }) : undefined;
  // SVC_METRICS_BACKEND=remote: a Prometheus-compatible engine holds the metrics; no TSDB is opened.
  const remote =
    config.metricsBackend === "remote" && config.remoteMetrics
      ? openRemoteMetrics(config.remoteMetrics, { queryPool, log, registry: instruments, chargeCpu })
      : undefined;
  const tsdb = remote
    ? undefined
    : await openTsdb(
        join(config.dataDir, "tsdb"),
        {
          retentionMs: config.retentionMs,
          outOfOrderWindowMs: config.outOfOrderWindowMs,
          maxBlockDurationMs: Math.min(config.maxBlockDurationMs, config.retentionMs),
          now,
        },
        { registry: instruments, log },
      );
  if (tsdb) {
    // How long the start waited for the WAL (SvcRestarting's runbook and start-up time: docs/operations.md).
    const { replayedSegments, replayedSamples, replayMs } = tsdb.stats();
    log.info(
      { segments: replayedSegments, samples: replayedSamples, durationMs: Math.round(replayMs) },
      "WAL replayed",
    );
  }
  const metrics =
    remote?.metrics ??
    createMetricsBackend({
      storage: tsdb!,
      rollupResolutionMs: tsdb!.options.rollupResolutionMs,
      queryPool,
      chargeCpu,
      inlineQueryCost: config.queryInlineCost,
    });
  if (instruments)
    registerProcessMetrics(instruments, {
      build: buildInfo(),
      metricsBackend: config.metricsBackend,
      dialect: db.dialect,
      roles: config.roles,
      dataDir: config.dataDir,
      tsdb: tsdb && {
        retentionMs: tsdb.options.retentionMs,
        // The longest block merging makes: retention drops whole blocks, so data outlives it by up to this.
        maxBlockDurationMs: Math.max(
          tsdb.options.blockRangeMs,
          ...mergeRanges(
            tsdb.options.blockRangeMs,
            tsdb.options.retentionMs,
            tsdb.options.maxBlockDurationMs,
          ),
        ),
      },
      inventory: config.roles.has("ingest") ? db.db : undefined,
    });
  const ingestMetrics = instruments && createIngestMetrics(instruments);
  // Remote-write bodies decoded in worker threads, the event loop left the append and the WAL
  // (docs/decisions.md "Ingest on both cores"); SVC_INGEST_DECODE_WORKERS=0 decodes inline.
  const decodePool =
    config.roles.has("ingest") && config.ingestDecodeWorkers > 0
      ? createDecodePool({ workers: config.ingestDecodeWorkers, inlineBytes: config.ingestInlineBytes })
      : undefined;
  const ingester = createIngester({
    db: db.db,
    storage: remote?.storage ?? tsdb!,
    metrics: ingestMetrics,
    readBack: metrics,
  });
  if (instruments && queryPool) registerQueryPoolMetrics(instruments, queryPool);
  const usageSources = { queryCpu, storedBytes: tsdb && (() => tsdb.chunkBytesByLabel(TENANT_LABEL)) };
  // The top-k noisy tenants, on the processes serving the operator's usage RPC.
  if (instruments && config.roles.has("api"))
    registerProjectUsageMetrics(instruments, {
      db: db.db,
      metrics,
      sources: usageSources,
      now,
      topK: config.usageTopK,
    });
  // Rate limits and the per-project query cap: across replicas on PostgreSQL, in process on SQLite.
  const limits = createLimits({ db, databaseUrl: config.databaseUrl, now });
  const limiter = instruments ? instrumentLimiter(limits.projectLimiter, instruments) : limits.projectLimiter;
  const vmMetrics = {
    metrics,
    limiter,
    now,
    options: resolveMetricsOptions({ ...config.metrics, retentionMs: config.retentionMs }),
  };
  const ci = new CiAutomation({ db: db.db, now, options: config.ci, rateLimiters: limits.rateLimiters });
  // One limit on password guessing for the API's Login and the console's sign-in (iam/sign-in-limits.ts).
  const signInLimits = createSignInLimits(limits.rateLimiters);
  // Idempotency records are kept IDEMPOTENCY_RETENTION_MS (≥ 24 h, docs/decisions.md), then dropped hourly.
  // Audit events past SVC_AUDIT_RETENTION_DAYS go on the same hourly round, in batches.
  const prune = async () => {
    await pruneIdempotency(db.db, now()).catch((err: unknown) =>
      log.warn({ err }, "idempotency pruning failed"),
    );
    await purgeAuditEvents(db.db, now(), config.auditRetentionDays).catch((err: unknown) =>
      log.warn({ err }, "audit event purge failed"),
    );
  };
  // On the shared helper's timer (lifecycle/background.ts): one round at a time, and close() waits for
  // a round in flight before closing the database. prune catches its own errors.
  const housekeeping: BackgroundWorker = new BackgroundWorker({
    intervalMs: 3_600_000,
    onNudge: () => housekeeping.serial(prune),
    onError: (err) => log.warn({ err }, "hourly housekeeping failed"),
  });
  housekeeping.start();
  const alertOptions = resolveAlertOptions({ ...config.alerts, metricsRetentionMs: config.retentionMs });
  // Projects are hashed into shards, each evaluated by the replica holding its lease (cluster/shards.ts).
  const shards = createShardLeases({
    db: db.db,
    holder: processHolderId,
    intervalMs: alertOptions.evaluationIntervalMs,
    count: config.evaluatorShards,
  });
  const evaluator = createEvaluator({
    db: db.db,
    metrics,
    now,
    log,
    options: alertOptions,
    // Resolved and retired incidents and their events are kept 90 days (docs/api.md), then purged.
    purge: async (atMs) => {
      await purgeIncidentHistory(db.db, atMs, alertOptions.historyRetentionMs);
    },
    shards,
    instruments:
      instruments && config.roles.has("evaluator")
        ? createAlertMetrics(instruments, alertOptions.evaluationIntervalMs / 1000)
        : undefined,
  });
  const notifyOptions = resolveNotifyOptions(config.notify.options);
  const sealer = createSealer(config.secretKey);
  const mailer = config.notify.smtpUrl ? createSmtpSender(config.notify.smtpUrl) : createLogSender(log);
  const publicOrigin = config.baseUrl ?? `http://${config.host}:${config.port}`;
  const dispatcher = createDispatcher({
    db: db.db,
    options: notifyOptions,
    sealer,
    mailer,
    post: (url, body, headers) =>
      postJson(url, body, headers, {
        timeoutMs: notifyOptions.requestTimeoutMs,
        allowHosts: notifyOptions.allowHosts,
        ca: config.notify.ca,
      }),
    baseUrl: publicOrigin,
    now,
    log,
    instruments:
      instruments && config.roles.has("notifier")
        ? createNotifyMetrics(instruments, { db: db.db, now })
        : undefined,
  });
  const backupMetrics = instruments && config.roles.has("api") ? createBackupMetrics(instruments) : undefined;
  const agentPackage = loadAgentPackage(config.agentPackageDir);
  // Built at start, registered at the first RPC (http/rpc.ts loads the services then).
  const servicesDeps: ServicesDeps = {
    monitoring: {
      db: db.db,
      pageKey: config.secretKey,
      latest: latestVmMetrics(vmMetrics),
      vmQuery: { ...vmMetrics, db: db.db },
      serverOrigin: config.baseUrl ?? `http://${config.host}:${config.port}`,
      agentPackage,
      now,
    },
    iam: { db: db.db, now, signInLimits },
    audit: { db: db.db, pageKey: config.secretKey },
    admin: {
      db: db.db,
      now,
      backup: { tsdb, db, dataDir: config.dataDir },
      backupMetrics,
      metrics,
      usage: usageSources,
    },
    automation: { ci, apiOrigin: config.baseUrl },
    alerts: {
      db: db.db,
      metrics,
      options: alertOptions,
      pageKey: config.secretKey,
      now,
      // Only an evaluator replica applies revisions (and may take the lease to do so).
      onChange: () => {
        if (config.roles.has("evaluator")) evaluator.nudge();
      },
    },
    destinations: {
      db: db.db,
      options: notifyOptions,
      sealer,
      mailer,
      baseUrl: publicOrigin,
      now,
      pageKey: config.secretKey,
      onQueued: () => {
        if (config.roles.has("notifier")) dispatcher.nudge();
      },
      onRulesChanged: () => {
        if (config.roles.has("evaluator")) evaluator.nudge();
      },
    },
    incidents: { db: db.db, pageKey: config.secretKey, now },
    silences: {
      db: db.db,
      pageKey: config.secretKey,
      now,
      maxPerProject: notifyOptions.maxSilencesPerProject,
    },
  };
  // Background work waits until the service is past ready (App.afterReady): readiness needs the store
  // and the database, none of the background roles, and on a 2-core machine their start (the first
  // alert cycle, the workers' threads) took the cores from the first /readyz answer
  // (docs/performance.md, "Start-up, fourth pass").
  let pastReady = false;
  let closing = false;
  let listening = false;
  let fallback: NodeJS.Timeout | undefined;
  const backgroundStarts: (() => void)[] = [];
  const runBackground = (start: () => void) => {
    try {
      start();
    } catch (err) {
      log.warn({ err }, "background work did not start");
    }
  };
  const startBackground = () => {
    if (pastReady || closing || !listening) return;
    pastReady = true;
    clearTimeout(fallback);
    for (const start of backgroundStarts.splice(0)) runBackground(start);
  };
  const afterReady = (start: () => void) => {
    if (closing) return;
    if (pastReady) runBackground(start);
    else backgroundStarts.push(start);
  };
  const routes = async (router: ConnectRouter) =>
    (await import("./http/services/index.ts")).registerServices(router, servicesDeps);
  // The console's CSRF tokens get a key of their own, derived from the secret key.
  const consoleKey = createHmac("sha256", config.secretKey).update("svc console csrf").digest();
  const server = await buildServer({
    db: db.db,
    log,
    registry,
    operatorToken: config.adminToken,
    maxRequestBytes: config.maxRequestBytes,
    now,
    routes: config.roles.has("api") ? routes : () => {},
    rpcRoutes: config.roles.has("api") ? RPC_ROUTES : [],
    frameworkErrors: config.roles.has("api") ? [promApiFrameworkError] : [],
    readiness: {
      database: () => sql`select 1`.execute(db.db),
      metrics:
        remote?.metrics.ready ?? (() => metrics.labelNames("__readiness__", [], now() - 60_000, now())),
    },
    onReady: startBackground,
    ciTokenResolver: ci.resolver,
    consoleKey,
    trustedProxies: config.trustedProxies,
    audit: config.audit,
    lastUse: config.lastUse,
    plugins: [
      ...(config.roles.has("ingest")
        ? [
            ingestRoutes({
              db: db.db,
              ingester,
              collectorToken: config.collectorToken,
              now,
              maxBodyBytes: 16 * 1024 * 1024,
              metrics: ingestMetrics,
              decodePool,
            }),
          ]
        : []),
      ...(config.roles.has("api") ? apiPlugins() : []),
    ],
  });
  function apiPlugins() {
    return [
      scrapeRoutes({
        ...vmMetrics,
        db: db.db,
        log,
        operatorToken: config.adminToken,
        ciTokenResolver: ci.resolver,
        baseUrl: config.baseUrl,
      }),
      promApiRoutes({
        db: db.db,
        metrics,
        limiter,
        now,
        log,
        operatorToken: config.adminToken,
        ciTokenResolver: ci.resolver,
        options: { retentionMs: config.retentionMs },
        maxRequestBytes: config.maxRequestBytes,
        evaluationIntervalMs: alertOptions.evaluationIntervalMs,
        queryMetrics: instruments && createQueryMetrics(instruments),
        consoleKey,
      }),
      agentPackageRoutes(agentPackage),
      cliPackageRoutes(loadCliPackage(config.cliPackageDir)),
      consoleRoutes({
        db: db.db,
        log,
        now,
        consoleKey,
        publicOrigin,
        distDir: config.consoleDir,
        signInLimits,
      }),
    ];
  }
  // SVC_METRICS_LISTEN: /metrics without auth on its own (private) address.
  const metricsListener = config.metricsListen
    ? await startMetricsListener(registry, config.metricsListen)
    : undefined;
  // The background roles start once the service is past ready, not before: readiness (the store open,
  // its WAL replayed, the database answering) does not wait behind the first alert cycle and outbox
  // poll, which then run beside the first requests (docs/performance.md, "Start-up" and "Start-up,
  // fourth pass").
  afterReady(() => {
    if (config.evaluatorAutoStart && config.roles.has("evaluator")) evaluator.start();
    if (config.notify.dispatcherAutoStart && config.roles.has("notifier")) dispatcher.start();
  });
  server.addHook("onListen", (done) => {
    listening = true;
    fallback = setTimeout(startBackground, BACKGROUND_START_FALLBACK_MS);
    fallback.unref();
    done();
  });
  return {
    config,
    db,
    get tsdb() {
      if (!tsdb) throw new Error("SVC_METRICS_BACKEND=remote: the embedded TSDB is not opened");
      return tsdb;
    },
    metrics,
    queryPool,
    decodePool,
    limiter,
    evaluator,
    dispatcher,
    server,
    log,
    registry,
    metricsPort: metricsListener?.port,
    afterReady,
    async close() {
      closing = true;
      clearTimeout(fallback);
      backgroundStarts.length = 0;
      const housekept = housekeeping.stop();
      await metricsListener?.close();
      await evaluator.stop();
      // A clean stop hands its shards over at once instead of after their leases expire.
      await shards.release().catch(() => {});
      await dispatcher.stop();
      closeIdleConnections();
      await server.close();
      await decodePool?.close();
      await queryPool?.close();
      await limits.close();
      await tsdb?.close();
      await housekept;
      await db.close();
    },
  };
}
