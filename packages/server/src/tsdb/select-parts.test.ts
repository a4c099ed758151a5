import assert from "node:assert/strict";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import type { LabelMatcher, Querier, SelectParts, SeriesData } from "../storage/interface.ts";
import { Block } from "./block.ts";
import { BlockSet } from "./block-set.ts";
import { L, openForTest, T0, trackCleanups } from "./testutil.ts";

const MIN = 60_000;
const track = trackCleanups();

const flat = (xs: Iterable<SeriesData>) =>
  [...xs].map(
    (s) => `${s.labels.map((l) => `${l.name}=${l.value}`).join(",")} ${[...s.timestamps]} ${[...s.values]}`,
  );
const blockDirs = (dir: string) => readdirSync(join(dir, "blocks")).filter((e) => !e.endsWith(".tmp"));
const named = (name: string): LabelMatcher[] => [{ type: "=", name: "__name__", value: name }];

/** One-minute blocks over ten minutes, then a head with in-order samples and late ones over the blocks. */
async function storeWithBlocksAndHead() {
  const opened = await openForTest(track, { blockRangeMs: MIN, outOfOrderWindowMs: MIN, mergeBlocks: false });
  const { db } = opened;
  const app = db.appender();
  for (let t = T0 - 10 * MIN; t <= T0; t += 10_000)
    for (let i = 0; i < 12; i++) app.append(L({ __name__: i % 3 === 0 ? "g" : "m", i: String(i) }), t, t + i);
  await app.commit();
  await db.compact();
  const late = db.appender();
  for (let i = 0; i < 12; i += 2) {
    // A new sample between two stored ones, and one at a stored timestamp with another value: the
    // block's wins, as select merges sources.
    late.append(L({ __name__: i % 3 === 0 ? "g" : "m", i: String(i) }), T0 - 5_000, -1);
    late.append(L({ __name__: i % 3 === 0 ? "g" : "m", i: String(i) }), T0, -2);
  }
  // A series only the head has.
  late.append(L({ __name__: "m", i: "new" }), T0 + 1_000, 7);
  await late.commit();
  assert.ok(db.stats().blocks >= 5, "blocks were cut");
  return opened;
}

function partsOf(q: Querier, ...args: Parameters<NonNullable<Querier["selectParts"]>>): SelectParts {
  const parts = q.selectParts?.(...args);
  assert.ok(parts, "the TSDB splits selects");
  return parts;
}

describe("TsdbQuerier.selectParts and selectFromBlocks", () => {
  it("give, read by a borrower of the blocks, exactly what select gives", async () => {
    const { db } = await storeWithBlocksAndHead();
    const reader = new BlockSet();
    const cases: [LabelMatcher[], number, number][] = [
      [named("m"), -Infinity, Infinity],
      [named("g"), T0 - 3 * MIN, T0 - MIN],
      [[...named("m"), { type: "=~", name: "i", value: "1|2|new" }], T0 - 3 * MIN, T0 + 5_000],
      [[{ type: "=~", name: "__name__", value: ".+" }], T0 - 5 * MIN, T0],
    ];
    for (const [ms, mint, maxt] of cases) {
      const q = db.querier();
      const want = flat(q.select(ms, mint, maxt));
      assert.ok(want.length > 0);
      const parts = partsOf(q, ms, mint, maxt);
      try {
        assert.ok(parts.blocks.length > 0, "blocks in range are lent, not read");
        assert.deepEqual(flat(reader.select(parts, ms, mint, maxt)), want, JSON.stringify(ms));
      } finally {
        reader.endQuery();
        parts.release();
      }
    }
    assert.ok(
      flat(db.querier().select(named("m"), T0, T0)).every((s) => !s.endsWith(" -2")),
      "blocks win",
    );
  });

  it("hold each block until its own readers have released it, whatever other readers hold", async () => {
    const { db, dir } = await storeWithBlocksAndHead();
    const all = blockDirs(dir);
    const wide = partsOf(db.querier(), named("m"), -Infinity, Infinity);
    const narrow = partsOf(db.querier(), named("m"), T0 - 2 * MIN, T0 - 2 * MIN);
    assert.equal(narrow.blocks.length, 1);
    const narrowName = narrow.blocks[0].dir.split("/").pop() ?? "";
    assert.ok(db.applyRetention(T0 + 365 * 24 * 60 * MIN) >= all.length);
    assert.deepEqual(blockDirs(dir), all, "every block is held");
    wide.release();
    assert.deepEqual(blockDirs(dir), [narrowName], "the rest went as soon as the wide reader ended");
    wide.release(); // idempotent
    narrow.release();
    assert.deepEqual(blockDirs(dir), []);
  });

  it("are read by a worker's BlockSet without opening a file, forgetting blocks the store dropped", async () => {
    const { db } = await storeWithBlocksAndHead();
    const reader = new BlockSet();
    const parts = partsOf(db.querier(), named("m"), -Infinity, Infinity);
    assert.equal(flat(reader.select(parts, named("m"), -Infinity, Infinity)).length, 9);
    reader.endQuery();
    assert.equal(reader.size, parts.blocks.length);
    // A borrower reads only through a lent descriptor, never one of its own.
    const borrowed = new Block(parts.blocks[0].dir, { borrower: true });
    assert.throws(() => borrowed.samples(0, -Infinity, Infinity), /chunks read with no open file/);
    borrowed.lend(parts.blocks[0].fd);
    assert.ok(borrowed.samples(0, -Infinity, Infinity).t.length > 0);
    parts.release();
    db.applyRetention(T0 + 365 * 24 * 60 * MIN);
    const after = partsOf(db.querier(), named("m"), -Infinity, Infinity);
    assert.equal(after.blocks.length, 0);
    assert.ok(parts.blocks.every((b) => !existsSync(b.dir)));
    reader.select(after, named("m"), -Infinity, Infinity).next();
    reader.endQuery();
    assert.equal(reader.size, 0, "the store lists none of them now");
    after.release();
  });
});

