import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { describe, it } from "node:test";
import { Block } from "./block.ts";
import { BlockList } from "./block-list.ts";
import { L, T0, tempDir, trackCleanups, writeTestBlock } from "./testutil.ts";

const HOUR = 3_600_000;
const track = trackCleanups();

/** Three blocks of the same size, an hour apart, oldest first. */
function threeBlocks(): Block[] {
  const { dir, cleanup } = tempDir();
  track(cleanup, true);
  const series = [L({ __name__: "m", vm: "a" }), L({ __name__: "m", vm: "b" })];
  const blocks = [2, 0, 1].map((h) => new Block(writeTestBlock(dir, series, T0 + h * HOUR, 60)));
  track(() => {
    for (const b of blocks) b.close();
  });
  return blocks.sort((a, b) => a.meta.minTime - b.meta.minTime);
}

describe("BlockList", () => {
  it("keeps blocks in time order", () => {
    const [a, b, c] = threeBlocks();
    const list = new BlockList(0);
    list.add(c, a);
    list.add(b);
    assert.deepEqual(list.all, [a, b, c]);
    assert.deepEqual(list.stats().blocks, 3);
  });

  it("holds the newest blocks' rollups within the budget, newest first and without holes", () => {
    const [a, b, c] = threeBlocks();
    const size = a.rollupsBytes();
    assert.ok(size > 0 && b.rollupsBytes() === size && c.rollupsBytes() === size);
    const held = () => [a, b, c].map((x) => x.rollupsHeld);
    const list = new BlockList(2 * size + size / 2);
    list.add(a, b, c);
    assert.deepEqual(held(), [false, true, true]);
    assert.equal(list.stats().rollupHeldBytes, 2 * size);
    // Retention drops the oldest: nothing more fits, nothing changes.
    assert.equal(list.dropBefore(a.meta.maxTime + 1), 1);
    assert.deepEqual(held(), [false, true, true]);
    assert.equal(existsSync(a.dir), false);
    // A budget the newest does not fit: no older block holds memory either.
    const small = new BlockList(size - 1);
    small.add(b, c);
    assert.deepEqual(held(), [false, false, false]);
  });

  it("deletes a replaced block once its last reader releases it, not before", () => {
    const [a, b, c] = threeBlocks();
    const list = new BlockList(0);
    list.add(a, b);
    const first = list.hold([a, b]);
    const second = list.hold([a]);
    list.replace([a, b], [c]);
    assert.deepEqual(list.all, [c]);
    assert.equal(existsSync(a.dir), true);
    assert.equal(existsSync(b.dir), true);
    first();
    first(); // releasing twice counts once
    assert.equal(existsSync(b.dir), false, "b's only reader is done");
    assert.equal(existsSync(a.dir), true, "a is still read by the second");
    second();
    assert.equal(existsSync(a.dir), false);
  });

  it("deletes at close what readers still held", () => {
    const [a, b, c] = threeBlocks();
    const list = new BlockList(0);
    list.add(a, b, c);
    list.hold([a]);
    assert.equal(list.dropBefore(a.meta.maxTime + 1), 1);
    assert.equal(existsSync(a.dir), true);
    list.close();
    assert.equal(existsSync(a.dir), false);
    assert.equal(existsSync(b.dir), true, "a listed block is closed, not deleted");
  });

  it("caches each block's size for scrapes", () => {
    const [a, b] = threeBlocks();
    const list = new BlockList(0);
    list.add(a, b);
    assert.equal(list.sizeBytes(), a.sizeBytes() + b.sizeBytes());
    assert.equal(list.sizeBytes(), list.stats().blockBytes);
  });
});
