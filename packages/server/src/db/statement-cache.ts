import type SQLite from "better-sqlite3";
import type { SqliteDatabase } from "kysely";

/**
 * better-sqlite3 behind Kysely, with prepared statements reused by SQL text. Kysely's SQLite driver
 * prepares every query anew, and an RPC runs several (credential, grants, the VM): preparing was ~5%
 * of a QueryVMMonitoring request's CPU. The cache is bounded (oldest statement dropped first) because
 * some SQL varies with its input (IN lists); a statement still iterating a streamed result is busy,
 * so a second use of the same SQL meanwhile gets a fresh, uncached statement.
 */
export function withStatementCache(
  sqlite: SQLite.Database,
  maxStatements = 256,
): SqliteDatabase & {
  readonly cachedStatements: () => number;
} {
  const cache = new Map<string, SQLite.Statement>();
  return {
    close: () => sqlite.close(),
    prepare(sql: string) {
      const cached = cache.get(sql);
      if (cached !== undefined) return cached.busy ? sqlite.prepare(sql) : cached;
      const stmt = sqlite.prepare(sql);
      if (cache.size >= maxStatements) cache.delete(cache.keys().next().value as string);
      cache.set(sql, stmt);
      return stmt;
    },
    cachedStatements: () => cache.size,
  };
}
