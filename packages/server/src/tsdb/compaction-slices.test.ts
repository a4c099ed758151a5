import assert from "node:assert/strict";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import type { Labels, SeriesData } from "../storage/interface.ts";
import type { Tsdb } from "./index.ts";
import { L, openForTest, T0, trackCleanups } from "./testutil.ts";

const MIN = 60_000;
const track = trackCleanups();

// 1-minute blocks, and a yield after every series, so the interleaving does not depend on speed.
const options = { blockRangeMs: MIN, outOfOrderWindowMs: MIN, compactionSliceMs: 0, mergeBlocks: false };
const SERIES = 200;
const series: Labels[] = Array.from({ length: SERIES }, (_, i) => L({ __name__: "m", i: String(i) }));

async function fill(db: Tsdb, from: number, to: number): Promise<number> {
  const app = db.appender();
  let n = 0;
  for (let t = from; t <= to; t += 10_000)
    for (const l of series) {
      app.append(l, t, t / 1000);
      n++;
    }
  await app.commit();
  return n;
}

function count(db: Tsdb, mint = Number.NEGATIVE_INFINITY, maxt = Number.POSITIVE_INFINITY): number {
  const sel = db.querier().select([{ type: "=", name: "__name__", value: "m" }], mint, maxt);
  return sel.reduce((n, s: SeriesData) => n + s.timestamps.length, 0);
}

describe("compaction shares the event loop", () => {
  it("gives the loop back while a block is cut: a query and an in-order write finish before the cut does", async () => {
    const { db } = await openForTest(track, options);
    const written = await fill(db, T0 - 3 * MIN, T0);
    const events: string[] = [];
    const compaction = db.compact().then(() => events.push("compaction done"));
    // Queued behind the cut's first slice, not behind the whole cut.
    await new Promise((r) => setImmediate(r));
    events.push(`query saw ${count(db)}`);
    const app = db.appender();
    for (const l of series) app.append(l, T0 + 10_000, 1);
    await app.commit();
    events.push("write acknowledged");
    await compaction;
    assert.deepEqual(events, [`query saw ${written}`, "write acknowledged", "compaction done"]);
    assert.ok(db.stats().blocks >= 1, "a block was cut");
    assert.equal(count(db), written + SERIES, "every sample readable after the cut");
  });

  it("holds a late sample committed during a cut until the cut is done, and never acknowledges a lost one", async () => {
    const { db, dir, clock } = await openForTest(track, options);
    await fill(db, T0 - 2 * MIN, T0); // one cut, at T0 − 1 min
    // A series that went quiet: its next sample is in order for it, but below the cut line. It
    // sorts first, so the cut has already read it when the sample arrives.
    const quiet = L({ __name__: "m", i: "!quiet" });
    const old = db.appender();
    for (let t = T0 - 2 * MIN; t <= T0 - 100_000; t += 10_000) old.append(quiet, t, 1);
    await old.commit();
    const late = T0 - 65_000;
    const compaction = db.compact();
    let compactionDone = false;
    void compaction.then(() => {
      compactionDone = true;
    });
    await new Promise((r) => setImmediate(r));
    const app = db.appender();
    const accepted = app.append(quiet, late, 42);
    const result = await app.commit();
    await compaction;
    assert.ok(accepted);
    // Applied once the cut had truncated the head: after the blocks were written, not lost by them.
    assert.equal(result.accepted + Object.values(result.refused).reduce((a, b) => a + b, 0), 1);
    const readLate = (d: Tsdb) =>
      d.querier().select([{ type: "=", name: "i", value: "!quiet" }], late, late)[0]?.values[0];
    if (result.accepted === 1) {
      assert.equal(readLate(db), 42, "an acknowledged late sample is readable");
      await db.close();
      const { db: again } = await openForTest(track, { ...options, now: clock.now }, dir);
      assert.equal(readLate(again), 42, "and survives a restart");
    }
    assert.ok(compactionDone);
  });

  it("leaves no half block behind when the store closes during a cut", async () => {
    const { db, dir, clock } = await openForTest(track, options);
    const written = await fill(db, T0 - 3 * MIN, T0);
    const compaction = db.compact();
    await new Promise((r) => setImmediate(r));
    await db.close();
    await compaction;
    const blocks = join(dir, "blocks");
    const leftovers = existsSync(blocks) ? readdirSync(blocks).filter((e) => e.endsWith(".tmp")) : [];
    assert.deepEqual(leftovers, []);
    const { db: again } = await openForTest(track, { ...options, now: clock.now }, dir);
    assert.equal(count(again), written);
  });
});
