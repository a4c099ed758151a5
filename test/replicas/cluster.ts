import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../../packages/server/src/net/free-port.ts";
import type { TestDialect } from "../../packages/server/testing/dialects.ts";
import { type EngineKind, type RunningEngine, startEngine } from "../../packages/server/testing/engines.ts";
import { type ServerProcess, startServerProcess } from "../../packages/server/testing/server-process.ts";
import { type RoundRobinProxy, startRoundRobinProxy } from "./proxy.ts";

/**
 * The evaluation cycle, 30 s shortened to 6 s so the suites wait seconds, not minutes: the same
 * proportions (shard leases of 4 s renewed every 1 s), long enough that a loaded CI machine's pauses
 * do not cost a lease (a 1 s cycle gave leases of 667 ms renewed every 167 ms).
 */
export const EVALUATION_INTERVAL_S = 6;
/** A claimed delivery is retried by another replica after this (at least twice the 10 s request timeout). */
export const NOTIFY_LEASE_S = 20;

/**
 * The scaled layout of docs/deploy.md on loopback: `kind` as the metrics engine, one fresh PostgreSQL
 * database, `replicas` server processes with every role and the same secrets, and a round-robin load
 * balancer in front whose origin is every replica's SVC_BASE_URL.
 */
export interface ReplicaCluster {
  readonly engine: RunningEngine;
  readonly lb: RoundRobinProxy;
  /** The replicas in the balancer's order; a killed one stays in the list (and in the balancer). */
  readonly replicas: readonly Replica[];
  /** The one PostgreSQL database of all replicas. */
  readonly databaseUrl: string;
  readonly adminToken: string;
  readonly collectorToken: string;
  /** SIGKILLs replica `i` and waits until it has exited. */
  kill(i: number): Promise<void>;
  /** SIGTERMs replica `i` (a clean stop, as systemd or an orchestrator stops it) and waits until it has exited. */
  stop(i: number): Promise<void>;
  /** Starts replica `i` again on its port and data directory; resolves once it listens. */
  start(i: number): Promise<void>;
  close(): Promise<void>;
}

export interface Replica {
  /** Its own origin, past the balancer. */
  readonly origin: string;
  readonly child: ServerProcess["child"];
  readonly exited: ServerProcess["exited"];
}

export async function startReplicaCluster(
  kind: EngineKind,
  postgres: TestDialect,
  opts: { replicas?: number; caFile?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<ReplicaCluster> {
  const dir = mkdtempSync(join(tmpdir(), `svc-replicas-${kind}-`));
  const started: { engine?: RunningEngine; lb?: RoundRobinProxy; db?: { drop(): Promise<void> } } = {};
  const replicas: Replica[] = [];
  const close = async () => {
    for (const r of replicas) if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill();
    await Promise.all(replicas.map((r) => r.exited));
    await started.lb?.close();
    await started.engine?.stop();
    await started.db?.drop();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const database = await postgres.create();
    started.db = database;
    const engine = await startEngine(kind);
    started.engine = engine;
    const ports = await Promise.all(Array.from({ length: opts.replicas ?? 2 }, () => freePort("127.0.0.1")));
    const lb = await startRoundRobinProxy(
      ports.map((p) => `http://127.0.0.1:${p}`),
      { sticky: ["/v1/ingest/"] },
    );
    started.lb = lb;
    const adminToken = `svcadmin_${randomBytes(18).toString("base64url")}`;
    const collectorToken = `svcc_${randomBytes(18).toString("base64url")}`;
    const shared: NodeJS.ProcessEnv = {
      SVC_BASE_URL: lb.url,
      SVC_TRUSTED_PROXIES: "127.0.0.1",
      SVC_DATABASE_URL: database.databaseUrl,
      SVC_SECRET_KEY: randomBytes(32).toString("hex"),
      SVC_ADMIN_TOKEN: adminToken,
      SVC_COLLECTOR_TOKEN: collectorToken,
      SVC_METRICS_BACKEND: "remote",
      SVC_REMOTE_WRITE_URL: engine.remoteWriteUrl,
      SVC_REMOTE_QUERY_URL: engine.queryUrl,
      SVC_DEMO: "false",
      SVC_EVALUATION_INTERVAL_SECONDS: String(EVALUATION_INTERVAL_S),
      SVC_NOTIFY_LEASE_SECONDS: String(NOTIFY_LEASE_S),
      SVC_NOTIFY_ALLOW_HOSTS: "127.0.0.1",
      ...(opts.caFile ? { SVC_NOTIFY_CA_FILE: opts.caFile } : {}),
      SVC_QUERY_WORKERS: "1",
      SVC_LOG_LEVEL: "warn",
      SVC_LOG_FORMAT: "json",
      ...opts.env,
    };
    const base = { ...process.env };
    for (const k of Object.keys(base)) if (k.startsWith("SVC_")) delete base[k];
    // Started together, as an orchestrator starts replicas: the migrations take a lock in PostgreSQL.
    const startOne = (i: number) =>
      startServerProcess({
        env: {
          ...base,
          ...shared,
          HOST: "127.0.0.1",
          PORT: String(ports[i]),
          SVC_DATA_DIR: join(dir, `replica-${i}`),
        },
      });
    const starts = ports.map((_, i) => startOne(i));
    const results = await Promise.allSettled(starts);
    for (const [i, r] of results.entries())
      if (r.status === "fulfilled")
        replicas.push({
          origin: `http://127.0.0.1:${ports[i]}`,
          child: r.value.child,
          exited: r.value.exited,
        });
    const failed = results.find((r) => r.status === "rejected");
    if (failed) throw failed.reason;
    return {
      engine,
      lb,
      replicas,
      databaseUrl: database.databaseUrl ?? "",
      adminToken,
      collectorToken,
      async kill(i) {
        replicas[i].child.kill("SIGKILL");
        await replicas[i].exited;
      },
      async stop(i) {
        replicas[i].child.kill("SIGTERM");
        await replicas[i].exited;
      },
      async start(i) {
        const r = await startOne(i);
        replicas[i] = { origin: replicas[i].origin, child: r.child, exited: r.exited };
      },
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
