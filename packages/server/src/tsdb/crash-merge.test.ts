import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import type { Tsdb } from "./index.ts";
import { L, openForTest, T0, trackCleanups } from "./testutil.ts";

const child = fileURLToPath(new URL("./crash-merge-child.ts", import.meta.url));
const MIN = 60_000;
const SERIES = 300;

const track = trackCleanups();

const options = { blockRangeMs: MIN, outOfOrderWindowMs: 0 };

/** Every sample of the store as "series@t=value" lines, sorted. */
function dump(db: Tsdb): string[] {
  const out: string[] = [];
  for (const s of db.querier().select([{ type: "=", name: "__name__", value: "m" }], -Infinity, Infinity))
    for (let i = 0; i < s.timestamps.length; i++)
      out.push(`${s.labels.find((l) => l.name === "i")?.value}@${s.timestamps[i]}=${s.values[i]}`);
  return out.sort();
}

/** Runs the child until it says it is merging, then SIGKILLs it; resolves with what it printed. */
function killDuringMerge(dir: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ["--import", "tsx", child, dir, String(T0)], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    p.stdout.on("data", (d) => {
      out += d;
      if (out.includes("merging")) p.kill("SIGKILL");
    });
    p.stderr.on("data", (d) => {
      out += d;
    });
    p.on("error", reject);
    p.on("exit", () => resolve(out));
  });
}

describe("tsdb merge crash safety", () => {
  it("a merge killed with SIGKILL leaves a readable store with every sample and no half block in use", async () => {
    const { db, dir, clock } = await openForTest(track, { ...options, mergeBlocks: false });
    const app = db.appender();
    for (let t = T0 - 10 * MIN; t <= T0; t += 10_000)
      for (let i = 0; i < SERIES; i++) app.append(L({ __name__: "m", i: String(i) }), t, t / 1000 + i);
    await app.commit();
    await db.compact(); // one-minute blocks, none merged
    const before = dump(db);
    const blocksBefore = db.stats().blocks;
    assert.equal(before.length, 61 * SERIES);
    assert.ok(blocksBefore >= 6, `blocks to merge: ${blocksBefore}`);
    await db.close();

    const out = await killDuringMerge(dir);
    assert.match(out, /merging/, "the child was killed during a merge");
    assert.doesNotMatch(out, /done/);

    const { db: again } = await openForTest(track, { ...options, now: clock.now }, dir);
    assert.deepEqual(
      readdirSync(join(dir, "blocks")).filter((e) => e.endsWith(".tmp")),
      [],
      "the half-written block was removed",
    );
    assert.deepEqual(dump(again), before, "every sample, once");
    // The store merges afterwards as if nothing happened.
    await again.compact();
    assert.ok(again.stats().blocks < blocksBefore, "merged after the restart");
    assert.deepEqual(dump(again), before);
  });
});
