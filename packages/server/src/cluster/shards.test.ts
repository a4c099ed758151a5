import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../testing/dialects.ts";
import { type DbHandle, openDb } from "../db/database.ts";
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

    /** The lease length and renewal period createShardLeases derives from INTERVAL. */
    const TTL = (2 * INTERVAL) / 3;
    const RENEW = INTERVAL / 6;

    /** Replicas and what each acquire last said it holds, with when (a holding lasts until then + TTL). */
    function cluster(names: string[]) {
      const replicas = new Map<string, { leases: ShardLeases; held: ReadonlySet<number>; at: number }>();
      const add = (n: string) =>
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
      for (const n of names) add(n);
      return {
        replicas,
        add,
        async tick(name: string, nowMs: number, shed = false) {
          const r = replicas.get(name)!;
          r.held = await r.leases.acquire(nowMs, { shed });
          r.at = nowMs;
          return r.held;
        },
        /** Every shard is claimed by at most one replica whose claim is still inside its lease. */
        assertDisjoint(nowMs: number) {
          const owner = new Map<number, string>();
          for (const [n, r] of replicas) {
            if (nowMs >= r.at + TTL) continue;
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
        held(...names: string[]) {
          return new Set(names.flatMap((n) => [...replicas.get(n)!.held]));
        },
      };
    }

    it("derives its timing from the cycle: leases of two thirds of it, renewed every sixth", () => {
      const l = createShardLeases({ db: h.db, holder: "x", intervalMs: INTERVAL, count: COUNT });
      assert.equal(l.renewIntervalMs, RENEW);
      assert.deepEqual(l.status, { held: 0, unowned: undefined }, "nothing known before the first renewal");
    });

    it("three replicas share the shards, never two on one; a dead one's are taken over within one cycle", async () => {
      const c = cluster(["a", "b", "c"]);
      let now = 1_000_000;
      // Replicas renew every RENEW in a shifting order (their timers drift) and shed after each cycle.
      const orders = [
        ["a", "b", "c"],
        ["c", "a", "b"],
        ["b", "c", "a"],
      ];
      for (let round = 0; round < 18; round++) {
        for (const [i, n] of orders[round % 3].entries()) {
          await c.tick(n, now + i * 1000, round % 6 === 5);
          c.assertDisjoint(now + i * 1000);
        }
        now += RENEW;
      }
      const owner = c.assertDisjoint(now);
      assert.equal(owner.size, COUNT, "every shard held");
      for (const r of c.replicas.values()) assert.ok(r.held.size <= Math.ceil(COUNT / 3), `${r.held.size}`);
      for (const r of c.replicas.values())
        assert.deepEqual(r.leases.status, { held: r.held.size, unowned: 0 }, "no shard without an owner");

      // c dies (SIGKILL: no release) right after renewing. a and b renew every RENEW: they hold
      // every shard once c's leases run out (TTL), at their first renewal after it, within a cycle.
      await c.tick("c", now);
      const died = now;
      const orphaned = [...c.replicas.get("c")!.held];
      assert.ok(orphaned.length > 0);
      let takenAt = -1;
      for (let round = 1; round <= 12 && takenAt < 0; round++) {
        now += RENEW;
        await c.tick("a", now);
        await c.tick("b", now + 100);
        c.assertDisjoint(now + 100);
        if (c.held("a", "b").size === COUNT) takenAt = now + 100;
        else
          assert.ok(
            (c.replicas.get("a")!.leases.status.unowned ?? 0) === 0 || now >= died + TTL,
            "a shard counts as unowned only once its lease ran out",
          );
      }
      assert.ok(takenAt > 0, "c's shards were taken over");
      assert.ok(takenAt - died <= TTL + RENEW + 100, `taken over ${takenAt - died} ms after the kill`);
      assert.ok(takenAt - died < INTERVAL, "within one cycle of the kill");
      for (const r of ["a", "b"]) assert.equal(c.replicas.get(r)!.held.size, COUNT / 2);

      // c comes back (a process whose lease ran out): its fence fails, its writes are refused.
      const cl = c.replicas.get("c")!.leases;
      assert.equal(await cl.fence(h.db, orphaned[0], now), false);
      const a = c.replicas.get("a")!;
      const mine = [...a.held][0];
      assert.equal(await a.leases.fence(h.db, mine, now), true, "the holder's fence passes and renews");

      // c rejoins at once: a and b keep what they hold while they only renew ...
      now += RENEW;
      assert.equal((await c.tick("c", now)).size, 0, "nothing free yet");
      await c.tick("a", now);
      await c.tick("b", now);
      assert.equal(c.held("a", "b").size, COUNT, "a renewal alone gives nothing back");
      assert.equal(c.replicas.get("a")!.leases.status.held, COUNT / 2);
      // ... and give back what is beyond their share after their next cycle; c takes it at its next renewal.
      await c.tick("a", now + 1000, true);
      await c.tick("b", now + 2000, true);
      c.assertDisjoint(now + 2000);
      assert.ok(c.replicas.get("a")!.held.size <= Math.ceil(COUNT / 3));
      await c.tick("c", now + RENEW);
      assert.ok(c.replicas.get("c")!.held.size > 0, "c has shards again");
      assert.equal(c.assertDisjoint(now + RENEW).size, COUNT);
      now += 2 * RENEW;

      // A clean stop releases at once: the others take its shards at their next renewal.
      await cl.release();
      await c.tick("a", now);
      await c.tick("b", now);
      assert.equal(c.held("a", "b").size, COUNT);
      for (const r of c.replicas.values()) await r.leases.release();
    });

    it("a starting replica is a member at its first renewal; a rolling restart leaves no shard unowned", async () => {
      const c = cluster(["a", "b"]);
      let now = 5_000_000;
      await c.tick("a", now);
      await c.tick("b", now);
      // b had nothing free at its first renewal; after a's cycle a sheds and b takes its half.
      await c.tick("a", now + 1000, true);
      await c.tick("b", now + RENEW);
      assert.equal(c.replicas.get("b")!.held.size, COUNT / 2);
      now += 2 * RENEW;
      // Roll a, then b: each stop releases, the survivor takes every shard at its next renewal
      // (before any lease could have run out), the restarted one takes its share after the cycle.
      for (const [stop, survivor] of [
        ["a", "b"],
        ["b", "a2"],
      ]) {
        await c.replicas.get(stop)!.leases.release();
        await c.tick(survivor, now);
        assert.equal(c.replicas.get(survivor)!.held.size, COUNT, `${survivor} holds every shard`);
        assert.equal(c.replicas.get(survivor)!.leases.status.unowned, 0);
        const next = `${stop}2`;
        c.add(next);
        c.replicas.delete(stop);
        await c.tick(next, now + 100);
        await c.tick(survivor, now + 200, true);
        await c.tick(next, now + RENEW);
        assert.equal(c.replicas.get(next)!.held.size, COUNT / 2, `${next} took its share`);
        assert.equal(c.assertDisjoint(now + RENEW).size, COUNT);
        now += 2 * RENEW;
      }
      for (const r of c.replicas.values()) await r.leases.release();
    });
  });
}
