// Serializes builds of one output folder across processes (tests run in parallel and each may ask for
// the build), and swaps the new output in with renames, so a reader never sees a half-written folder.
import { existsSync, mkdirSync, renameSync, rmSync, statSync } from "node:fs";

const STALE_MS = 5 * 60_000;

/** Runs `build(tmpDir)` under a lock unless `upToDate()` says there is nothing to do; then swaps tmpDir in as `out`. */
export async function lockedBuild(out, upToDate, build) {
  const lock = `${out}.lock`;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch (err) {
      if (err.code !== "EEXIST") throw err;
      // A builder that died leaves its lock; one older than any build is taken over.
      if (Date.now() - statSync(lock, { throwIfNoEntry: false })?.mtimeMs > STALE_MS)
        rmSync(lock, { recursive: true, force: true });
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  try {
    if (upToDate()) return false;
    const next = `${out}.next`;
    rmSync(next, { recursive: true, force: true });
    await build(next);
    const old = `${out}.old`;
    rmSync(old, { recursive: true, force: true });
    if (existsSync(out)) renameSync(out, old);
    renameSync(next, out);
    rmSync(old, { recursive: true, force: true });
    return true;
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}
