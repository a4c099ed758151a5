/** Helpers shared by the tsdb tests (temp dirs, label construction, a settable clock). */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach } from "node:test";
import { type Labels, labelsFromRecord } from "../storage/interface.ts";
import { openTsdb, type Tsdb, type TsdbOptions } from "./index.ts";

export function tempDir(): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), "svc-tsdb-"));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export function L(rec: Record<string, string>): Labels {
  return labelsFromRecord(rec);
}

/** A clock tests move by hand. */
export function manualClock(startMs: number): { now: () => number; set: (t: number) => void } {
  let t = startMs;
  return { now: () => t, set: (x) => (t = x) };
}

export const T0 = Date.UTC(2025, 0, 1);

/**
 * Opens a store for a test in a new temp dir (or `dir`), with a manual clock at T0 and automatic
 * compaction off; `track` receives the close and the dir removal, to run after the test.
 */
export async function openForTest(
  track: (cleanup: () => Promise<void> | void, first?: boolean) => void,
  overrides: Partial<TsdbOptions> = {},
  dir?: string,
): Promise<{ db: Tsdb; dir: string; clock: ReturnType<typeof manualClock> }> {
  let d = dir;
  if (!d) {
    const t = tempDir();
    track(t.cleanup, true);
    d = t.dir;
  }
  const clock = manualClock(T0);
  const db = await openTsdb(d, { now: clock.now, autoCompact: false, ...overrides });
  track(() => db.close());
  return { db, dir: d, clock };
}

/**
 * The `track` that openForTest takes, for a test file: what it is given runs after each test, newest
 * first, so a temp dir is removed after the store in it is closed (`first` puts a cleanup last).
 */
export function trackCleanups(): (fn: () => Promise<void> | void, first?: boolean) => void {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()?.();
  });
  return (fn, first = false) => {
    if (first) cleanups.unshift(fn);
    else cleanups.push(fn);
  };
}
