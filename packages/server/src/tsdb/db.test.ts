import assert from "node:assert/strict";
import { appendFileSync, existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { isStaleMarker, type Labels, type SeriesData, staleNaN } from "../storage/interface.ts";
import type { openTsdb, Tsdb } from "./index.ts";
import { L, openForTest, T0, trackCleanups } from "./testutil.ts";

const HOUR = 3_600_000;
const track = trackCleanups();
const open = (overrides: Parameters<typeof openTsdb>[1] = {}, dir?: string) =>
  openForTest(track, overrides, dir);

async function write(db: Tsdb, samples: [Labels, number, number][]) {
  const app = db.appender();
  for (const [l, t, v] of samples) app.append(l, t, v);
  return app.commit();
}

function all(db: Tsdb, name = "m", mint = -Infinity, maxt = Infinity): SeriesData[] {
  return db.querier().select([{ type: "=", name: "__name__", value: name }], mint, maxt);
}

function points(s: SeriesData): [number, number][] {
  return Array.from(s.timestamps, (t, i) => [t, s.values[i]]);
}

const a = L({ __name__: "m", vm: "a" });
const b = L({ __name__: "m", vm: "b" });

describe("tsdb appender and querier", () => {
  it("returns committed samples sorted by labels, within inclusive bounds", async () => {
    const { db } = await open();
    const r = await write(db, [
      [b, T0 - 2000, 1],
      [a, T0 - 2000, 10],
      [a, T0 - 1000, 11],
      [a, T0, 12],
    ]);
    assert.deepEqual(r, { accepted: 4, refused: {} });
    const got = all(db, "m", T0 - 1000, T0);
    assert.deepEqual(
      got.map((s) => s.labels),
      [a],
    );
    assert.deepEqual(points(got[0]), [
      [T0 - 1000, 11],
      [T0, 12],
    ]);
    assert.equal(all(db).length, 2);
  });

  it("refuses invalid labels, out-of-bounds and too-old samples, keeping the valid ones", async () => {
    const { db } = await open();
    await write(db, [[a, T0, 1]]);
    const app = db.appender();
    assert.equal(app.append(L({ vm: "x" }), T0, 1), false, "no __name__");
    assert.equal(
      app.append(
        [
          { name: "__name__", value: "m" },
          { name: "1bad", value: "x" },
        ],
        T0,
        1,
      ),
      false,
    );
    assert.equal(app.append(L({ __name__: "bad-name" }), T0, 1), false);
    assert.equal(app.append(a, T0 - 8 * 24 * HOUR, 1), false, "older than retention");
    assert.equal(app.append(a, T0 + HOUR, 1), false, "too far ahead");
    assert.equal(app.append(a, T0 - HOUR - 1, 1), false, "older than the OOO window");
    assert.equal(app.append(b, T0, 2), true);
    const r = await app.commit();
    assert.deepEqual(r, { accepted: 1, refused: { invalid_labels: 3, out_of_bounds: 2, out_of_order: 1 } });
  });

  it("accepts out-of-order samples within the window with their original timestamps", async () => {
    const { db } = await open();
    await write(db, [
      [a, T0, 3],
      [a, T0 - 30 * 60_000, 1],
      [a, T0 - 15 * 60_000, 2],
      [a, T0 - HOUR, 0],
    ]);
    assert.deepEqual(points(all(db)[0]), [
      [T0 - HOUR, 0],
      [T0 - 30 * 60_000, 1],
      [T0 - 15 * 60_000, 2],
      [T0, 3],
    ]);
  });

  it("treats an identical duplicate as a no-op and a different value as a refusal", async () => {
    const { db } = await open();
    await write(db, [
      [a, T0 - 1000, 1],
      [a, T0, 2],
    ]);
    const r = await write(db, [
      [a, T0, 2],
      [a, T0, 3],
      [a, T0 - 1000, 1],
      [a, T0 - 1000, 5],
    ]);
    assert.deepEqual(r, { accepted: 2, refused: { duplicate_sample_for_timestamp: 2 } });
    assert.deepEqual(points(all(db)[0]), [
      [T0 - 1000, 1],
      [T0, 2],
    ]);
  });

  it("keeps the staleness marker bit-exact", async () => {
    const { db } = await open();
    await write(db, [
      [a, T0 - 1000, Number.NaN],
      [a, T0, staleNaN()],
    ]);
    const s = all(db)[0];
    assert.ok(!isStaleMarker(s.values, 0));
    assert.ok(isStaleMarker(s.values, 1));
  });

  it("shares one fsync among commits of the same tick", async () => {
    const { db } = await open();
    const before = db.stats().walFlushes;
    await Promise.all(Array.from({ length: 20 }, (_, i) => write(db, [[a, T0 - 20_000 + i * 1000, i]])));
    assert.ok(db.stats().walFlushes - before < 20);
    assert.equal(all(db)[0].timestamps.length, 20);
  });

  it("labelNames and labelValues", async () => {
    const { db } = await open();
    await write(db, [
      [a, T0, 1],
      [L({ __name__: "n", vm: "c", dev: "sda" }), T0, 1],
    ]);
    const q = db.querier();
    assert.deepEqual(q.labelNames([], T0, T0), ["__name__", "dev", "vm"]);
    assert.deepEqual(q.labelValues("vm", [], T0, T0), ["a", "c"]);
    assert.deepEqual(q.labelValues("vm", [{ type: "=", name: "__name__", value: "m" }], T0, T0), ["a"]);
    assert.deepEqual(q.labelValues("vm", [], T0 + 1, T0 + 2), []);
  });
});

describe("tsdb persistence", () => {
  it("replays the WAL after a clean close", async () => {
    const { db, dir } = await open();
    const samples: [Labels, number, number][] = [];
    for (let i = 0; i < 500; i++) samples.push([i % 2 ? a : b, T0 - HOUR + i * 1000, i * 1.5]);
    await write(db, samples);
    await write(db, [[a, T0 - HOUR - 1, staleNaN()]]); // out of order, within the window
    const before = all(db);
    await db.close();
    const { db: db2 } = await open({}, dir);
    const after = all(db2);
    assert.deepEqual(after, before);
    assert.ok(isStaleMarker(after[0].values, 0));
  });

  it("truncates a torn last WAL record on open and keeps what came before", async () => {
    const { db, dir } = await open();
    await write(db, [[a, T0 - 1000, 1]]);
    await write(db, [[a, T0, 2]]);
    await db.close();
    const wal = join(dir, "wal");
    const last = readdirSync(wal)
      .filter((f) => /^\d{8}$/.test(f))
      .sort()
      .at(-1)!;
    const size = statSync(join(wal, last)).size;
    appendFileSync(join(wal, last), Buffer.from([40, 0, 0, 0, 1, 2, 3, 4, 2, 9])); // header + partial body
    const { db: db2 } = await open({}, dir);
    assert.deepEqual(points(all(db2)[0]), [
      [T0 - 1000, 1],
      [T0, 2],
    ]);
    assert.equal(statSync(join(wal, last)).size, size);
    const r = await write(db2, [[a, T0 + 1000, 3]]);
    assert.equal(r.accepted, 1);
  });

  it("answers labels-only selects from chunk bounds exactly as a full select would", async () => {
    const { db } = await open();
    const samples: [Labels, number, number][] = [];
    const start = T0 - 4 * HOUR;
    // A sparse series: one sample every 10 min, so ranges fall into gaps inside a chunk.
    for (let t = start; t <= T0; t += 600_000) samples.push([a, t, 1]);
    for (let t = start; t <= T0; t += 30_000) samples.push([b, t, 2]);
    await write(db, samples);
    await write(db, [[a, T0 - HOUR + 15_000, 7]]); // out of order, inside a gap of a
    await db.compact();
    assert.ok(db.stats().blocks >= 1);
    const q = db.querier();
    const m = [{ type: "=", name: "__name__", value: "m" } as const];
    const ranges: [number, number][] = [
      [start, T0],
      [start + 1, start + 599_999], // a gap of a, in a block
      [T0 - 20 * 60_000 + 1, T0 - 10 * 60_000 - 1], // a gap of a, in the head
      [T0 - HOUR + 15_000, T0 - HOUR + 15_000], // only the out-of-order sample of a
      [T0 + 1, T0 + HOUR],
      [start - HOUR, start],
    ];
    for (const [mint, maxt] of ranges) {
      const full = q.select(m, mint, maxt).map((s) => s.labels);
      const only = q.select(m, mint, maxt, { labelsOnly: true });
      assert.deepEqual(
        only.map((s) => s.labels),
        full,
        `range [${mint - T0}, ${maxt - T0}]`,
      );
      assert.ok(only.every((s) => s.timestamps.length === 0));
    }
  });

  it("cuts blocks, reopens them and answers the same query", async () => {
    const { db, dir, clock } = await open();
    const samples: [Labels, number, number][] = [];
    const start = T0 - 4 * HOUR;
    for (let t = start; t <= T0; t += 30_000) samples.push([a, t, t / 1000], [b, t, -t / 1000]);
    await write(db, samples);
    await write(db, [[a, T0 - HOUR + 15_000, 7]]); // out of order
    const before = all(db);
    await db.compact();
    assert.ok(db.stats().blocks >= 1, "a block was cut");
    assert.ok(db.stats().headSamples < samples.length);
    assert.deepEqual(all(db), before);
    const window = all(db, "m", T0 - 3 * HOUR, T0 - 2 * HOUR);
    assert.equal(window[0].timestamps.length, 121);
    await db.close();
    const { db: db2 } = await open({ now: clock.now }, dir);
    assert.deepEqual(all(db2), before);
    assert.deepEqual(all(db2, "m", T0 - 3 * HOUR, T0 - 2 * HOUR), window);
  });

  it("keeps late samples that arrive after their range was cut into a block", async () => {
    const { db, dir } = await open();
    const samples: [Labels, number, number][] = [];
    for (let t = T0 - 4 * HOUR; t <= T0; t += 60_000) samples.push([a, t, 1]);
    await write(db, samples);
    await db.compact();
    // b has no samples yet: a late sample within the window of the head's newest time is kept.
    const late = T0 - 50 * 60_000;
    const r = await write(db, [[b, late, 42]]);
    assert.deepEqual(r, { accepted: 1, refused: {} });
    await db.close();
    const { db: db2 } = await open({}, dir);
    assert.deepEqual(points(all(db2)[1]), [[late, 42]]);
  });

  it("finds a series again after the head dropped it, for a label-set object the writer kept", async () => {
    const { db } = await open();
    const c = L({ __name__: "m", c: "1" });
    const samples: [Labels, number, number][] = [
      [c, T0 - 4 * HOUR, 5],
      [c, T0 - 4 * HOUR + 1, 5],
    ];
    for (let t = T0 - 4 * HOUR; t <= T0; t += 60_000) samples.push([a, t, 1]);
    await write(db, samples);
    await db.compact(); // c's only sample went to a block: the head garbage-collects the series
    const series = db.stats().headSeries;
    assert.deepEqual(await write(db, [[c, T0, 6]]), { accepted: 1, refused: {} });
    assert.equal(db.stats().headSeries, series + 1, "a new head series, not the dropped ref");
    assert.deepEqual(await write(db, [[c, T0 + 60_000, 7]]), { accepted: 1, refused: {} });
    const got = all(db).find((s) => s.labels.some((l) => l.name === "c"))!;
    assert.deepEqual(points(got), [
      [T0 - 4 * HOUR, 5],
      [T0 - 4 * HOUR + 1, 5],
      [T0, 6],
      [T0 + 60_000, 7],
    ]);
  });

  it("appendRef returns a series handle, -1 on refusal, and looks a stale handle up again", async () => {
    const { db } = await open();
    const c = L({ __name__: "m", c: "2" });
    let app = db.appender();
    const ref = app.appendRef!(-1, c, T0 - 4 * HOUR, 1);
    assert.ok(ref >= 0);
    assert.equal(app.appendRef!(ref, c, T0 - 4 * HOUR + 1, 2), ref);
    assert.equal(app.appendRef!(ref, c, T0 + 3 * HOUR, 3), -1, "too far in the future");
    for (let t = T0 - 4 * HOUR; t <= T0; t += 60_000) app.append(a, t, 1);
    assert.deepEqual(await app.commit(), { accepted: 243, refused: { out_of_bounds: 1 } });
    await db.compact(); // c's samples went to a block and the head dropped the series: ref is stale
    app = db.appender();
    const again = app.appendRef!(ref, c, T0, 4);
    assert.ok(again >= 0 && again !== ref);
    assert.deepEqual(await app.commit(), { accepted: 1, refused: {} });
    const got = all(db).find((s) => s.labels.some((l) => l.name === "c"))!;
    assert.deepEqual(points(got), [
      [T0 - 4 * HOUR, 1],
      [T0 - 4 * HOUR + 1, 2],
      [T0, 4],
    ]);
  });

  it("retention drops whole blocks older than now − retention", async () => {
    const { db, dir, clock } = await open({ retentionMs: 24 * HOUR });
    for (let day = 0; day < 3; day++) {
      clock.set(T0 + day * 24 * HOUR);
      const samples: [Labels, number, number][] = [];
      for (let t = clock.now() - 12 * HOUR; t <= clock.now(); t += 60_000) samples.push([a, t, day]);
      await write(db, samples);
      await db.compact();
    }
    const blocksBefore = readdirSync(join(dir, "blocks")).length;
    assert.ok(blocksBefore >= 3);
    // limit = T0 + 43 h, inside the block [42 h, 44 h): that block stays whole.
    clock.set(T0 + 3 * 24 * HOUR - 5 * HOUR);
    const dropped = db.applyRetention();
    assert.ok(dropped > 0);
    const remaining = readdirSync(join(dir, "blocks"));
    assert.equal(remaining.length, blocksBefore - dropped);
    const s = all(db)[0];
    assert.equal(s.timestamps[0], T0 + 42 * HOUR, "whole blocks are dropped, not samples");
    assert.ok(existsSync(join(dir, "blocks", remaining[0], "meta.json")));
  });
});

describe("chunk bytes per project", () => {
  it("attributes the head's and the blocks' chunk bytes by the tenant label", async () => {
    const { db } = await open();
    const series = [
      L({ __name__: "m", project_id: "one", vm: "a" }),
      ...["a", "b", "c"].map((vm) => L({ __name__: "m", project_id: "three", vm })),
    ];
    const samples: [Labels, number, number][] = [];
    // The same values in every series: the same encoded bytes.
    for (let t = T0 - 4 * HOUR; t <= T0; t += 30_000)
      for (const l of series) samples.push([l, t, (t / 1000) % 97]);
    await write(db, samples);
    const head = db.chunkBytesByLabel("project_id");
    assert.ok((head.get("one") ?? 0) > 0);
    assert.equal(head.get("three"), 3 * (head.get("one") ?? 0));
    assert.equal((head.get("one") ?? 0) + (head.get("three") ?? 0), db.stats().headChunkBytes);
    assert.equal(db.chunkBytesByLabel("nothing").size, 0);

    await db.compact();
    assert.ok(db.stats().blocks >= 1, "a block was cut");
    const both = db.chunkBytesByLabel("project_id");
    // Blocks are counted too (with each chunk's CRC), not only what is left in the head.
    assert.ok((both.get("one") ?? 0) > db.stats().headChunkBytes / 4, JSON.stringify([...both]));
    assert.equal(both.get("three"), 3 * (both.get("one") ?? 0));
  });
});
