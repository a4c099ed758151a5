import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../testing/dialects.ts";
import { startTestApp, type TestApp } from "../../testing/harness.ts";
import { holdLease, releaseLease } from "./lease.ts";

for (const { dialect, skip } of await testDialects()) {
  describe(`leases (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect);
    });
    after(() => t?.close());

    it("one holder at a time; renewed by its holder; taken over only after it expires", async () => {
      const db = t.app.db.db;
      assert.equal(await holdLease(db, "job", "a", 1_000, 100), true, "free: a takes it");
      assert.equal(await holdLease(db, "job", "b", 1_050, 100), false, "held by a");
      assert.equal(await holdLease(db, "job", "a", 1_090, 100), true, "a renews until 1190");
      assert.equal(await holdLease(db, "job", "b", 1_150, 100), false, "still a's after the renewal");
      assert.equal(await holdLease(db, "job", "b", 1_190, 100), true, "expired: b takes over");
      assert.equal(await holdLease(db, "job", "a", 1_200, 100), false, "a lost it");
      await releaseLease(db, "job", "b");
      assert.equal(await holdLease(db, "job", "a", 1_201, 100), true, "released: free at once");
    });

    it("gives the lease to exactly one of many competing holders", async () => {
      const db = t.app.db.db;
      const results = await Promise.all(
        Array.from({ length: 8 }, (_, i) => holdLease(db, "race", `h${i}`, 5_000, 1_000)),
      );
      assert.equal(results.filter(Boolean).length, 1);
      const expired = await Promise.all(
        Array.from({ length: 8 }, (_, i) => holdLease(db, "race", `h${i + 8}`, 7_000, 1_000)),
      );
      assert.equal(expired.filter(Boolean).length, 1, "one takes over an expired lease");
    });

    it("never refuses a holder its own lease when it asks twice at once (a timer and a nudge)", async () => {
      const db = t.app.db.db;
      for (let i = 0; i < 20; i++) {
        const both = await Promise.all([
          holdLease(db, `twice-${i}`, "same", 9_000, 1_000),
          holdLease(db, `twice-${i}`, "same", 9_000, 1_000),
        ]);
        assert.deepEqual(both, [true, true], `round ${i}`);
      }
    });
  });
}
