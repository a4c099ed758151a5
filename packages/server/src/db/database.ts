import { mkdirSync } from "node:fs";
import { join } from "node:path";
import SQLite from "better-sqlite3";
import {
  type DialectAdapter,
  Kysely,
  Migrator,
  PostgresAdapter,
  PostgresDialect,
  SqliteAdapter,
  SqliteDialect,
  type SqliteDialectConfig,
  sql,
} from "kysely";
import type { Registry } from "../instrument.ts";
import { createDbMetrics, type DbMetrics } from "./instrumentation.ts";
import { migrations } from "./migrations/index.ts";
import type { Database } from "./schema.ts";
import { SCHEMA_VERSION, SchemaTooNewError } from "./schema-version.ts";
import { withStatementCache } from "./statement-cache.ts";

export type Db = Kysely<Database>;
export type DbDialect = "sqlite" | "postgres";

export interface DbHandle {
  readonly db: Db;
  readonly dialect: DbDialect;
  /**
   * SQLite only: copies the database to `path` through SQLite's online backup API (a consistent
   * image while writes go on).
   */
  readonly backup?: (path: string) => Promise<void>;
  close(): Promise<void>;
}

export interface OpenDbOptions {
  /** postgres://… to use PostgreSQL; otherwise SQLite at sqlitePath. */
  readonly databaseUrl?: string;
  /** SQLite file path, or ":memory:". */
  readonly sqlitePath?: string;
  /** Default directory for svc.db when sqlitePath is not given. */
  readonly dataDir?: string;
  /** With a registry, statement latency and errors, the pool and the schema version are measured. */
  readonly registry?: Registry;
}

/** Opens the control-plane store and runs pending migrations. */
export async function openDb(opts: OpenDbOptions): Promise<DbHandle> {
  const url = opts.databaseUrl ?? "";
  let db: Db;
  let dialect: DbDialect;
  let backup: DbHandle["backup"];
  let metrics: DbMetrics | undefined;
  let migrationDb: Db | undefined;
  if (url.startsWith("postgres://") || url.startsWith("postgresql://")) {
    dialect = "postgres";
    // Loaded only for PostgreSQL: a start on SQLite never compiles the driver.
    const { default: pg } = await import("pg");
    // PostgreSQL BIGINT arrives as a string by default; our BIGINT columns hold Unix milliseconds and
    // byte counts, all well inside 2^53.
    pg.types.setTypeParser(20, (v) => Number.parseInt(v, 10));
    const pool = new pg.Pool({ connectionString: url, max: 10 });
    metrics = opts.registry && createDbMetrics(opts.registry, "postgres");
    metrics?.watchPool(pool);
    db = new Kysely<Database>({
      dialect: new PostgresDialect({ pool }),
      ...(metrics ? { log: metrics.log } : {}),
    });
  } else {
    dialect = "sqlite";
    let path = opts.sqlitePath;
    if (!path) {
      const dir = opts.dataDir ?? ".data";
      mkdirSync(dir, { recursive: true });
      path = join(dir, "svc.db");
    }
    const sqlite = new SQLite(path);
    sqlite.pragma("journal_mode = WAL");
    sqlite.pragma("synchronous = NORMAL");
    sqlite.pragma("foreign_keys = ON");
    sqlite.pragma("busy_timeout = 5000");
    metrics = opts.registry && createDbMetrics(opts.registry, "sqlite");
    const database = withStatementCache(sqlite);
    db = new Kysely<Database>({
      dialect: new SqliteDialect({ database }),
      ...(metrics ? { log: metrics.log } : {}),
    });
    // Migrations go through their own Kysely on the same connection, whose adapter lets the Migrator
    // wrap them in one transaction: SQLite's DDL is transactional, Kysely's SQLite adapter just does not
    // say so. A fresh database then takes one commit instead of one per statement, and a failed
    // migration leaves nothing half-applied. It is never destroyed (that would close the connection).
    migrationDb = new Kysely<Database>({ dialect: new TransactionalSqliteDialect({ database }) });
    backup = async (to) => {
      await sqlite.backup(to);
    };
  }
  try {
    const applied = await appliedMigrations(db);
    refuseNewerSchema(applied);
    // A restart on a current schema (every migration applied, the usual case) skips the Migrator, whose
    // own checks take several statements more; anything else goes through it, lock and all.
    if (!isCurrent(applied)) await migrate(migrationDb ?? db);
  } catch (err) {
    await db.destroy();
    throw err;
  }
  metrics?.schemaVersion(SCHEMA_VERSION);
  return { db, dialect, backup, close: () => db.destroy() };
}

/** Migrations already applied (none on a new database). */
export async function appliedMigrations(db: Db): Promise<string[]> {
  try {
    const { rows } = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(db);
    return rows.map((r) => r.name);
  } catch {
    return []; // no migration table yet
  }
}

/** Throws SchemaTooNewError, before any migration runs, when a newer build migrated the database. */
function refuseNewerSchema(applied: readonly string[]): void {
  const unknown = applied.filter((name) => !(name in migrations));
  if (unknown.length > 0) throw new SchemaTooNewError(unknown);
}

/** Every migration of this build is applied, and no other (appliedMigrations sorts by name). */
function isCurrent(applied: readonly string[]): boolean {
  const names = Object.keys(migrations);
  return applied.length === names.length && names.every((name, i) => applied[i] === name);
}

/** Kysely's SQLite adapter, saying what SQLite does: DDL runs inside a transaction. */
class TransactionalSqliteAdapter extends SqliteAdapter {
  override get supportsTransactionalDdl(): boolean {
    return true;
  }
}

class TransactionalSqliteDialect extends SqliteDialect {
  constructor(config: SqliteDialectConfig) {
    super(config);
  }
  override createAdapter(): DialectAdapter {
    return new TransactionalSqliteAdapter();
  }
}

async function migrate(db: Db): Promise<void> {
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === "Error");
  if (error || failed) {
    throw new Error(`database migration ${failed?.migrationName ?? ""} failed: ${String(error)}`);
  }
}

/**
 * Runs `fn` in one transaction whose commit, on PostgreSQL, does not wait for its WAL flush (the next
 * synchronous commit flushes it): for records that only a crash of the database server within the WAL
 * writer's delay could lose, and whose loss harms nothing (an audit event of a call that changed
 * nothing, a key's last use). SQLite commits as usual.
 */
export async function lazyCommit<T>(db: Db, fn: (trx: Db) => Promise<T>): Promise<T> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  return db.transaction().execute(async (trx) => {
    if (postgres) await sql`set local synchronous_commit = off`.execute(trx);
    return fn(trx);
  });
}
