import type { LogEvent } from "kysely";
import { counter, gauge, histogram, observed, type Registry } from "../instrument.ts";

/** What a PostgreSQL pool tells about its connections (pg.Pool's counters). */
export interface PoolFigures {
  readonly totalCount: number;
  readonly idleCount: number;
  readonly waitingCount: number;
}

/**
 * The control-plane database: statement latency and errors (from Kysely's log hook), the connection
 * pool (PostgreSQL; SQLite has none, so those families stay empty) and the schema version.
 */
export function createDbMetrics(registry: Registry, dialect: string) {
  const duration = histogram(
    registry,
    "svc_db_statement_duration_seconds",
    "Duration of one control-plane SQL statement.",
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5],
  );
  const errors = counter(
    registry,
    "svc_db_statement_errors_total",
    "Control-plane SQL statements that failed.",
  );
  const schema = gauge(
    registry,
    "svc_db_schema_version",
    "Control-plane schema version: the number of migrations applied.",
    ["dialect"],
  );
  let pool: PoolFigures | undefined;
  observed(
    registry,
    "gauge",
    "svc_db_pool_connections_in_use",
    "PostgreSQL connections running a statement.",
    () => (pool ? pool.totalCount - pool.idleCount : undefined),
  );
  observed(
    registry,
    "gauge",
    "svc_db_pool_waiting_clients",
    "Statements waiting for a free PostgreSQL connection.",
    () => pool?.waitingCount,
  );
  return {
    /** Kysely's `log` option. */
    log(event: LogEvent): void {
      if (event.level === "error") errors.inc();
      duration.observe(event.queryDurationMillis / 1000);
    },
    watchPool(p: PoolFigures): void {
      pool = p;
    },
    schemaVersion(version: number): void {
      schema.set({ dialect }, version);
    },
  };
}

export type DbMetrics = ReturnType<typeof createDbMetrics>;
