/**
 * One flipped byte in the store's files (seeded offsets across WAL segments, the checkpoint, block
 * chunks and block indexes): every start logs the damage, loses at most the damaged unit (a record,
 * a chunk, a block), returns no altered value, and counts it (docs/operations.md "Damaged files").
 */
import assert from "node:assert/strict";
import { cpSync, existsSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import { seededRandom } from "../../testing/seeded-random.ts";
import { createRegistry } from "../instrument.ts";
import type { Labels } from "../storage/interface.ts";
import { Rollups } from "../storage/rollups.ts";
import { Block } from "./block.ts";
import type { Damage } from "./damage.ts";
import { openTsdb } from "./index.ts";
import { L, manualClock, T0, tempDir } from "./testutil.ts";
import { readRecords, segmentName } from "./wal.ts";

const HOUR = 3_600_000;
const STEP = 30_000;
const SERIES = 40;
const CHUNK_SAMPLES = 120;

const key = (labels: Labels) => labels.map((l) => `${l.name}=${l.value}`).join(",");
const bits = (v: number) => Buffer.from(new Float64Array([v]).buffer).toString("hex");

/** Every sample of the store in `dir`: "labels@t" → value bits; plus what was logged and counted. */
async function readAll(dir: string) {
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: "info" }, { write: (s: string) => lines.push(JSON.parse(s)) });
  const registry = createRegistry();
  const clock = manualClock(T0 + 10 * HOUR);
  const db = await openTsdb(dir, { now: clock.now, autoCompact: false }, { registry, log });
  const got = new Map<string, string>();
  try {
    for (const s of db.querier().select([{ type: "=", name: "__name__", value: "m" }], -Infinity, Infinity)) {
      const k = key(s.labels);
      for (let i = 0; i < s.timestamps.length; i++) got.set(`${k}@${s.timestamps[i]}`, bits(s.values[i]));
    }
  } finally {
    await db.close();
  }
  let corruptions = 0;
  for (const m of await registry.getMetricsAsJSON())
    if (m.name === "svc_tsdb_wal_corruptions_total") for (const v of m.values) corruptions += v.value;
  return { got, lines, corruptions };
}

/** The frames of a sound WAL file: [start, end) of each record. */
function frames(buf: Buffer): [number, number][] {
  const out: [number, number][] = [];
  for (let p = 0; p + 8 <= buf.length; ) {
    const end = p + 8 + buf.readUInt32LE(p);
    out.push([p, end]);
    p = end;
  }
  return out;
}

