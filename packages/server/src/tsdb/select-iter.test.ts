import assert from "node:assert/strict";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import type { SeriesData } from "../storage/interface.ts";
import { L, openForTest, T0, trackCleanups } from "./testutil.ts";

const MIN = 60_000;
const track = trackCleanups();

const options = { blockRangeMs: MIN, outOfOrderWindowMs: 0 };
const m = [{ type: "=", name: "__name__", value: "m" } as const];
const flat = (xs: SeriesData[]) =>
  xs.map(
    (s) => `${s.labels.map((l) => `${l.name}=${l.value}`).join(",")} ${[...s.timestamps]} ${[...s.values]}`,
  );
const blockDirs = (dir: string) => readdirSync(join(dir, "blocks")).filter((e) => !e.endsWith(".tmp"));

describe("TsdbQuerier.selectIter", () => {
  it("yields what select returns, and keeps the blocks a merge replaced until the iteration ends", async () => {
    const { db, dir, clock } = await openForTest(track, { ...options, mergeBlocks: false });
    const app = db.appender();
    for (let t = T0 - 10 * MIN; t <= T0; t += 10_000)
      for (let i = 0; i < 20; i++) app.append(L({ __name__: "m", i: String(i).padStart(2, "0") }), t, t + i);
    await app.commit();
    await db.compact(); // one-minute blocks, none merged
    await db.close();

    const { db: store } = await openForTest(track, { ...options, now: clock.now }, dir);
    const q = store.querier();
    const expected = flat(q.select(m, -Infinity, Infinity));
    const sources = blockDirs(dir);
    assert.ok(sources.length >= 6);

    const iteration = q.selectIter?.(m, -Infinity, Infinity);
    assert.ok(iteration);
    const got: SeriesData[] = [];
    const first = iteration.next();
    assert.equal(first.done, false);
    got.push(first.value as SeriesData);
    await store.compact(); // merges: every source replaced
    assert.ok(store.stats().blocks < sources.length, "merged");
    assert.ok(
      sources.every((b) => existsSync(join(dir, "blocks", b))),
      "the replaced blocks stay while the iteration holds them",
    );
    assert.ok(blockDirs(dir).length > store.stats().blocks);
    for (const s of iteration) got.push(s);
    assert.deepEqual(flat(got), expected, "read to its end from the blocks it started with");
    assert.equal(blockDirs(dir).length, store.stats().blocks, "and deleted once it ended");
    assert.deepEqual(flat(store.querier().select(m, -Infinity, Infinity)), expected);
  });

  it("lets go of the blocks when the reader stops early", async () => {
    const { db, dir } = await openForTest(track, { ...options, mergeBlocks: false });
    const app = db.appender();
    for (let t = T0 - 10 * MIN; t <= T0; t += 10_000)
      for (let i = 0; i < 5; i++) app.append(L({ __name__: "m", i: String(i) }), t, 1);
    await app.commit();
    await db.compact();
    for (const s of db.querier().selectIter?.(m, -Infinity, Infinity) ?? []) {
      assert.ok(s.timestamps.length > 0);
      break; // return(): the iteration's finally releases its hold
    }
    const before = blockDirs(dir).length;
    db.applyRetention(T0 + 365 * 24 * 60 * MIN); // every block is past retention now
    assert.ok(before > 0);
    assert.deepEqual(blockDirs(dir), [], "deleted at once: nothing holds them");
  });
});
