import assert from "node:assert/strict";
import { describe, it } from "node:test";
import SQLite from "better-sqlite3";
import { Kysely, SqliteDialect, sql } from "kysely";
import { withStatementCache } from "./statement-cache.ts";

interface T {
  t: { id: number; name: string };
}

describe("withStatementCache()", () => {
  it("reuses a statement per SQL text with fresh parameters each time", async () => {
    const sqlite = new SQLite(":memory:");
    const cached = withStatementCache(sqlite, 4);
    const db = new Kysely<T>({ dialect: new SqliteDialect({ database: cached }) });
    await sql`create table t (id integer primary key, name text)`.execute(db);
    for (let i = 1; i <= 3; i++)
      await db
        .insertInto("t")
        .values({ id: i, name: `n${i}` })
        .execute();
    const byId = (id: number) => db.selectFrom("t").select("name").where("id", "=", id).executeTakeFirst();
    assert.deepEqual(await byId(2), { name: "n2" });
    const before = cached.cachedStatements();
    assert.deepEqual(await byId(3), { name: "n3" });
    assert.equal(cached.cachedStatements(), before, "the same SQL is not prepared again");
    await db.destroy();
  });

  it("stays within its bound when the SQL varies", async () => {
    const sqlite = new SQLite(":memory:");
    const cached = withStatementCache(sqlite, 4);
    const db = new Kysely<T>({ dialect: new SqliteDialect({ database: cached }) });
    await sql`create table t (id integer primary key, name text)`.execute(db);
    for (let n = 1; n <= 10; n++) {
      const ids = Array.from({ length: n }, (_, i) => i);
      assert.deepEqual(await db.selectFrom("t").select("id").where("id", "in", ids).execute(), []);
    }
    assert.equal(cached.cachedStatements(), 4);
    await db.destroy();
  });

  it("gives a fresh statement while the cached one is still iterating", () => {
    const sqlite = new SQLite(":memory:");
    const cached = withStatementCache(sqlite, 4);
    sqlite.exec("create table t (id integer primary key); insert into t values (1), (2), (3)");
    const text = "select id from t order by id";
    const seen: unknown[] = [];
    for (const row of cached.prepare(text).iterate([])) {
      seen.push(row);
      // Reusing the iterating statement would throw "This statement is busy executing a query".
      assert.equal(cached.prepare(text).all([]).length, 3);
    }
    assert.equal(seen.length, 3);
    assert.equal(cached.prepare(text).all([]).length, 3);
    sqlite.close();
  });
});
