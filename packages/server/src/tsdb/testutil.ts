/** Helpers shared by the tsdb tests (temp dirs, label construction, a settable clock). */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach } from "node:test";
import { type Labels, labelsFromRecord } from "../storage/interface.ts";
import { rollupsOf } from "../storage/rollups.ts";
import { BlockWriter } from "./block.ts";
import { encodeChunks } from "./chunk.ts";
import { openTsdb, type Tsdb, type TsdbOptions } from "./index.ts";
import { encodeRollups } from "./rollup-codec.ts";

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

/**
 * Writes one block into `blocksDir` holding `series` (one sample a minute from `fromMs`, `count` of
 * them, value i) with rollups at 5-minute resolution; returns its directory.
 */
export function writeTestBlock(
  blocksDir: string,
  series: readonly Labels[],
  fromMs: number,
  count: number,
  extra: { walSegment?: number; coversBefore?: number } = {},
): string {
  const t = Float64Array.from({ length: count }, (_, i) => fromMs + i * 60_000);
  const v = Float64Array.from({ length: count }, (_, i) => i);
  const w = new BlockWriter(blocksDir);
  try {
    for (const labels of series)
      w.add(labels, encodeChunks(t, v, count, 120), encodeRollups(rollupsOf(t, v, 300_000)));
    const meta = w.finish({
      coversBefore: extra.coversBefore ?? fromMs + count * 60_000,
      walSegment: extra.walSegment ?? 0,
      rollupResolutionMs: 300_000,
    });
    if (!meta) throw new Error("no block written");
    return join(blocksDir, meta.name);
  } finally {
    w.abort();
  }
}

/** A float's raw bits as the head takes them (hi, lo). */
export function bitsOf(v: number): [number, number] {
  const u = new Uint32Array(new Float64Array([v]).buffer);
  return [u[1], u[0]];
}
