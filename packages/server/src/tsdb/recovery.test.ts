import assert from "node:assert/strict";
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import pino from "pino";
import { Block, ByteWriter } from "./block.ts";
import { writeCheckpoint } from "./checkpoint.ts";
import { mergeBlocks } from "./compactor.ts";
import type { Damage } from "./damage.ts";
import { Head } from "./head.ts";
import { resolveTsdbOptions } from "./options.ts";
import { loadBlocks, replayWal, skipBefore } from "./recovery.ts";
import { slicer } from "./slicer.ts";
import { bitsOf, L, T0, tempDir, trackCleanups, writeTestBlock } from "./testutil.ts";
import { frameCompactSamples, frameSeriesRecord, segmentName, Wal } from "./wal.ts";

const track = trackCleanups();
const opts = resolveTsdbOptions({});
const a = L({ __name__: "m", vm: "a" });
const b = L({ __name__: "m", vm: "b" });

function capture() {
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: "info" }, { write: (s: string) => lines.push(JSON.parse(s)) });
  return { lines, log, messages: () => lines.map((l) => String(l.msg)) };
}

function dir(): string {
  const t = tempDir();
  track(t.cleanup, true);
  return t.dir;
}

/** Writes segment `seg` of `walDir`: series a and b (refs 1, 2) and one sample of each at `times`. */
async function writeSegment(walDir: string, seg: number, times: number[], withSeries = true) {
  const wal = new Wal(walDir, seg, 1 << 20, 0);
  const w = new ByteWriter();
  if (withSeries)
    frameSeriesRecord(w, [
      { ref: 1, labels: a },
      { ref: 2, labels: b },
    ]);
  const refs = times.flatMap(() => [1, 2]);
  const ts = times.flatMap((t) => [t, t]);
  const bits = times.flatMap((_, i) => [bitsOf(i), bitsOf(-i)]);
  const rec = frameCompactSamples(
    refs.length,
    refs,
    ts,
    bits.map((x) => x[0]),
    bits.map((x) => x[1]),
  );
  await wal.log(Buffer.concat([w.finish(), rec]), () => undefined);
  await wal.close();
}

describe("loadBlocks", () => {
  it("removes and logs unfinished block directories, reports a damaged block and leaves it on disk", () => {
    const blocksDir = dir();
    const sound = writeTestBlock(blocksDir, [a], T0, 10);
    const broken = writeTestBlock(blocksDir, [b], T0 + 3_600_000, 10);
    writeFileSync(join(broken, "meta.json"), "{ not json");
    mkdirSync(join(blocksDir, "0abc.tmp"));
    const { lines, log, messages } = capture();
    const damage: Damage[] = [];
    const blocks = loadBlocks(
      blocksDir,
      (d) => new Block(d),
      (d) => damage.push(d),
      log,
    );
    track(() => {
      for (const x of blocks) x.close();
    });
    assert.deepEqual(
      blocks.map((x) => x.dir),
      [sound],
    );
    assert.equal(existsSync(join(blocksDir, "0abc.tmp")), false);
    assert.ok(messages().some((m) => /unfinished block directory removed/.test(m)));
    assert.equal(lines.find((l) => /unfinished block/.test(String(l.msg)))?.dir, join(blocksDir, "0abc.tmp"));
    assert.deepEqual(
      damage.map((d) => [d.kind, d.file]),
      [["block", broken]],
    );
    assert.equal(existsSync(broken), true, "left for the operator");
  });

  it("removes, and logs, merge sources whose merged block is in place (a crash before they were deleted)", async () => {
    const blocksDir = dir();
    const parts = [T0, T0 + 3_600_000].map((t) => new Block(writeTestBlock(blocksDir, [a], t, 10)));
    const meta = await mergeBlocks(blocksDir, parts, 300_000, 120, () => undefined);
    for (const p of parts) p.close();
    assert.ok(meta);
    const { log, lines } = capture();
    const blocks = loadBlocks(
      blocksDir,
      (d) => new Block(d),
      () => assert.fail("no damage"),
      log,
    );
    track(() => {
      for (const x of blocks) x.close();
    });
    assert.deepEqual(
      blocks.map((x) => x.meta.name),
      [meta.name],
    );
    assert.deepEqual(readdirSync(blocksDir), [meta.name]);
    assert.deepEqual(
      lines.filter((l) => /merge source removed/.test(String(l.msg))).map((l) => l.dir),
      parts.map((p) => p.dir),
    );
  });
});

