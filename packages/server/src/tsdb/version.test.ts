import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, it } from "node:test";
import { Rollups } from "../storage/rollups.ts";
import { Block } from "./block.ts";
import { openTsdb, TSDB_FORMAT, TsdbFormatError } from "./index.ts";
import { L, openForTest, T0, tempDir, trackCleanups } from "./testutil.ts";

const HOUR = 3_600_000;
const track = trackCleanups();
const m = L({ __name__: "m", vm: "a" });

/** Every file under dir with its bytes' hash: what "changes nothing" compares. */
function image(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) {
        out[`${relative(dir, p)}/`] = "dir";
        walk(p);
      } else out[relative(dir, p)] = createHash("sha256").update(readFileSync(p)).digest("hex");
    }
  };
  walk(dir);
  return out;
}

/** A closed store holding a block, a checkpoint, WAL segments and an unfinished block directory. */
async function storeOnDisk(): Promise<string> {
  const { db, dir } = await openForTest(track);
  const app = db.appender();
  for (let t = T0 - 5 * HOUR; t <= T0; t += 60_000) app.append(m, t, t / 1000);
  await app.commit();
  await db.compact();
  await db.close();
  mkdirSync(join(dir, "blocks", "01XYZ.tmp")); // what a crash leaves; an open would delete it
  return dir;
}

describe("tsdb format versions", () => {
  it("a store carries its formats in VERSION", async () => {
    const dir = await storeOnDisk();
    assert.deepEqual(JSON.parse(readFileSync(join(dir, "VERSION"), "utf8")), TSDB_FORMAT);
    const blocks = readdirSync(join(dir, "blocks")).filter((b) => !b.endsWith(".tmp"));
    assert.ok(blocks.length > 0);
    for (const b of blocks)
      assert.equal(
        JSON.parse(readFileSync(join(dir, "blocks", b, "meta.json"), "utf8")).version,
        TSDB_FORMAT.block,
      );
  });

  it("a newer WAL or block format is refused, naming the file, and nothing on disk changes", async () => {
    for (const spoil of ["wal", "block", "garbage"] as const) {
      const dir = await storeOnDisk();
      let file = join(dir, "VERSION");
      if (spoil === "wal") writeFileSync(file, JSON.stringify({ ...TSDB_FORMAT, wal: TSDB_FORMAT.wal + 1 }));
      else if (spoil === "garbage") writeFileSync(file, "{not json");
      else {
        const b = readdirSync(join(dir, "blocks")).find((x) => !x.endsWith(".tmp"))!;
        file = join(dir, "blocks", b, "meta.json");
        const meta = JSON.parse(readFileSync(file, "utf8"));
        writeFileSync(file, JSON.stringify({ ...meta, version: TSDB_FORMAT.block + 1 }));
      }
      const before = image(dir);
      await assert.rejects(openTsdb(dir), (e: unknown) => {
        assert.ok(e instanceof TsdbFormatError, String(e));
        assert.ok(e.message.startsWith(`${file}: `), e.message);
        if (spoil !== "garbage")
          assert.match(
            e.message,
            /format \d+ is newer than this build reads \(\d+\): .*\(nothing was changed\)$/,
          );
        return true;
      });
      assert.deepEqual(image(dir), before, spoil);
    }
  });

  it("a store from before VERSION opens as the current format and gets the file", async () => {
    const { dir } = tempDir();
    track(() => {}, true);
    const db = await openTsdb(dir, { autoCompact: false, now: () => T0 });
    await db.close();
    rmSync(join(dir, "VERSION"));
    const again = await openTsdb(dir, { autoCompact: false, now: () => T0 });
    await again.close();
    assert.ok(statSync(join(dir, "VERSION")).size > 0);
  });

  it("a snapshot links blocks, copies the WAL, and opens with every acknowledged sample", async () => {
    const { db, dir } = await openForTest(track);
    const a = db.appender();
    for (let t = T0 - 5 * HOUR; t <= T0; t += 60_000) a.append(m, t, t / 1000);
    await a.commit();
    await db.compact();
    const late = db.appender();
    late.append(m, T0 + 1000, 1);
    await late.commit();
    const snapDir = `${dir}-snap`;
    track(() => rmSync(snapDir, { recursive: true, force: true }), true);
    const s = await db.snapshot(snapDir);
    assert.ok(s.timeMs <= Date.now());
    // Written after the snapshot: in the live store only.
    const after = db.appender();
    after.append(m, T0 + 2000, 2);
    await after.commit();
    for (const f of s.files) {
      const same =
        statSync(join(snapDir, f.path)).ino === statSync(join(dir, f.path), { throwIfNoEntry: false })?.ino;
      assert.equal(same, f.linked, f.path);
      assert.equal(f.linked, f.path.startsWith("blocks/"), f.path);
    }
    const copy = await openTsdb(snapDir, { autoCompact: false, now: () => T0 });
    try {
      const [series] = copy
        .querier()
        .select([{ type: "=", name: "__name__", value: "m" }], T0, Number.POSITIVE_INFINITY);
      assert.deepEqual(Array.from(series.timestamps), [T0, T0 + 1000]);
      const all = copy.querier().select([{ type: "=", name: "__name__", value: "m" }], -Infinity, Infinity);
      assert.equal(all[0].timestamps.length, 5 * 60 + 2);
    } finally {
      await copy.close();
    }
  });

  it("a snapshot asked for during a compaction waits for it and copies the store it left", async () => {
    const { db, dir } = await openForTest(track);
    const a = db.appender();
    for (let t = T0 - 5 * HOUR; t <= T0; t += 60_000) a.append(m, t, t / 1000);
    await a.commit();
    const compacting = db.compact();
    const snapDir = `${dir}-snap`;
    track(() => rmSync(snapDir, { recursive: true, force: true }), true);
    const s = await db.snapshot(snapDir);
    await compacting;
    assert.ok(
      s.files.some((f) => f.linked && f.path.endsWith("/meta.json")),
      "the cut block is in it",
    );
    const copy = await openTsdb(snapDir, { autoCompact: false, now: () => T0 });
    try {
      const all = copy.querier().select([{ type: "=", name: "__name__", value: "m" }], -Infinity, Infinity);
      assert.equal(all[0].timestamps.length, 5 * 60 + 1);
    } finally {
      await copy.close();
    }
  });
});

