import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { describe, it } from "node:test";
import { Batch } from "./appender.ts";
import { Block } from "./block.ts";
import { cutBlock, cutLines, hasSampleBefore } from "./cut.ts";
import { Head } from "./head.ts";
import { resolveTsdbOptions } from "./options.ts";
import { slicer } from "./slicer.ts";
import { bitsOf, L, T0, tempDir } from "./testutil.ts";

const R = 2 * 3_600_000;

describe("cutLines", () => {
  const cases: [string, number, number, number[]][] = [
    ["an empty head", Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, []],
    ["1.5 ranges exactly: not yet", 0, 1.5 * R, []],
    ["just over 1.5 ranges: the first range boundary", 0, 1.5 * R + 1, [R]],
    ["an unaligned start: the next boundary", 0.5 * R, 2.1 * R, [R]],
    ["a long backlog: every boundary 1.5 ranges behind", 0, 3.6 * R, [R, 2 * R, 3 * R]],
    ["far beyond one range", 0.25 * R, 3.4 * R, [R, 2 * R]],
  ];
  for (const [name, minT, maxT, want] of cases)
    it(name, () =>
      assert.deepEqual(
        cutLines(T0 + minT, T0 + maxT, R),
        want.map((l) => T0 + l),
      ),
    );
});

it("hasSampleBefore looks at the batch's samples only", () => {
  const b = new Batch();
  b.push(0, 100, 0, 0);
  b.push(0, 50, 0, 0);
  assert.equal(hasSampleBefore(b, 50), false);
  assert.equal(hasSampleBefore(b, 51), true);
  b.n = 1; // a reused batch's older entries are not its samples
  assert.equal(hasSampleBefore(b, 51), false);
});

describe("cutBlock", () => {
  const opts = resolveTsdbOptions({});
  function headWith(samples: number): Head {
    const head = new Head(opts);
    for (const vm of ["b", "a"]) {
      const ref = head.getOrCreate(L({ __name__: "m", vm }));
      for (let i = 0; i < samples; i++) head.append(ref, T0 + i * 60_000, ...bitsOf(i));
    }
    return head;
  }

  it("writes the samples below the line into one block, installs it, then drops them from the head", async () => {
    const { dir, cleanup } = tempDir();
    try {
      const head = headWith(300);
      const line = T0 + R;
      const installed: (string | undefined)[] = [];
      const ok = await cutBlock(
        head,
        dir,
        opts,
        line,
        7,
        slicer(1e9, () => true),
        (d) => {
          installed.push(d);
          assert.equal(
            head.hasDataBefore(0, line),
            true,
            "the head still holds them when the block is installed",
          );
        },
      );
      assert.equal(ok, true);
      assert.equal(installed.length, 1);
      const block = new Block(installed[0] as string);
      try {
        assert.equal(block.meta.coversBefore, line);
        assert.equal(block.meta.walSegment, 7);
        assert.equal(block.meta.numSeries, 2);
        assert.equal(block.meta.numSamples, 2 * 120);
        assert.equal(block.meta.maxTime, line - 60_000);
        assert.deepEqual(block.labels(0), L({ __name__: "m", vm: "a" }), "series in label order");
      } finally {
        block.close();
      }
      for (const ref of [0, 1]) {
        assert.equal(head.hasDataBefore(ref, line), false);
        assert.equal(head.samples(ref, -Infinity, Infinity).t.length, 180);
      }
    } finally {
      cleanup();
    }
  });

  it("leaves the head whole and no block when the store closes during the cut", async () => {
    const { dir, cleanup } = tempDir();
    try {
      const head = headWith(300);
      let installs = 0;
      const ok = await cutBlock(
        head,
        dir,
        opts,
        T0 + R,
        1,
        slicer(0, () => false),
        () => installs++,
      );
      assert.equal(ok, false);
      assert.equal(installs, 0);
      assert.deepEqual(readdirSync(dir), [], "no block and no unfinished directory");
      assert.equal(head.samples(0, -Infinity, Infinity).t.length, 300);
    } finally {
      cleanup();
    }
  });

  it("installs nothing when no sample lies below the line", async () => {
    const { dir, cleanup } = tempDir();
    try {
      const head = headWith(10);
      const installed: (string | undefined)[] = [];
      assert.equal(
        await cutBlock(
          head,
          dir,
          opts,
          T0,
          1,
          slicer(1e9, () => true),
          (d) => installed.push(d),
        ),
        true,
      );
      assert.deepEqual(installed, [undefined]);
      assert.deepEqual(readdirSync(dir), []);
    } finally {
      cleanup();
    }
  });
});
