import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

/**
 * Damage found in the store's files (a record, chunk or block that fails its checksum), as one shape
 * for the store's log and metrics (instrumentation.ts `damageReporter`) and for the offline check
 * (`svc admin check`). The unit dropped for each kind is described in docs/operations.md ("Damaged files").
 */

/** What was damaged: the unit the store drops for it. */
export type DamageKind =
  /** A WAL segment record (or a run of bytes up to the next valid record). */
  | "wal_record"
  /** The incomplete last record of the newest segment: a write the crash interrupted, never acknowledged. */
  | "wal_torn_tail"
  /** A record of the WAL checkpoint. */
  | "checkpoint_record"
  /** A block's meta.json or index: the whole block is left out. */
  | "block"
  /** One chunk of a block's chunks file (or its header). */
  | "block_chunk"
  /** One series' rollups in a block: reads fall back to its raw samples, nothing is lost. */
  | "block_rollups";

export const DAMAGE_KINDS: readonly DamageKind[] = [
  "wal_record",
  "wal_torn_tail",
  "checkpoint_record",
  "block",
  "block_chunk",
  "block_rollups",
];

export interface Damage {
  readonly kind: DamageKind;
  readonly file: string;
  /** Byte offset of the damaged unit in the file. */
  readonly offset: number;
  /** Bytes skipped (or truncated) for it. */
  readonly bytes: number;
  /**
   * Samples dropped with it, when the format says how many (a chunk's count, a sample record's
   * count read from its own, unverified header); undefined when it cannot be known.
   */
  readonly samples: number | undefined;
  readonly detail: string;
}

/** Told of each damaged unit as it is found. */
export type DamageSink = (d: Damage) => void;

/** Bytes of a block's files (what leaving it out sets aside). */
export function blockBytes(dir: string): number {
  let n = 0;
  for (const f of readdirSync(dir)) n += statSync(join(dir, f)).size;
  return n;
}

/** The sample count a block's meta.json states, when it can be read; else undefined. */
export function blockSamples(dir: string): number | undefined {
  try {
    const n = (JSON.parse(readFileSync(join(dir, "meta.json"), "utf8")) as { numSamples?: unknown })
      .numSamples;
    return typeof n === "number" && Number.isSafeInteger(n) && n >= 0 ? n : undefined;
  } catch {
    return undefined;
  }
}
