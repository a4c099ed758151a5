import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { type Labels, labelValue, type RollupSeriesData } from "../storage/interface.ts";
import { RollupColumn, type Rollups, rollupsOf } from "../storage/rollups.ts";
import { Block } from "./block.ts";
import { planMerge } from "./compactor.ts";
import { openTsdb, type Tsdb } from "./index.ts";
import { L, openForTest, T0, trackCleanups } from "./testutil.ts";

const HOUR = 3_600_000;
const R = 1_800_000;
const track = trackCleanups();
const open = (overrides: Parameters<typeof openTsdb>[1] = {}, dir?: string) =>
  openForTest(track, overrides, dir);

const a = L({ __name__: "m", vm: "a" });
const b = L({ __name__: "m", vm: "b" });

/** `hours` of 30 s samples (integer values, a counter reset every 7 h) for a and b, ending at T0. */
async function fill(db: Tsdb, clock: { set: (t: number) => void }, hours: number, from = T0 - hours * HOUR) {
  for (let t = from; t < from + hours * HOUR; t += 30_000) {
    clock.set(t);
    const app = db.appender();
    const k = (t - from) / 30_000;
    app.append(a, t + (k % 7), 1000 + (k % 840) * 64);
    if (k % 3 !== 0) app.append(b, t, 2e9 + 1e6 * (k % 17));
    await app.commit();
    if (k % 240 === 0) await db.compact();
  }
  await db.compact();
}

function rollupsByLabels(db: Tsdb, afterMs: number, untilMs: number): RollupSeriesData[] {
  const q = db.querier();
  assert.ok(q.selectRollups);
  return q.selectRollups([{ type: "=", name: "__name__", value: "m" }], afterMs, untilMs, R);
}

/** The rollups the raw samples give (what stored rollups must equal). */
function fromRaw(db: Tsdb, labels: Labels, afterMs: number, untilMs: number): Rollups {
  const s = db.querier().select(
    labels.map((l) => ({ type: "=" as const, name: l.name, value: l.value })),
    afterMs + 1,
    untilMs,
  );
  assert.equal(s.length, 1);
  return rollupsOf(s[0].timestamps, s[0].values, R);
}

function assertSameRollups(got: Rollups, want: Rollups, what: string) {
  assert.equal(got.n, want.n, `${what}: buckets`);
  for (const f of ["end", "count", "firstT", "firstV", "lastT", "lastV", "max", "sum", "resets"] as const)
    assert.deepEqual([...got[f].subarray(0, got.n)], [...want[f].subarray(0, want.n)], `${what}: ${f}`);
}

