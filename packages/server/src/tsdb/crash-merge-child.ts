/**
 * Child process of the merge crash test: opens a store whose blocks are due for merging, starts the
 * merge (yielding after every series) and, once the merged block's temporary directory exists,
 * prints "merging" and stops there until the test SIGKILLs it. Prints "done" if the merge finished
 * before a temporary directory was seen.
 * Usage: node --import tsx crash-merge-child.ts <dir> <nowMs>
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { openTsdb } from "./index.ts";

const [dir, nowMs] = [process.argv[2], Number(process.argv[3])];
const db = await openTsdb(dir, {
  now: () => nowMs,
  blockRangeMs: 60_000,
  outOfOrderWindowMs: 0,
  autoCompact: false,
  compactionSliceMs: 0,
});
const blocks = join(dir, "blocks");
let told = false;
const watch = () => {
  if (!told && readdirSync(blocks).some((e) => e.endsWith(".tmp"))) {
    told = true;
    process.stdout.write("merging\n"); // synchronous on a pipe (Linux)
    // Hold the merge right here, its half-written block on disk, until the test's SIGKILL arrives.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60_000);
  }
  if (!told) setImmediate(watch);
};
watch();
await db.compact();
process.stdout.write("done\n");
