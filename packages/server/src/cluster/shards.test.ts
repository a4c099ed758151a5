import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type DbHandle, openDb } from "../db/database.ts";
import { testDialects } from "../testing/dialects.ts";
import { createShardLeases, type ShardLeases, shardOf } from "./shards.ts";

const INTERVAL = 30_000;
const COUNT = 16;

describe("shardOf", () => {
  it("is stable, in range, and spreads projects over every shard", () => {
    const seen = new Array(COUNT).fill(0);
    for (let i = 0; i < 2000; i++) {
      const s = shardOf(`project-${i}`, COUNT);
      assert.ok(Number.isInteger(s) && s >= 0 && s < COUNT);
      assert.equal(shardOf(`project-${i}`, COUNT), s);
      seen[s]++;
    }
    // 125 per shard on average; a fair hash keeps every shard well inside [60, 190].
    for (const n of seen) assert.ok(n > 60 && n < 190, `per shard: ${seen}`);
  });
});

for (const { dialect, skip } of await testDialects()) {
  describe(`evaluator shards across replicas (${dialect.name})`, { skip }, () => {
    let h: DbHandle;
    let drop: () => Promise<void> = async () => {};
    before(async () => {
      const d = await dialect.create();
      drop = d.drop;
      h = await openDb({ databaseUrl: d.databaseUrl, sqlitePath: d.databaseUrl ? undefined : ":memory:" });
    });
    after(async () => {
      await h?.close();
      await drop();
    });

    /** Replicas and what each acquire last said it holds, with when (a holding lasts until then + ttl). */
    function cluster(names: string[]) {
      const replicas = new Map<string, { leases: ShardLeases; held: ReadonlySet<number>; at: number }>();
      for (const n of names)
        replicas.set(n, {
          leases: createShardLeases({
            db: h.db,
            holder: `${dialect.name}-${n}`,
            intervalMs: INTERVAL,
            count: COUNT,
          }),
          held: new Set(),
          at: Number.NEGATIVE_INFINITY,
        });
      return {
        replicas,
        async tick(name: string, nowMs: number) {
          const r = replicas.get(name)!;
          r.held = await r.leases.acquire(nowMs);
          r.at = nowMs;
          return r.held;
        },
        /** Every shard is claimed by at most one replica whose claim is still inside its lease. */
        assertDisjoint(nowMs: number) {
          const owner = new Map<number, string>();
          for (const [n, r] of replicas) {
            if (nowMs >= r.at + 2 * INTERVAL) continue;
            for (const s of r.held) {
              assert.equal(
                owner.get(s),
                undefined,
                `shard ${s} claimed by ${owner.get(s)} and ${n} at ${nowMs}`,
              );
              owner.set(s, n);
            }
          }
          return owner;
        },
      };
    }

    it("three replicas share the shards, never two on one; a dead one's are taken over within three cycles", async () => {
      const c = cluster(["a", "b", "c"]);
      let now = 1_000_000;
      // Replicas tick in a shifting order each cycle, as their timers drift.
      const orders = [
        ["a", "b", "c"],
        ["c", "a", "b"],
        ["b", "c", "a"],
      ];
      for (let cycle = 0; cycle < 6; cycle++) {
        for (const [i, n] of orders[cycle % 3].entries()) {
          await c.tick(n, now + i * 1000);
          c.assertDisjoint(now + i * 1000);
        }
        now += INTERVAL;
      }
      const owner = c.assertDisjoint(now);
      assert.equal(owner.size, COUNT, "every shard held");
      for (const r of c.replicas.values()) assert.ok(r.held.size <= Math.ceil(COUNT / 3), `${r.held.size}`);

      // c dies (SIGKILL: no release). a and b keep ticking; by the third cycle they hold every shard.
      const orphaned = [...c.replicas.get("c")!.held];
      assert.ok(orphaned.length > 0);
      let takenAfter = -1;
      for (let cycle = 1; cycle <= 3; cycle++) {
        await c.tick("a", now);
        await c.tick("b", now + 1000);
        const held = new Set([...c.replicas.get("a")!.held, ...c.replicas.get("b")!.held]);
        c.assertDisjoint(now + 1000);
        if (takenAfter < 0 && held.size === COUNT) takenAfter = cycle;
        now += INTERVAL;
      }
      assert.ok(takenAfter >= 1 && takenAfter <= 3, `taken over after ${takenAfter} cycles`);
      for (const r of ["a", "b"]) assert.equal(c.replicas.get(r)!.held.size, COUNT / 2);

      // c comes back (a process whose lease ran out): its fence fails, its writes are refused.
      const cl = c.replicas.get("c")!.leases;
      assert.equal(await cl.fence(h.db, orphaned[0], now), false);
      const a = c.replicas.get("a")!;
      const mine = [...a.held][0];
      assert.equal(await a.leases.fence(h.db, mine, now), true, "the holder's fence passes and renews");

      // c rejoins: the others hand shards over, and c takes them, still one replica per shard.
      for (let cycle = 0; cycle < 3; cycle++) {
        for (const n of ["a", "b", "c"]) {
          await c.tick(n, now);
          c.assertDisjoint(now);
        }
        now += INTERVAL;
      }
      assert.ok(c.replicas.get("c")!.held.size > 0, "c has shards again");
      assert.equal(c.assertDisjoint(now).size, COUNT);

      // A clean stop releases at once: the others take its shards at their next tick.
      await cl.release();
      await c.tick("a", now);
      await c.tick("b", now);
      assert.equal(c.replicas.get("a")!.held.size + c.replicas.get("b")!.held.size, COUNT);
      for (const r of c.replicas.values()) await r.leases.release();
    });
  });
}
