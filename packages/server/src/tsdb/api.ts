/** What the store offers the rest of svc (index.ts exports it), and the figures it reports. */
import type { Appender, Querier, Storage } from "../storage/interface.ts";
import type { TsdbOptions } from "./options.ts";

/** One file of a snapshot, relative to its directory (`blocks/…`, `wal/…`, `VERSION`). */
export interface SnapshotFile {
  readonly path: string;
  readonly bytes: number;
  /** A hard link to the live block file rather than a copy. */
  readonly linked: boolean;
}

export interface TsdbSnapshot {
  /** Wall-clock time the WAL was sealed: every commit acknowledged before it is in the snapshot. */
  readonly timeMs: number;
  readonly files: readonly SnapshotFile[];
}

/** Figures about the store; bytes are bytes, times ms. */
export interface TsdbStats {
  readonly headSeries: number;
  readonly headSamples: number;
  readonly oooSamples: number;
  /** Encoded bytes of the head's chunks (closed + open). */
  readonly headChunkBytes: number;
  /** Approximate bytes of the head's arrays, chunk pages and slots. */
  readonly headMemoryBytes: number;
  readonly blocks: number;
  readonly blockSamples: number;
  readonly blockBytes: number;
  /** Bytes of block rollups held in memory (TsdbOptions.rollupMemoryBytes). */
  readonly rollupHeldBytes: number;
  readonly walSegment: number;
  readonly walFlushes: number;
  readonly walCommits: number;
  /** Time the last open spent replaying checkpoint + WAL, and the samples it replayed. */
  readonly replayMs: number;
  readonly replayedSamples: number;
  /** WAL segments (the checkpoint counted as one) the last open found to replay. */
  readonly replayedSegments: number;
}

export interface Tsdb extends Storage {
  querier(): Querier;
  appender(): Appender;
  /** Cuts head data into blocks when due, checkpoints the WAL, applies retention. */
  compact(): Promise<void>;
  /** Deletes whole blocks whose max time < nowMs − retention; returns how many. */
  applyRetention(nowMs?: number): number;
  /** Resolves when every commit issued so far is durable and applied. */
  flush(): Promise<void>;
  stats(): TsdbStats;
  /** Encoded chunk bytes (head and blocks) per value of label `name`; values without any are absent. */
  chunkBytesByLabel(name: string): Map<string, number>;
  /**
   * Writes a consistent image of the store into `dest` (created; must not exist) while appends go
   * on: blocks as hard links (copies across file systems), the latest checkpoint and the WAL up to
   * a segment sealed now. Opening `dest` gives every sample acknowledged before `timeMs`.
   */
  snapshot(dest: string): Promise<TsdbSnapshot>;
  readonly options: TsdbOptions;
}
