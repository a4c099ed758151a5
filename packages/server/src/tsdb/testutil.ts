/** Helpers shared by the tsdb tests (temp dirs, label construction, a settable clock). */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Labels, labelsFromRecord } from "../storage/interface.ts";

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