describe("block format 1 (before per-chunk CRCs)", () => {
  it("reads a store written by the previous build: every sample and its rollups", async () => {
    const { dir, cleanup } = tempDir();
    track(cleanup, true);
    // testdata/block-format-1: 3 series × 240 one-minute samples (value i × 1000 + k + 0.5) written by
    // the build before block format 2: one SVCIDX02 block (the first 2 h) and a checkpoint.
    cpSync(join(import.meta.dirname, "testdata", "block-format-1"), dir, { recursive: true });
    const blockDir = join(dir, "blocks", readdirSync(join(dir, "blocks"))[0]);
    const block = new Block(blockDir);
    try {
      assert.equal(block.verify(), 0, "nothing to check, nothing reported");
      const r = new Rollups(30 * 60_000);
      assert.equal(block.rollups(0, -Infinity, Infinity, r), true, "its rollups are read");
      assert.equal(r.n, 5, "2 h of buckets (a, b], the first one ending at the first sample");
    } finally {
      block.close();
    }
    const { db } = await openForTest(track, {}, dir);
    const all = db.querier().select([{ type: "=", name: "__name__", value: "m" }], -Infinity, Infinity);
    assert.equal(all.length, 3);
    for (const [i, s] of all.entries()) {
      assert.equal(s.timestamps.length, 240);
      for (let k = 0; k < 240; k++) {
        assert.equal(s.timestamps[k], T0 + k * 60_000);
        assert.equal(s.values[k], i * 1000 + k + 0.5);
      }
    }
    assert.deepEqual(JSON.parse(readFileSync(join(dir, "VERSION"), "utf8")), TSDB_FORMAT);
  });
});