it("skipBefore: the newest line of the blocks cut at or after the segment", () => {
  const blocks = [
    { meta: { walSegment: 2, coversBefore: 100 } },
    { meta: { walSegment: 5, coversBefore: 300 } },
    { meta: { walSegment: 5, coversBefore: 200 } },
  ];
  assert.equal(skipBefore(blocks, 1), 300);
  assert.equal(skipBefore(blocks, 3), 300);
  assert.equal(skipBefore(blocks, 6), Number.NEGATIVE_INFINITY);
  assert.equal(skipBefore([], 1), Number.NEGATIVE_INFINITY);
});

describe("replayWal", () => {
  it("replays the segments in order, skipping what blocks hold, and names the next segment", async () => {
    const walDir = dir();
    await writeSegment(walDir, 1, [T0, T0 + 1000]);
    await writeSegment(walDir, 2, [T0 + 2000], false);
    const head = new Head(opts);
    const { log } = capture();
    const block = { meta: { walSegment: 1, coversBefore: T0 + 1000 } } as Block;
    const r = replayWal(walDir, head, [block], () => assert.fail("no damage"), log, undefined);
    assert.deepEqual(r, { next: 3, checkpoint: 0, samples: 4, segments: 2 });
    const ref = head.reg.find(a);
    assert.deepEqual(Array.from(head.samples(ref, -Infinity, Infinity).t), [T0 + 1000, T0 + 2000]);
  });

  it("starts from the checkpoint, and logs the unfinished and superseded checkpoints it removes", async () => {
    const walDir = dir();
    await writeSegment(walDir, 1, [T0, T0 + 1000]);
    const written = new Head(opts);
    replayWal(walDir, written, [], () => {}, capture().log, undefined);
    assert.equal(
      await writeCheckpoint(
        walDir,
        written,
        1,
        slicer(1e9, () => true),
      ),
      true,
    );
    mkdirSync(join(walDir, `checkpoint.${segmentName(0)}`));
    mkdirSync(join(walDir, `checkpoint.${segmentName(2)}.tmp`));
    await writeSegment(walDir, 2, [T0 + 2000], false);
    const { lines, log } = capture();
    const head = new Head(opts);
    const r = replayWal(walDir, head, [], () => assert.fail("no damage"), log, undefined);
    // Segment 1 is still on disk (the store deletes it after the checkpoint): the checkpoint covers it.
    assert.deepEqual(r, { next: 3, checkpoint: 1, samples: 6, segments: 2 });
    assert.deepEqual(Array.from(head.samples(head.reg.find(b), -Infinity, Infinity).t), [
      T0,
      T0 + 1000,
      T0 + 2000,
    ]);
    assert.deepEqual(
      lines
        .filter((l) => /checkpoint removed/.test(String(l.msg)))
        .map((l) => l.path)
        .sort(),
      [join(walDir, `checkpoint.${segmentName(0)}`), join(walDir, `checkpoint.${segmentName(2)}.tmp`)],
    );
    assert.deepEqual(readdirSync(walDir).sort(), [
      segmentName(1),
      segmentName(2),
      `checkpoint.${segmentName(1)}`,
    ]);
  });

  it("drops, logs and counts samples whose series record is missing", async () => {
    const walDir = dir();
    await writeSegment(walDir, 1, [T0], false);
    const { lines, log } = capture();
    const head = new Head(opts);
    const r = replayWal(walDir, head, [], () => {}, log, undefined);
    assert.equal(r.samples, 0);
    const line = lines.find((l) => /series record was damaged/.test(String(l.msg)));
    assert.equal(line?.samplesDropped, 2);
    assert.equal(line?.level, 50);
  });
});

it("writeCheckpoint writes nothing when the store closes during it", async () => {
  const walDir = dir();
  await writeSegment(walDir, 1, [T0]);
  const head = new Head(opts);
  replayWal(walDir, head, [], () => {}, capture().log, undefined);
  assert.equal(
    await writeCheckpoint(
      walDir,
      head,
      1,
      slicer(0, () => false),
    ),
    false,
  );
  assert.deepEqual(readdirSync(walDir), [segmentName(1)]);
});