describe("TsdbQuerier.select from the head alone", () => {
  it("gives each series its own samples (in-order and late ones merged), which a later select leaves as they were", async () => {
    const { db } = await openForTest(track, { outOfOrderWindowMs: 10 * MIN });
    const app = db.appender();
    for (let t = T0 - 10 * MIN; t <= T0; t += 10_000)
      for (let i = 0; i < 5; i++) app.append(L({ __name__: "m", i: String(i) }), t, t / 1000 + i);
    await app.commit();
    const late = db.appender();
    late.append(L({ __name__: "m", i: "3" }), T0 - 5_000, -1);
    await late.commit();
    const want = (i: number, mint: number, maxt: number) => {
      const t: number[] = [];
      for (let ts = T0 - 10 * MIN; ts <= T0; ts += 10_000) if (ts >= mint && ts <= maxt) t.push(ts);
      if (i === 3 && T0 - 5_000 >= mint && T0 - 5_000 <= maxt)
        t.splice(t.indexOf(T0) >= 0 ? t.indexOf(T0) : t.length, 0, T0 - 5_000);
      return `i=${i} ${t} ${t.map((ts) => (ts === T0 - 5_000 ? -1 : ts / 1000 + i))}`;
    };
    const first = db.querier().select(named("m"), T0 - 2 * MIN, T0);
    const firstFlat = first.map(
      (s) => `${s.labels.find((l) => l.name === "i")?.value} ${[...s.timestamps]} ${[...s.values]}`,
    );
    assert.deepEqual(
      firstFlat.map((x) => `i=${x}`),
      [0, 1, 2, 3, 4].map((i) => want(i, T0 - 2 * MIN, T0)),
    );
    // Another select (the scratch it decodes into is the same) and writes into one series' arrays.
    const second = db.querier().select(named("m"), T0 - 10 * MIN, T0 - 3 * MIN);
    assert.deepEqual(
      second.map(
        (s) => `i=${s.labels.find((l) => l.name === "i")?.value} ${[...s.timestamps]} ${[...s.values]}`,
      ),
      [0, 1, 2, 3, 4].map((i) => want(i, T0 - 10 * MIN, T0 - 3 * MIN)),
    );
    second[0].values.fill(0);
    first[1].values.fill(0);
    assert.deepEqual(
      first.map(
        (s) => `${s.labels.find((l) => l.name === "i")?.value} ${[...s.timestamps]} ${[...s.values]}`,
      ),
      firstFlat.map((x, i) => (i === 1 ? x.replace(/ [^ ]+$/, ` ${new Array(13).fill(0)}`) : x)),
    );
  });
});

describe("TsdbQuerier.estimateSeries", () => {
  it("counts matching series from the postings of the head and the blocks in range, never less than one source holds", async () => {
    const { db } = await storeWithBlocksAndHead();
    const q = db.querier();
    const ms = [...named("m"), { type: "=~", name: "i", value: "1|2|new" } as LabelMatcher];
    // m{i="1"}, m{i="2"} in blocks and head, m{i="new"} in the head only.
    assert.equal(q.estimateSeries?.(ms, -Infinity, Infinity), 3);
    assert.equal(q.estimateSeries?.(named("g"), -Infinity, Infinity), 4);
    assert.equal(q.estimateSeries?.(named("absent"), -Infinity, Infinity), 0);
  });
});
