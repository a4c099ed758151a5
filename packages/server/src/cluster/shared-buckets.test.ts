import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { sql } from "kysely";
import { testDialects } from "../../testing/dialects.ts";
import { TestClock } from "../../testing/harness.ts";
import { type DbHandle, openDb } from "../db/database.ts";
import { SvcError } from "../errors.ts";
import { sharedRateLimiters } from "./shared-buckets.ts";

/** The outcome of a take: "ok", or the Retry-After seconds of a refusal. */
async function outcome(p: Promise<void>): Promise<"ok" | number> {
  try {
    await p;
    return "ok";
  } catch (e) {
    assert.ok(e instanceof SvcError, String(e));
    assert.equal(e.code, "resource_exhausted");
    assert.equal(e.reason, "RATE_LIMITED");
    assert.equal(e.metadata.retryAfterSeconds, String(e.retryAfterSeconds));
    return e.retryAfterSeconds ?? -1;
  }
}

for (const { dialect, skip } of await testDialects()) {
  describe(`sharedRateLimiters() (${dialect.name})`, { skip }, () => {
    let handle: DbHandle;
    let drop: () => Promise<void>;
    const clock = new TestClock();
    before(async () => {
      const created = await dialect.create();
      drop = created.drop;
      handle = await openDb({ databaseUrl: created.databaseUrl, sqlitePath: ":memory:" });
    });
    after(async () => {
      await handle?.close();
      await drop?.();
    });

    it("allows the burst, refuses the next with Retry-After, refills with time", async () => {
      const l = sharedRateLimiters(handle.db, clock.now)("t.refill", { burst: 3, perMinute: 6 });
      const got = [];
      for (let i = 0; i < 4; i++) got.push(await outcome(l.take("k", "tries")));
      assert.deepEqual(got, ["ok", "ok", "ok", 10]);
      clock.advance(5_000);
      assert.equal(await outcome(l.take("k", "tries")), 5, "half a token back: 5 s to go");
      clock.advance(5_000);
      assert.equal(await outcome(l.take("k", "tries")), "ok");
      assert.equal(await outcome(l.take("other", "tries")), "ok", "another key has its own bucket");
    });

    it("keeps two limiters over one table to one budget, and families apart", async () => {
      // Two replicas: each its own factory, one database.
      const a = sharedRateLimiters(handle.db, clock.now)("t.shared", { burst: 4, perMinute: 1 });
      const b = sharedRateLimiters(handle.db, clock.now)("t.shared", { burst: 4, perMinute: 1 });
      const other = sharedRateLimiters(handle.db, clock.now)("t.other", { burst: 1, perMinute: 1 });
      const got = await Promise.all([a, b, a, b, a, b].map((l) => outcome(l.take("k", "tries"))));
      assert.deepEqual(
        got.filter((g) => g === "ok").length,
        4,
        `exactly the burst is taken: ${JSON.stringify(got)}`,
      );
      assert.ok(got.every((g) => g === "ok" || g === 60));
      assert.equal(await outcome(other.take("k", "tries")), "ok");
    });

    it("gives a token back, never beyond the burst, across replicas", async () => {
      const a = sharedRateLimiters(handle.db, clock.now)("t.back", { burst: 2, perMinute: 0 });
      const b = sharedRateLimiters(handle.db, clock.now)("t.back", { burst: 2, perMinute: 0 });
      await a.giveBack("k"); // no row yet: nothing to give back, nothing made
      assert.equal(await outcome(a.take("k", "x")), "ok");
      assert.equal(await outcome(a.take("k", "x")), "ok");
      assert.equal(await outcome(b.take("k", "x")), 60);
      await b.giveBack("k");
      assert.equal(
        await outcome(a.take("k", "x")),
        "ok",
        "the token given back on one replica is taken on the other",
      );
      for (let i = 0; i < 5; i++) await a.giveBack("k");
      assert.deepEqual([await outcome(b.take("k", "x")), await outcome(b.take("k", "x"))], ["ok", "ok"]);
      assert.equal(
        await outcome(b.take("k", "x")),
        60,
        "five back fill the bucket to its burst of 2, no more",
      );
    });

    it("refuses a family without burst and one that never refills says 60 s", async () => {
      const f = sharedRateLimiters(handle.db, clock.now);
      assert.equal(await outcome(f("t.none", { burst: 0, perMinute: 6 }).take("k", "x")), 10);
      const once = f("t.once", { burst: 1, perMinute: 0 });
      assert.equal(await outcome(once.take("k", "x")), "ok");
      clock.advance(3_600_000);
      assert.equal(await outcome(once.take("k", "x")), 60);
    });

    it("stores a very long key as its hash", async () => {
      const l = sharedRateLimiters(handle.db, clock.now)("t.long", { burst: 1, perMinute: 1 });
      const long = "x".repeat(10_000);
      assert.equal(await outcome(l.take(long, "x")), "ok");
      assert.equal(await outcome(l.take(long, "x")), 60);
      const rows = await handle.db
        .selectFrom("rate_buckets")
        .select("key")
        .where("scope", "=", "t.long")
        .execute();
      assert.deepEqual(
        rows.map((r) => r.key.slice(0, 7)),
        ["sha256:"],
      );
    });

    it("keeps the buckets out of the WAL on PostgreSQL (an unlogged table)", {
      skip: dialect.name !== "postgres",
    }, async () => {
      const { rows } = await sql<{
        p: string;
      }>`select relpersistence as p from pg_class where relname = 'rate_buckets'`.execute(handle.db);
      assert.deepEqual(rows, [{ p: "u" }]);
    });

    it("prunes the rows of buckets that are full again", async () => {
      const f = sharedRateLimiters(handle.db, clock.now, { pruneIntervalMs: 60_000 });
      const l = f("t.prune", { burst: 2, perMinute: 60 });
      for (const k of ["a", "b", "c"]) await l.take(k, "x");
      await l.take("c", "x");
      const count = async () =>
        (await handle.db.selectFrom("rate_buckets").select("key").where("scope", "=", "t.prune").execute())
          .map((r) => r.key)
          .sort();
      assert.deepEqual(await count(), ["a", "b", "c"]);
      // a and b are full after 1 s, c after 2 s; the next take after the prune interval prunes.
      clock.advance(60_000);
      await l.take("d", "x");
      assert.deepEqual(await count(), ["d"]);
    });
  });
}
