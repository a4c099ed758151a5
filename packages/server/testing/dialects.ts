import { randomBytes } from "node:crypto";
import pg from "pg";

/**
 * The control-plane dialects every store test runs on. SQLite always; PostgreSQL when it answers on
 * 127.0.0.1:5432 (or SVC_TEST_PG_URL). In CI (CI=true) PostgreSQL must be there: its absence fails
 * the run instead of silently testing one dialect.
 */
export interface TestDialect {
  readonly name: "sqlite" | "postgres";
  /** A fresh, empty database for one test; call drop() when done. */
  create(): Promise<{ databaseUrl?: string; drop(): Promise<void> }>;
}

const PG_BASE = process.env.SVC_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";

let pgAvailable: Promise<boolean> | undefined;

async function probePostgres(): Promise<boolean> {
  const client = new pg.Client({ connectionString: PG_BASE, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query("select 1");
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

const sqlite: TestDialect = {
  name: "sqlite",
  async create() {
    return { databaseUrl: undefined, drop: async () => {} };
  },
};

const postgres: TestDialect = {
  name: "postgres",
  async create() {
    const dbName = `svc_t_${randomBytes(6).toString("hex")}`;
    const admin = new pg.Client({ connectionString: PG_BASE });
    await admin.connect();
    await admin.query(`create database ${dbName}`);
    await admin.end();
    const url = new URL(PG_BASE);
    url.pathname = `/${dbName}`;
    return {
      databaseUrl: url.toString(),
      async drop() {
        const c = new pg.Client({ connectionString: PG_BASE });
        await c.connect();
        try {
          // pg-pool's end() resolves before its clients' sockets have closed; forcing the drop then
          // kills a closing connection, whose error nobody listens to any more. Wait for them instead.
          for (let attempt = 0; ; attempt++) {
            try {
              await c.query(`drop database if exists ${dbName}`);
              return;
            } catch (err) {
              if (attempt >= 50 || !/being accessed by other users/.test(String(err))) throw err;
              await new Promise((r) => setTimeout(r, 100));
            }
          }
        } finally {
          await c.end();
        }
      },
    };
  },
};

/** The dialects to run on, with a skip reason for the missing one (outside CI only). */
export async function testDialects(): Promise<{ dialect: TestDialect; skip?: string }[]> {
  pgAvailable ??= probePostgres();
  const havePg = await pgAvailable;
  if (!havePg && process.env.CI === "true") {
    throw new Error(
      `PostgreSQL is not reachable at ${new URL(PG_BASE).host}; CI must start it (see .ci/run)`,
    );
  }
  return [
    { dialect: sqlite },
    {
      dialect: postgres,
      skip: havePg ? undefined : `PostgreSQL not reachable at ${new URL(PG_BASE).host}; skipped outside CI`,
    },
  ];
}
