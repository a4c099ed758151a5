import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import SQLite from "better-sqlite3";
import { Kysely, Migrator, PostgresDialect, SqliteDialect, sql } from "kysely";
import pg from "pg";
import { testDialects } from "../../testing/dialects.ts";
import { appliedMigrations, openDb } from "./database.ts";
import { migrations } from "./migrations/index.ts";
import { LATEST_MIGRATION, SCHEMA_VERSION, SchemaTooNewError, schemaVersionOf } from "./schema-version.ts";

const names = Object.keys(migrations);
const OWN = new Set(["kysely_migration", "kysely_migration_lock"]);

/** A bare Kysely on the test database: migrated by hand, not by openDb. */
function rawDb(databaseUrl: string | undefined, sqlitePath: string): Kysely<unknown> {
  if (databaseUrl)
    return new Kysely({
      dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: databaseUrl, max: 2 }) }),
    });
  const s = new SQLite(sqlitePath);
  s.pragma("foreign_keys = ON");
  s.pragma("synchronous = OFF"); // a test database: no fsync per seeded row
  return new Kysely({ dialect: new SqliteDialect({ database: s }) });
}

/** A value of the column's type; the same in every table, so foreign keys between seeded rows match. */
function valueFor(dataType: string): string | number {
  const t = dataType.toLowerCase();
  if (t.includes("int")) return 7;
  if (t.includes("double") || t.includes("float") || t.includes("real")) return 0.5;
  return "seed";
}

/**
 * One row in every table the schema has, every column filled (nullable ones too), parents before
 * children (a row whose parent is not in yet is retried next round). Returns the rows by table.
 */
async function seedEveryTable(db: Kysely<unknown>): Promise<Map<string, Record<string, string | number>>> {
  const tables = (await db.introspection.getTables()).filter((t) => !OWN.has(t.name));
  const rows = new Map<string, Record<string, string | number>>();
  let pending = tables;
  while (pending.length > 0) {
    const failed: typeof tables = [];
    const errors: string[] = [];
    for (const t of pending) {
      const row = Object.fromEntries(t.columns.map((c) => [c.name, valueFor(c.dataType)]));
      try {
        await db
          .insertInto(t.name as never)
          .values(row as never)
          .execute();
        rows.set(t.name, row);
      } catch (e) {
        failed.push(t);
        errors.push(`${t.name}: ${(e as Error).message}`);
      }
    }
    assert.ok(failed.length < pending.length, `no table could be seeded: ${errors.join("; ")}`);
    pending = failed;
  }
  return rows;
}

it("SCHEMA_VERSION names the newest migration", () => {
  assert.equal(LATEST_MIGRATION, names.at(-1));
  assert.equal(SCHEMA_VERSION, names.length);
  assert.deepEqual(
    names.map(schemaVersionOf),
    names.map((_, i) => i + 1),
  );
});

it("docs/operations.md states this build's schema version and newest migration", () => {
  const doc = readFileSync(join(import.meta.dirname, "../../../../docs/operations.md"), "utf8");
  const row = doc.split("\n").find((l) => l.startsWith("| control-plane schema |"));
  assert.ok(row?.endsWith(`| ${SCHEMA_VERSION} (\`${LATEST_MIGRATION}\`) |`), row);
  assert.ok(doc.includes(`this build's newest (${LATEST_MIGRATION}, schema version ${SCHEMA_VERSION})`));
});

