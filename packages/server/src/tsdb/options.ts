/**
 * Options of the embedded TSDB, with defaults in one place (Prometheus' tsdb.DefaultOptions()).
 * `openTsdb(dir, overrides)` merges overrides onto the defaults, validates once and freezes.
 */

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;

export interface TsdbOptions {
  /** Blocks whose max time is older than now − retention are deleted whole. Milliseconds. */
  readonly retentionMs: number;
  /** Samples down to (series max time − window) are accepted out of order. 0 disables. Milliseconds. */
  readonly outOfOrderWindowMs: number;
  /** Width of one on-disk block; blocks are aligned to multiples of it. Milliseconds. */
  readonly blockRangeMs: number;
  /**
   * Buckets of the per-series rollups written into every block (count, first/last, max, sum and
   * counter resets per bucket), which serve step aggregates at steps that are multiples of it
   * without decoding raw samples. 0 writes none. Milliseconds.
   */
  readonly rollupResolutionMs: number;
  /**
   * Series with the same value of this label are stored side by side in a block's rollups file, so
   * reading one target's series (a VM's, for `vm`) takes one read per block. "" keeps label order.
   */
  readonly rollupGroupLabel: string;
  /**
   * Memory for block rollups: the rollups files of the newest blocks are held in memory up to this
   * many bytes (older ones are read from disk per query). The 7-day charts read only rollups, and a
   * page the OS dropped costs a disk read inside the request. 0 reads every rollup from disk. Bytes.
   */
  readonly rollupMemoryBytes: number;
  /** Merge blocks into 3× and 12× longer ones once their window is behind the head (compactor.ts). */
  readonly mergeBlocks: boolean;
  /**
   * Longest block a merge makes (Prometheus' --storage.tsdb.max-block-duration), ms; 0: a seventh
   * of the retention. The block range or less turns merging off.
   */
  readonly maxBlockDurationMs: number;
  /** A head chunk is cut after this many samples. Count. */
  readonly chunkTargetSamples: number;
  /** A WAL segment file is rotated once it reaches this size. Bytes. */
  readonly walSegmentBytes: number;
  /** Write a checkpoint (and truncate the WAL) once this many sealed segments follow the last one. Count. */
  readonly checkpointEverySegments: number;
  /** Commits that arrive within this window share one write + fdatasync; 0 = same event-loop turn. Milliseconds. */
  readonly groupCommitWindowMs: number;
  /** Samples further than this ahead of `now()` are refused as out_of_bounds. Milliseconds. */
  readonly maxFutureMs: number;
  /** Run compaction and retention automatically after commits and on a timer. */
  readonly autoCompact: boolean;
  /** Period of the retention/compaction timer when autoCompact is on. Milliseconds. */
  readonly maintenanceIntervalMs: number;
  /**
   * Longest stretch compaction (cut, checkpoint, merge) works before giving the event loop back to
   * requests. Milliseconds; 0 yields after every series (tests).
   */
  readonly compactionSliceMs: number;
  /** Clock, ms since the Unix epoch; injected by tests so they need not sleep. */
  readonly now: () => number;
}

export const defaultTsdbOptions: TsdbOptions = Object.freeze({
  retentionMs: 7 * DAY_MS, // 7 days
  outOfOrderWindowMs: HOUR_MS, // 1 hour
  blockRangeMs: 2 * HOUR_MS, // 2 hours
  rollupResolutionMs: 30 * MINUTE_MS, // 30 minutes
  rollupGroupLabel: "vm",
  rollupMemoryBytes: 256 * 1024 * 1024, // 256 MiB: 7 days of ~40,000 series at 30 s sampling
  mergeBlocks: true,
  maxBlockDurationMs: 0, // a seventh of the retention: 24 h for 7 days
  chunkTargetSamples: 120, // samples
  walSegmentBytes: 128 * 1024 * 1024, // 128 MiB
  checkpointEverySegments: 3, // segments
  groupCommitWindowMs: 0, // ms; 0 = next event-loop turn
  maxFutureMs: 10 * MINUTE_MS, // 10 minutes
  autoCompact: true,
  maintenanceIntervalMs: MINUTE_MS, // 1 minute
  compactionSliceMs: 4, // ms: a request waits at most about this long behind compaction
  now: () => Date.now(),
});

/** Thrown by openTsdb when an option is out of range. */
export class InvalidTsdbOptionsError extends Error {
  constructor(
    readonly option: string,
    detail: string,
  ) {
    super(`invalid tsdb option ${option}: ${detail}`);
    this.name = "InvalidTsdbOptionsError";
  }
}

function intIn(o: TsdbOptions, key: keyof TsdbOptions, min: number, max: number): void {
  const v = o[key];
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min || v > max) {
    throw new InvalidTsdbOptionsError(key, `must be an integer in [${min}, ${max}], got ${String(v)}`);
  }
}

/** Merges overrides onto the defaults, validates and freezes the result. */
export function resolveTsdbOptions(overrides: Partial<TsdbOptions> = {}): TsdbOptions {
  const defined = Object.fromEntries(Object.entries(overrides).filter(([, v]) => v !== undefined));
  const o = { ...defaultTsdbOptions, ...defined } as TsdbOptions;
  intIn(o, "blockRangeMs", MINUTE_MS, 31 * DAY_MS);
  intIn(o, "retentionMs", o.blockRangeMs, 100 * 365 * DAY_MS);
  intIn(o, "outOfOrderWindowMs", 0, o.blockRangeMs);
  // Buckets are aligned to the epoch, not to blocks: a bucket split by a block boundary is joined on read.
  if (o.rollupResolutionMs !== 0) intIn(o, "rollupResolutionMs", 1000, DAY_MS);
  // The chunk count lives in a Uint16 and a head chunk slot holds at most a few hundred worst-case samples.
  intIn(o, "rollupMemoryBytes", 0, Number.MAX_SAFE_INTEGER);
  intIn(o, "chunkTargetSamples", 2, 1000);
  intIn(o, "walSegmentBytes", 64 * 1024, 1024 * 1024 * 1024);
  intIn(o, "checkpointEverySegments", 1, 1000);
  intIn(o, "groupCommitWindowMs", 0, 1000);
  intIn(o, "maxFutureMs", 0, DAY_MS);
  intIn(o, "maintenanceIntervalMs", 1000, DAY_MS);
  intIn(o, "compactionSliceMs", 0, 1000);
  intIn(o, "maxBlockDurationMs", 0, o.retentionMs);
  if (typeof o.now !== "function") throw new InvalidTsdbOptionsError("now", "must be a function");
  if (typeof o.rollupGroupLabel !== "string")
    throw new InvalidTsdbOptionsError("rollupGroupLabel", "must be a string");
  if (typeof o.mergeBlocks !== "boolean")
    throw new InvalidTsdbOptionsError("mergeBlocks", "must be a boolean");
  if (typeof o.autoCompact !== "boolean")
    throw new InvalidTsdbOptionsError("autoCompact", "must be a boolean");
  return Object.freeze(o);
}