describe("tsdb rollups and block merging", () => {
  it("serves rollups over merged blocks, 2-hour blocks and the head equal to the raw samples'", async () => {
    const { db, clock } = await open();
    await fill(db, clock, 40);
    const blocks = db.stats().blocks;
    // 40 h behind the head: a 24 h window and some 6 h windows merged, the newest left at 2 h.
    assert.ok(blocks < 12, `expected merged blocks, got ${blocks}`);
    for (const [after, until] of [
      [T0 - 40 * HOUR, T0],
      [T0 - 31 * HOUR, T0 - 5 * HOUR],
      [T0 - 3 * HOUR, T0 + HOUR],
    ]) {
      const got = rollupsByLabels(db, after, until);
      assert.deepEqual(
        got.map((s) => s.labels),
        [a, b],
      );
      for (const s of got) {
        assert.ok(s.rollups, "served from rollups, not raw");
        assert.equal(s.timestamps.length, 0);
        assertSameRollups(s.rollups, fromRaw(db, s.labels, after, until), `${after}..${until}`);
      }
    }
  });

  it("holds the newest blocks' rollups in memory within rollupMemoryBytes, answering as reads from disk do", async () => {
    const first = await open();
    await fill(first.db, first.clock, 40);
    const ranges = [
      [T0 - 40 * HOUR, T0],
      [T0 - 31 * HOUR, T0 - 5 * HOUR],
    ];
    const want = ranges.map(([after, until]) => rollupsByLabels(first.db, after, until));
    const dir = first.dir;
    const blocksDir = join(dir, "blocks");
    // Rollups file sizes, newest block first.
    const files = readdirSync(blocksDir)
      .map((d) => ({
        path: join(blocksDir, d, "rollups"),
        minTime: JSON.parse(readFileSync(join(blocksDir, d, "meta.json"), "utf8")).minTime as number,
      }))
      .sort((x, y) => y.minTime - x.minTime)
      .map((f) => ({ ...f, size: statSync(f.path).size }));
    const total = files.reduce((n, f) => n + f.size, 0);
    assert.ok(files.length >= 3 && total > 0);
    assert.equal(first.db.stats().rollupHeldBytes, total, "the default budget holds them all");
    await first.db.close();

    const answers = (db: Tsdb) => ranges.map(([after, until]) => rollupsByLabels(db, after, until));
    const none = await open({ rollupMemoryBytes: 0 }, dir);
    assert.equal(none.db.stats().rollupHeldBytes, 0);
    assert.deepEqual(answers(none.db), want, "read from disk");
    await none.db.close();

    // Room for the newest two files, not the third: the newest are held, the rest read from disk.
    const budget = files[0].size + files[1].size + files[2].size - 1;
    const some = await open({ rollupMemoryBytes: budget }, dir);
    assert.equal(some.db.stats().rollupHeldBytes, files[0].size + files[1].size);
    assert.deepEqual(answers(some.db), want, "newest held, older read from disk");
    await some.db.close();

    // Held copies are what is read: with every file on disk emptied, the answers stay the same.
    const all = await open({}, dir);
    for (const f of files) writeFileSync(f.path, Buffer.alloc(0));
    assert.deepEqual(answers(all.db), want, "served from memory");
  });

  it("keeps every sample through merges: the same raw data before and after", async () => {
    const one = await open({ mergeBlocks: false });
    const two = await open();
    await fill(one.db, one.clock, 30);
    await fill(two.db, two.clock, 30);
    assert.ok(two.db.stats().blocks < one.db.stats().blocks);
    const sel = [{ type: "=" as const, name: "__name__", value: "m" }];
    const x = one.db.querier().select(sel, -Infinity, Infinity);
    const y = two.db.querier().select(sel, -Infinity, Infinity);
    assert.deepEqual(y, x);
    assert.equal(two.db.stats().blockSamples, one.db.stats().blockSamples);
  });

  it("decodes only the columns a reader names, leaving the others NaN, with the same values in those it reads", async () => {
    const { db, clock } = await open();
    await fill(db, clock, 30);
    const q = db.querier();
    assert.ok(q.selectRollups);
    const sel = [{ type: "=" as const, name: "__name__", value: "m" }];
    const after = T0 - 30 * HOUR;
    const full = q.selectRollups(sel, after, T0, R);
    // An average's columns for a, a rate's for b (the series tell which by their labels).
    const avg = RollupColumn.count | RollupColumn.sum;
    const rate = RollupColumn.count | RollupColumn.firstT | RollupColumn.firstV | RollupColumn.lastT;
    const part = q.selectRollups(sel, after, T0, R, (labels) =>
      labelValue(labels, "vm") === "a" ? avg : rate,
    );
    assert.equal(part.length, 2);
    const decoded = {
      a: ["count", "firstT", "lastT", "sum"],
      b: ["count", "firstT", "firstV", "lastT", "sum"],
    };
    for (const [k, s] of part.entries()) {
      const want = full[k].rollups;
      assert.ok(s.rollups && want, "served from rollups");
      const vm = labelValue(s.labels, "vm") as "a" | "b";
      assert.equal(s.rollups.n, want.n);
      for (const f of [
        "end",
        "count",
        "firstT",
        "firstV",
        "lastT",
        "lastV",
        "max",
        "sum",
        "resets",
      ] as const) {
        const got: number[] = Array.from(s.rollups[f].subarray(0, s.rollups.n));
        if (f === "end" || decoded[vm].includes(f)) {
          assert.deepEqual(got, [...want[f].subarray(0, want.n)], `${vm}: ${f}`);
          continue;
        }
        // Left out of the blocks' buckets; the newest few come from the head's samples and hold
        // something, which no reader of these columns looks at.
        const fromHead = got.findIndex((x) => !Number.isNaN(x));
        assert.ok(fromHead > got.length / 2, `${vm}: ${f} left out of the stored buckets (${fromHead})`);
      }
    }
  });

  it("falls back to raw samples where blocks hold no rollups or overlap", async () => {
    const { db, clock, dir } = await open({ rollupResolutionMs: 0, mergeBlocks: false });
    await fill(db, clock, 6);
    await db.close();
    // Reopened with rollups on: the old blocks have none, so every series is raw.
    const re = await openTsdb(dir, { now: () => T0, autoCompact: false, mergeBlocks: false });
    track(() => re.close());
    const got = rollupsByLabels(re, T0 - 6 * HOUR, T0);
    assert.equal(got.length, 2);
    for (const s of got) {
      assert.equal(s.rollups, undefined);
      assert.ok(s.timestamps.length > 0);
    }
  });

  it("falls back to raw samples for a series whose blocks overlap (late samples)", async () => {
    const { db, clock } = await open({ mergeBlocks: false, outOfOrderWindowMs: 2 * HOUR });
    await fill(db, clock, 6);
    const late = T0 - 5 * 60_000 + 15_000;
    const step = async (from: number, to: number, extra?: [Labels, number, number]) => {
      clock.set(to);
      const app = db.appender();
      for (let t = from; t <= to; t += 30_000) {
        app.append(a, t, t / 1000);
        app.append(b, t, 1);
      }
      if (extra) app.append(...extra);
      const r = await app.commit();
      await db.compact();
      return r;
    };
    // The head is cut at T0; then a sample for a persisted range arrives (within the window) and
    // is cut into the next block, which overlaps the earlier one for series a only.
    await step(T0, T0 + 110 * 60_000);
    const r = await step(T0 + 110 * 60_000 + 30_000, T0 + 111 * 60_000, [a, late, 5]);
    assert.equal(r.accepted, 5, JSON.stringify(r));
    await step(T0 + 111 * 60_000 + 30_000, T0 + 190 * 60_000);
    const got = rollupsByLabels(db, T0 - 6 * HOUR, T0 + 3 * HOUR);
    const byVm = new Map(got.map((s) => [s.labels.find((l) => l.name === "vm")?.value, s]));
    const sa = byVm.get("a");
    assert.ok(sa && sa.rollups === undefined, "overlapping series read raw");
    assert.ok(sa.timestamps.includes(late));
    assert.ok(byVm.get("b")?.rollups, "the other series still from rollups");
  });

  it("plans merges only for whole windows behind the head without foreign blocks", () => {
    const blk = (minTime: number, maxTime: number) => ({ meta: { minTime, maxTime } });
    const h = (n: number) => n * HOUR;
    const twoHour = [0, 1, 2].map((i) => blk(h(2 * i), h(2 * i + 2) - 1));
    assert.deepEqual(planMerge(twoHour, [h(6), h(24)], h(6)), twoHour);
    assert.equal(planMerge(twoHour, [h(6), h(24)], h(6) - 1), undefined, "window not behind the head");
    const straddling = blk(h(5), h(7));
    assert.equal(planMerge([...twoHour, straddling], [h(6)], h(12)), undefined, "a block reaches in");
    assert.equal(planMerge([twoHour[0]], [h(6)], h(12)), undefined, "nothing to merge");
  });

  it("deletes a merge's sources left behind by a crash before their deletion", async () => {
    const { db, clock, dir } = await open();
    await fill(db, clock, 30);
    const blocksDir = join(dir, "blocks");
    const merged = readdirSync(blocksDir)
      .map((n) => new Block(join(blocksDir, n)))
      .find((blk) => (blk.meta.sources?.length ?? 0) > 0);
    assert.ok(merged?.meta.sources);
    merged.close();
    const before = db.querier().select([{ type: "=", name: "__name__", value: "m" }], -Infinity, Infinity);
    await db.close();
    // Simulate the crash: a fake source directory named by the merged block (an empty copy is
    // enough: it must be removed before it is ever read).
    const { cpSync } = await import("node:fs");
    const src = merged.meta.sources[0];
    cpSync(join(blocksDir, merged.meta.name), join(blocksDir, src), { recursive: true });
    const re = await openTsdb(dir, { now: () => T0, autoCompact: false });
    track(() => re.close());
    assert.ok(!existsSync(join(blocksDir, src)));
    const after = re.querier().select([{ type: "=", name: "__name__", value: "m" }], -Infinity, Infinity);
    assert.deepEqual(after, before);
  });
});