describe("tsdb: one damaged byte loses at most its unit, logged and counted", () => {
  const { dir: root, cleanup } = tempDir();
  const pristine = join(root, "pristine");
  let expected: Map<string, string>;
  /** Sound WAL files (checkpoint first), for the damaged record's samples. */
  let walFiles: string[];
  const refLabels = new Map<number, string>();

  before(async () => {
    const clock = manualClock(T0);
    const db = await openTsdb(pristine, { now: clock.now, autoCompact: false, walSegmentBytes: 64 * 1024 });
    const r = seededRandom(7);
    const series = Array.from({ length: SERIES }, (_, i) => L({ __name__: "m", vm: `vm-${i}` }));
    const write = async (from: number, to: number) => {
      for (let t = from; t < to; t += STEP) {
        clock.set(t);
        const app = db.appender();
        for (const [i, l] of series.entries()) app.append(l, t, i % 2 ? Math.round(r() * 100) : r() * 1000);
        await app.commit();
      }
    };
    await write(T0, T0 + 8 * HOUR);
    await db.compact(); // three blocks and a checkpoint of the last two hours
    await write(T0 + 8 * HOUR, T0 + 10 * HOUR); // segments after the checkpoint
    await db.close();
    const wal = join(pristine, "wal");
    const cp = readdirSync(wal).find((e) => e.startsWith("checkpoint."));
    assert.ok(cp, "the setup wrote a checkpoint");
    const segs = readdirSync(wal).filter((e) => /^\d{8}$/.test(e));
    assert.ok(segs.length >= 2, `the setup left several segments (${segs.length})`);
    walFiles = [join(wal, cp, segmentName(0)), ...segs.sort().map((s) => join(wal, s))];
    for (const f of walFiles)
      readRecords(readFileSync(f), { series: (ref, l) => refLabels.set(ref, key(l)), sample() {} });
    expected = (await readAll(pristine)).got;
    assert.equal(expected.size, SERIES * ((10 * HOUR) / STEP));
  });
  after(cleanup);

  /** Copies the pristine store, flips one byte of `rel` at `offset`, opens it and reads everything. */
  async function flipAndRead(n: number, rel: string, offset: number, xor: number) {
    const dir = join(root, `flip-${n}`);
    cpSync(pristine, dir, { recursive: true });
    const file = join(dir, rel);
    const buf = readFileSync(file);
    buf[offset] ^= xor;
    writeFileSync(file, buf);
    try {
      const r = await readAll(dir);
      const lost = [...expected.keys()].filter((k) => !r.got.has(k));
      for (const [k, v] of r.got)
        assert.equal(v, expected.get(k), `${rel}@${offset}: ${k} came back altered`);
      const logged = r.lines.filter((l) => (l.level as number) >= 40 && l.file === file);
      assert.ok(logged.length > 0, `${rel}@${offset}: no warning or error names the damaged file`);
      assert.ok(r.corruptions > 0, `${rel}@${offset}: not counted`);
      return { lost, logged };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  /** Samples of the WAL record holding `offset` (for a series record: every sample of its series). */
  function walUnit(file: string, offset: number): { unit: Set<string>; series: boolean } {
    const buf = readFileSync(file);
    const frame = frames(buf).find(([s, e]) => offset >= s && offset < e);
    assert.ok(frame);
    const refs = new Set<number>();
    const unit = new Set<string>();
    readRecords(buf.subarray(frame[0], frame[1]), {
      series: (ref) => refs.add(ref),
      sample: (ref, t) => unit.add(`${refLabels.get(ref)}@${t}`),
    });
    if (refs.size > 0)
      for (const f of walFiles)
        readRecords(readFileSync(f), {
          series() {},
          sample: (ref, t) => {
            if (refs.has(ref)) unit.add(`${refLabels.get(ref)}@${t}`);
          },
        });
    return { unit, series: refs.size > 0 };
  }

  const walCases = (which: "checkpoint" | "segments", count: number, seed: number) => async () => {
    const r = seededRandom(seed);
    const files = which === "checkpoint" ? walFiles.slice(0, 1) : walFiles.slice(1);
    let lostAll = 0;
    for (let n = 0; n < count; n++) {
      const file = files[Math.floor(r() * files.length)];
      const size = readFileSync(file).length;
      const offset = Math.floor(r() * size);
      const { lost } = await flipAndRead(
        n,
        file.slice(pristine.length + 1),
        offset,
        1 + Math.floor(r() * 255),
      );
      const { unit, series } = walUnit(file, offset);
      const extra = lost.filter((k) => !unit.has(k));
      // A sample record holds a commit's samples or, in the checkpoint, at most 1,024.
      if (!series)
        assert.ok(lost.length <= 1024, `${file}@${offset}: lost ${lost.length} samples with one record`);
      assert.deepEqual(
        extra.slice(0, 3),
        [],
        `${file}@${offset}: lost ${extra.length} samples beyond the record`,
      );
      lostAll += lost.length;
    }
    assert.ok(lostAll > 0, "the flips damaged records that held samples");
  };

  it("WAL segments: 30 flips, each losing at most its record", walCases("segments", 30, 11));
  it("the checkpoint: 30 flips, each losing at most its record", walCases("checkpoint", 30, 12));

  it("block chunks: 30 flips, each losing at most one chunk of one series", async () => {
    const r = seededRandom(13);
    const blocks = readdirSync(join(pristine, "blocks"));
    let lostAll = 0;
    for (let n = 0; n < 30; n++) {
      const rel = join("blocks", blocks[Math.floor(r() * blocks.length)], "chunks");
      const offset = Math.floor(r() * readFileSync(join(pristine, rel)).length);
      const { lost, logged } = await flipAndRead(n, rel, offset, 1 + Math.floor(r() * 255));
      assert.ok(lost.length <= CHUNK_SAMPLES, `${rel}@${offset}: lost ${lost.length} samples`);
      assert.ok(new Set(lost.map((k) => k.split("@")[0])).size <= 1, `${rel}@${offset}: lost several series`);
      const dropped = logged.reduce(
        (s, l) => s + (typeof l.samplesDropped === "number" ? l.samplesDropped : 0),
        0,
      );
      assert.equal(dropped, lost.length, `${rel}@${offset}: the log says ${dropped} samples dropped`);
      lostAll += lost.length;
    }
    assert.ok(lostAll > 0, "the flips damaged chunks");
  });

  it("block indexes: 10 flips, each leaving out that block only, the store still opening", async () => {
    const r = seededRandom(14);
    const blocks = readdirSync(join(pristine, "blocks"));
    for (let n = 0; n < 10; n++) {
      const name = blocks[Math.floor(r() * blocks.length)];
      const rel = join("blocks", name, "index");
      const offset = Math.floor(r() * readFileSync(join(pristine, rel)).length);
      const meta = JSON.parse(readFileSync(join(pristine, "blocks", name, "meta.json"), "utf8"));
      const res = await flipAndReadIndex(n, rel, offset, 1 + Math.floor(r() * 255));
      const outside = res.lost.filter((k) => {
        const t = Number(k.split("@")[1]);
        return t < meta.minTime || t > meta.maxTime;
      });
      assert.deepEqual(outside.slice(0, 3), [], `${rel}@${offset}: lost samples outside the block`);
      assert.ok(res.lost.length <= meta.numSamples);
    }
  });

  /** As flipAndRead, but the log names the block's directory (the unit left out). */
  async function flipAndReadIndex(n: number, rel: string, offset: number, xor: number) {
    const dir = join(root, `index-${n}`);
    cpSync(pristine, dir, { recursive: true });
    const file = join(dir, rel);
    const buf = readFileSync(file);
    buf[offset] ^= xor;
    writeFileSync(file, buf);
    try {
      const r = await readAll(dir);
      const lost = [...expected.keys()].filter((k) => !r.got.has(k));
      for (const [k, v] of r.got)
        assert.equal(v, expected.get(k), `${rel}@${offset}: ${k} came back altered`);
      const blockDir = join(dir, rel.replace(/\/index$/, ""));
      assert.ok(
        r.lines.some((l) => l.level === 50 && l.file === blockDir),
        `${rel}@${offset}: no error names the block`,
      );
      assert.ok(r.corruptions > 0, `${rel}@${offset}: not counted`);
      return { lost };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
});

describe("tsdb: the store speaks (issue 49)", () => {
  const capture = () => {
    const lines: Record<string, unknown>[] = [];
    const log = pino({ level: "info" }, { write: (s: string) => lines.push(JSON.parse(s)) });
    return { lines, log };
  };

  it("logs a torn WAL tail it truncates at warn level, with the file and the bytes cut", async () => {
    const { dir, cleanup } = tempDir();
    try {
      const clock = manualClock(T0);
      const db = await openTsdb(dir, { now: clock.now, autoCompact: false });
      const app = db.appender();
      app.append(L({ __name__: "m", vm: "a" }), T0, 1);
      await app.commit();
      await db.close();
      const seg = join(dir, "wal", readdirSync(join(dir, "wal")).sort().at(-1) as string);
      const size = readFileSync(seg).length;
      writeFileSync(seg, Buffer.concat([readFileSync(seg), Buffer.from([40, 0, 0, 0, 1, 2, 3, 4, 3, 9])]));
      const { lines, log } = capture();
      const registry = createRegistry();
      const again = await openTsdb(dir, { now: clock.now, autoCompact: false }, { registry, log });
      await again.close();
      const torn = lines.find((l) => l.kind === "wal_torn_tail");
      assert.ok(torn, "the truncation is logged");
      assert.equal(torn.level, 40);
      assert.equal(torn.file, seg);
      assert.equal(torn.offset, size);
      assert.equal(torn.bytes, 10);
      assert.equal(readFileSync(seg).length, size, "the torn bytes are cut");
      const m = (await registry.getMetricsAsJSON()).find((f) => f.name === "svc_tsdb_wal_corruptions_total");
      assert.equal(m?.values.find((v) => v.labels.kind === "wal_torn_tail")?.value, 1);
    } finally {
      cleanup();
    }
  });

  it("logs and counts a background compaction that fails, instead of swallowing it", async () => {
    const { dir, cleanup } = tempDir();
    const { lines, log } = capture();
    const registry = createRegistry();
    const clock = manualClock(T0);
    const db = await openTsdb(dir, { now: clock.now, autoCompact: true }, { registry, log });
    try {
      // The blocks directory turns into a file: the cut a commit schedules cannot write its block.
      rmSync(join(dir, "blocks"), { recursive: true });
      writeFileSync(join(dir, "blocks"), "not a directory");
      for (let t = T0; t <= T0 + 4 * HOUR; t += 10 * 60_000) {
        clock.set(t);
        const app = db.appender();
        app.append(L({ __name__: "m", vm: "a" }), t, 1);
        await app.commit();
      }
      const failed = () => lines.find((l) => /background compaction failed/.test(String(l.msg)));
      for (let i = 0; i < 500 && !failed(); i++) await new Promise((r) => setTimeout(r, 20));
      const line = failed();
      assert.ok(line, "the failure is logged");
      assert.equal(line.level, 50);
      assert.match(String((line.err as { message?: string })?.message), /ENOTDIR|EEXIST|not a directory/i);
      const m = (await registry.getMetricsAsJSON()).find(
        (f) => f.name === "svc_tsdb_background_errors_total",
      );
      assert.ok((m?.values.find((v) => v.labels.task === "compaction")?.value ?? 0) >= 1);
    } finally {
      await db.close();
      cleanup();
    }
  });
});

describe("tsdb: the store speaks about its WAL", () => {
  it("logs a failed WAL write at error level, once, and counts it", async (t) => {
    if (!existsSync("/dev/full")) return t.skip("needs /dev/full");
    const { dir, cleanup } = tempDir();
    const lines: Record<string, unknown>[] = [];
    const log = pino({ level: "info" }, { write: (s: string) => lines.push(JSON.parse(s)) });
    const registry = createRegistry();
    const clock = manualClock(T0);
    const db = await openTsdb(dir, { now: clock.now, autoCompact: false }, { registry, log });
    try {
      // The next segment is a device that refuses every write (ENOSPC); a snapshot seals the current one.
      symlinkSync("/dev/full", join(dir, "wal", segmentName(2)));
      await db.snapshot(join(dir, "snap"));
      for (const v of [1, 2]) {
        const app = db.appender();
        app.append(L({ __name__: "m", vm: "a" }), T0 + v, v);
        await assert.rejects(app.commit(), /WAL/);
      }
      const failed = lines.filter((l) => /WAL write failed/.test(String(l.msg)));
      assert.equal(failed.length, 1, "logged once, not per refused commit");
      assert.equal(failed[0].level, 50);
      assert.match(String((failed[0].err as { message?: string })?.message), /ENOSPC|no space/i);
      const m = (await registry.getMetricsAsJSON()).find(
        (f) => f.name === "svc_tsdb_wal_write_failures_total",
      );
      assert.equal(m?.values[0]?.value, 1);
    } finally {
      await db.close();
      cleanup();
    }
  });
});

describe("tsdb: damaged rollups", () => {
  it("are reported and not used: that series' reads fall back to its raw samples", async () => {
    const { dir, cleanup } = tempDir();
    try {
      const clock = manualClock(T0);
      const db = await openTsdb(dir, { now: clock.now, autoCompact: false });
      for (let t = T0; t < T0 + 5 * HOUR; t += 60_000) {
        clock.set(t);
        const app = db.appender();
        for (let i = 0; i < 4; i++) app.append(L({ __name__: "m", vm: `v${i}` }), t, i + t / 1e9);
        await app.commit();
      }
      await db.compact();
      await db.close();
      const blockDir = join(dir, "blocks", readdirSync(join(dir, "blocks")).sort()[0]);
      const file = join(blockDir, "rollups");
      const buf = readFileSync(file);
      buf[12] ^= 0x40; // inside the first series' rollups (after the 8-byte header)
      writeFileSync(file, buf);
      const damage: Damage[] = [];
      const block = new Block(blockDir, { onDamage: (d) => damage.push(d) });
      try {
        const used = Array.from({ length: block.numSeries }, (_, id) =>
          block.rollups(id, -Infinity, Infinity, new Rollups(30 * 60_000)),
        );
        assert.deepEqual(used.filter((u) => !u).length, 1, "one series' rollups are refused");
        assert.deepEqual(
          damage.map((d) => [d.kind, d.file, d.samples]),
          [["block_rollups", file, 0]],
        );
        assert.equal(block.verify(), 1);
      } finally {
        block.close();
      }
    } finally {
      cleanup();
    }
  });
});