for (const { dialect, skip } of await testDialects()) {
  describe(`control-plane migrations (${dialect.name})`, { skip }, () => {
    it("from every earlier schema version to the newest, with a row in every table, nothing lost", async () => {
      for (let k = 1; k < names.length; k++) {
        const database = await dialect.create();
        const dir = mkdtempSync(join(tmpdir(), "svc-migrate-"));
        const sqlitePath = join(dir, "svc.db");
        try {
          const raw = rawDb(database.databaseUrl, sqlitePath);
          const migrator = new Migrator({ db: raw, provider: { getMigrations: async () => migrations } });
          const { error } = await migrator.migrateTo(names[k - 1]);
          assert.ifError(error);
          const seeded = await seedEveryTable(raw);
          assert.ok(seeded.size > 0);
          // A counter table (auth_revision, eval_revision) holds its migration's own rows beside the seeded one.
          const counts = new Map<string, number>();
          for (const table of seeded.keys()) {
            const { rows } = await sql<{
              n: number | string;
            }>`select count(*) as n from ${sql.table(table)}`.execute(raw);
            counts.set(table, Number(rows[0].n));
          }
          await raw.destroy();

          // The real start-up path: refuses nothing, migrates to the newest.
          const h = await openDb({ databaseUrl: database.databaseUrl, sqlitePath });
          try {
            assert.deepEqual(await appliedMigrations(h.db), names, `from ${names[k - 1]}`);
            for (const [table, row] of seeded) {
              const { rows } = await sql<Record<string, unknown>>`select * from ${sql.table(table)}`.execute(
                h.db,
              );
              assert.equal(rows.length, counts.get(table), `${table} after migrating from ${names[k - 1]}`);
              const same = (r: Record<string, unknown>) =>
                Object.entries(row).every(([col, v]) => String(r[col]) === String(v));
              assert.ok(rows.some(same), `${table}: the seeded row from ${names[k - 1]}`);
            }
          } finally {
            await h.close();
          }
        } finally {
          await database.drop();
          rmSync(dir, { recursive: true, force: true });
        }
      }
    });

    it("a failing migration on a fresh database leaves nothing applied (one transaction)", async () => {
      const database = await dialect.create();
      const dir = mkdtempSync(join(tmpdir(), "svc-migrate-"));
      const sqlitePath = join(dir, "svc.db");
      try {
        // A table in the way of 0012_audit: the twelfth migration fails after eleven succeeded.
        const raw = rawDb(database.databaseUrl, sqlitePath);
        await sql`create table audit_events (x integer)`.execute(raw);
        await raw.destroy();
        await assert.rejects(openDb({ databaseUrl: database.databaseUrl, sqlitePath }), /0012_audit failed/);
        const after = rawDb(database.databaseUrl, sqlitePath);
        try {
          const tables = (await after.introspection.getTables())
            .map((t) => t.name)
            .filter((t) => !OWN.has(t));
          assert.deepEqual(tables, ["audit_events"]);
          const { rows } = await sql<{ name: string }>`select name from kysely_migration`.execute(after);
          assert.deepEqual(rows, []);
        } finally {
          await after.destroy();
        }
      } finally {
        await database.drop();
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it("a current database reopens without the Migrator touching it", async () => {
      const database = await dialect.create();
      const dir = mkdtempSync(join(tmpdir(), "svc-migrate-"));
      const sqlitePath = join(dir, "svc.db");
      try {
        await (await openDb({ databaseUrl: database.databaseUrl, sqlitePath })).close();
        // The Migrator would create its lock table again; the version check alone does not.
        const raw = rawDb(database.databaseUrl, sqlitePath);
        await sql`drop table kysely_migration_lock`.execute(raw);
        const tablesBefore = (await raw.introspection.getTables()).map((t) => t.name).sort();
        await raw.destroy();
        const handle = await openDb({ databaseUrl: database.databaseUrl, sqlitePath });
        try {
          assert.deepEqual(await appliedMigrations(handle.db), names);
          const tables = (await handle.db.introspection.getTables()).map((t) => t.name).sort();
          assert.deepEqual(tables, tablesBefore);
        } finally {
          await handle.close();
        }
      } finally {
        await database.drop();
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it("a database a newer build migrated is refused before any migration runs, and left as it was", async () => {
      const database = await dialect.create();
      const dir = mkdtempSync(join(tmpdir(), "svc-migrate-"));
      const sqlitePath = join(dir, "svc.db");
      try {
        const raw = rawDb(database.databaseUrl, sqlitePath);
        const migrator = new Migrator({ db: raw, provider: { getMigrations: async () => migrations } });
        assert.ifError((await migrator.migrateTo(names[2])).error);
        // What a newer build leaves: a migration this one does not know, beside older ones.
        await sql`insert into kysely_migration (name, timestamp) values ('9999_from_the_future', '2030-01-01T00:00:00.000Z')`.execute(
          raw,
        );
        const tablesBefore = (await raw.introspection.getTables()).map((t) => t.name).sort();
        await raw.destroy();
        await assert.rejects(openDb({ databaseUrl: database.databaseUrl, sqlitePath }), (e: unknown) => {
          assert.ok(e instanceof SchemaTooNewError, String(e));
          assert.match(
            e.message,
            /9999_from_the_future applied, newer than this build's newest \(0\d{3}_\w+, schema version \d+\): upgrade svc .*\(nothing was changed\)$/,
          );
          return true;
        });
        const after = rawDb(database.databaseUrl, sqlitePath);
        try {
          assert.deepEqual((await after.introspection.getTables()).map((t) => t.name).sort(), tablesBefore);
          const { rows } = await sql<{
            name: string;
          }>`select name from kysely_migration order by name`.execute(after);
          assert.deepEqual(
            rows.map((r) => r.name),
            [...names.slice(0, 3), "9999_from_the_future"],
          );
        } finally {
          await after.destroy();
        }
      } finally {
        await database.drop();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}
