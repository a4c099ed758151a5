/**
 * The store: opens blocks, replays checkpoint + WAL into the head, hands out appenders and queriers,
 * and cuts the head into blocks, checkpoints the WAL and applies retention.
 *
 * Compaction shares the event loop with requests in slices of a few milliseconds (`#slicer`): the
 * head is cut into blocks, the WAL checkpointed and blocks merged one series at a time, while
 * queries and in-order appends go on. What keeps the "which WAL records are already in a block"
 * bookkeeping exact is the cut gate: from before the WAL is sealed until the last cut has truncated
 * the head, a commit holding a sample older than the last cut line is applied (and acknowledged)
 * only after it, so no sample lands below a line whose block is being written. Such samples are
 * over an hour late (the line trails the newest sample by at least half a block range), so in
 * practice only backfills wait.
 */
import {
  constants,
  existsSync,
  linkSync,
  mkdirSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
} from "node:fs";
import { copyFile, mkdir, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import type { Logger } from "pino";
import type { Appender, AppendRefusal, Labels, Querier, Storage } from "../storage/interface.ts";
import { rollupsOf } from "../storage/rollups.ts";
import { Batch, TsdbAppender } from "./appender.ts";
import {
  Block,
  type BlockMeta,
  BlockWriter,
  BufferedFile,
  ByteWriter,
  fsyncDir,
  writeDurable,
} from "./block.ts";
import { encodeChunks } from "./chunk.ts";
import { mergeBlocks, mergeRanges, planMerge } from "./compactor.ts";
import { blockBytes, blockSamples, type Damage, type DamageKind } from "./damage.ts";
import { TsdbClosedError } from "./errors.ts";
import { Head } from "./head.ts";
import type { TsdbGaugeSource, TsdbMetrics } from "./instrumentation.ts";
import { compareLabels } from "./labels.ts";
import type { TsdbOptions } from "./options.ts";
import { TsdbQuerier } from "./querier.ts";
import { encodeRollups } from "./rollup-codec.ts";
import { checkTsdbFormat, readTsdbFormat, TSDB_FORMAT, VERSION_FILE, versionFileText } from "./version.ts";
import {
  frameCompactSamples,
  frameSeriesRecord,
  type RecordVisitor,
  replayFile,
  scanWal,
  segmentName,
  Wal,
  walFileDamage,
  walFilesUpTo,
} from "./wal.ts";

/**
 * Samples per record of a checkpoint: a damaged record loses all of them (docs/operations.md), so
 * records stay about the size of a live commit's (~5–7 KB) rather than 8,192 samples, which put most
 * of a small store's checkpoint in one record. Framing costs ~10 bytes a record.
 */
const CHECKPOINT_RECORD_SAMPLES = 1024;
/** Series per series record of a checkpoint: a damaged one orphans every sample of its series. */
const CHECKPOINT_RECORD_SERIES = 128;

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

export class TsdbImpl implements Tsdb {
  readonly head: Head;
  readonly opts: TsdbOptions;
  closed = false;
  #closing = false;
  readonly spareBatches: Batch[] = [];
  readonly #dir: string;
  readonly #blocksDir: string;
  readonly #walDir: string;
  #blocks: Block[] = [];
  #wal: Wal;
  #lastCheckpoint = 0;
  #compacting: Promise<void> | null = null;
  /** While the head is being cut: samples below `before` wait for `done` (see the header). */
  #cutGate: { readonly before: number; readonly done: Promise<void> } | null = null;
  #timer: NodeJS.Timeout | undefined;
  #replayMs = 0;
  #replayed = 0;
  #replayedSegments = 0;
  readonly #metrics: TsdbMetrics | undefined;
  readonly #log: Logger;
  readonly #blockSizes = new WeakMap<Block, number>();

  constructor(dir: string, opts: TsdbOptions, log: Logger, metrics?: TsdbMetrics) {
    this.#metrics = metrics;
    this.#log = log;
    this.#dir = dir;
    this.opts = opts;
    this.head = new Head(opts);
    this.#blocksDir = join(dir, "blocks");
    this.#walDir = join(dir, "wal");
    // Before anything is created, replayed or deleted: a newer build's files stay as they are.
    checkTsdbFormat(dir);
    mkdirSync(this.#blocksDir, { recursive: true });
    mkdirSync(this.#walDir, { recursive: true });
    const found = readTsdbFormat(dir);
    if (
      !existsSync(join(dir, VERSION_FILE)) ||
      found.wal !== TSDB_FORMAT.wal ||
      found.block !== TSDB_FORMAT.block
    )
      writeDurable(join(dir, VERSION_FILE), Buffer.from(versionFileText()));
    this.#loadBlocks();
    const t0 = performance.now();
    const next = this.#replay();
    this.#replayMs = performance.now() - t0;
    this.#wal = new Wal(this.#walDir, next, opts.walSegmentBytes, opts.groupCommitWindowMs);
    if (metrics) {
      this.#wal.observer = {
        flushed: (bytes, seconds) => {
          metrics.walBytes.inc(bytes);
          metrics.walFsync.observe(seconds);
        },
        failed: () => metrics.walFailures.inc(),
      };
    }
    if (opts.autoCompact) {
      this.#timer = setInterval(() => this.#compactInBackground("timer"), opts.maintenanceIntervalMs);
      this.#timer.unref();
    }
  }

  /**
   * A compaction nobody awaits (timer, after a commit): its failure is logged here (and counted by
   * #measured as a failed step); the next tick tries again.
   */
  #compactInBackground(trigger: "timer" | "commit"): void {
    this.compact().catch((err: unknown) => {
      if (err instanceof TsdbClosedError) return;
      this.#metrics?.backgroundErrors.inc({ task: "compaction" });
      this.#log.error(
        { err, trigger },
        "tsdb background compaction failed; retried at the next maintenance tick",
      );
    });
  }

  /**
   * Logs one damaged unit at error level (a torn tail at warn: a write the crash interrupted, never
   * acknowledged) and counts it with the samples it dropped.
   */
  readonly #damaged = (d: Damage): void => {
    const fields = {
      kind: d.kind,
      file: d.file,
      offset: d.offset,
      bytes: d.bytes,
      samplesDropped: d.samples ?? "unknown",
      detail: d.detail,
    };
    if (d.kind === "wal_torn_tail")
      this.#log.warn(fields, "tsdb: torn WAL tail truncated (an unacknowledged write)");
    else this.#log.error(fields, `tsdb: damaged ${d.kind.replace("_", " ")} dropped`);
    this.#metrics?.corruptions.inc({ kind: d.kind });
    if (d.samples) this.#metrics?.droppedSamples.inc({ kind: d.kind }, d.samples);
  };

  get options(): TsdbOptions {
    return this.opts;
  }

  #openBlock(dir: string): Block {
    return new Block(dir, { onDamage: this.#damaged });
  }

  #loadBlocks(): void {
    const refused: { dir: string; err: unknown }[] = [];
    for (const e of readdirSync(this.#blocksDir)) {
      const p = join(this.#blocksDir, e);
      if (e.endsWith(".tmp")) rmSync(p, { recursive: true, force: true });
      else if (existsSync(join(p, "meta.json"))) {
        try {
          this.#blocks.push(this.#openBlock(p));
        } catch (err) {
          refused.push({ dir: p, err });
        }
      }
    }
    // A block whose meta.json or index is damaged is left out (and left on disk for the operator),
    // not the whole store: the others, the WAL and new writes go on.
    const sources = new Set(this.#blocks.flatMap((b) => b.meta.sources ?? []));
    for (const { dir, err } of refused) {
      if (sources.has(basename(dir))) continue; // already merged into a sound block; deleted below
      this.#damaged({
        kind: "block",
        file: dir,
        offset: 0,
        bytes: blockBytes(dir),
        samples: blockSamples(dir),
        detail: `block left out: ${(err as Error).message}`,
      });
    }
    for (const { dir } of refused.filter((r) => sources.has(basename(r.dir))))
      rmSync(dir, { recursive: true, force: true });
    // A crash after a merged block was renamed into place but before its sources were deleted.
    const merged = new Set(this.#blocks.flatMap((b) => b.meta.sources ?? []));
    const stale = (b: Block) => merged.has(basename(b.dir));
    for (const b of this.#blocks.filter(stale)) b.delete();
    this.#blocks = this.#blocks.filter((b) => !stale(b));
    this.#sortBlocks();
    for (const b of this.#blocks) this.head.minValidT = Math.max(this.head.minValidT, b.meta.coversBefore);
  }

  /** Keeps the block list in time order and the newest blocks' rollups in memory, within budget. */
  #sortBlocks(): void {
    this.#blocks.sort((a, b) => a.meta.minTime - b.meta.minTime || a.meta.coversBefore - b.meta.coversBefore);
    let budget = this.opts.rollupMemoryBytes;
    for (let i = this.#blocks.length - 1; i >= 0; i--) {
      const b = this.#blocks[i];
      const size = b.rollupsBytes();
      if (size > 0 && size <= budget) {
        b.holdRollups();
        budget -= size;
      } else {
        b.releaseRollups();
        // Newest first without holes: an older block never holds memory a newer one could not get.
        if (size > 0) budget = 0;
      }
    }
  }

  /** Samples of WAL segment `seg` below this time are already in a block. */
  #skipBefore(seg: number): number {
    let t = Number.NEGATIVE_INFINITY;
    for (const b of this.#blocks)
      if (b.meta.walSegment >= seg && b.meta.coversBefore > t) t = b.meta.coversBefore;
    return t;
  }

  /**
   * Replays checkpoint and segments; returns the number of the next segment to write. A damaged
   * record is skipped (logged and counted) and replay goes on with the next one; only the newest
   * segment's tail is cut off (a torn write). Samples whose series record was damaged cannot be
   * given their labels: they are dropped and counted with it.
   */
  #replay(): number {
    const { segments, checkpoint } = scanWal(this.#walDir);
    this.#replayedSegments = segments.length + (checkpoint === undefined ? 0 : 1);
    const head = this.head;
    const alias = new Map<number, number>();
    let skip = Number.NEGATIVE_INFINITY;
    let orphans = 0;
    const v: RecordVisitor = {
      series: (ref, labels) => {
        const found = head.reg.find(labels);
        if (found >= 0 && found !== ref) alias.set(ref, found);
        else head.walLogged[head.getOrCreate(labels, ref)] = 1;
      },
      sample: (ref, t, hi, lo) => {
        const r = alias.get(ref) ?? ref;
        if (t < skip) return;
        if (!head.reg.isAlive(r)) {
          orphans++;
          return;
        }
        head.append(r, t, hi, lo, true);
        this.#replayed++;
      },
    };
    /** Where a damaged series record was first found: orphaned samples are counted under its kind. */
    let seriesLost: DamageKind | undefined;
    const replay = (path: string, kind: "wal_record" | "checkpoint_record", newest: boolean) => {
      const found = walFileDamage(replayFile(path, v, newest), path, kind, newest);
      if (found.seriesLost) seriesLost ??= kind;
      for (const d of found.damage) this.#damaged(d);
    };
    let last = 0;
    if (checkpoint !== undefined) {
      skip = this.#skipBefore(checkpoint);
      const dir = join(this.#walDir, `checkpoint.${segmentName(checkpoint)}`);
      replay(join(dir, segmentName(0)), "checkpoint_record", false);
      this.#lastCheckpoint = checkpoint;
      last = checkpoint;
    }
    for (let i = 0; i < segments.length; i++) {
      skip = this.#skipBefore(segments[i]);
      last = segments[i];
      replay(join(this.#walDir, segmentName(segments[i])), "wal_record", i === segments.length - 1);
    }
    if (orphans > 0) {
      const kind = seriesLost ?? "wal_record";
      this.#log.error(
        { kind, samplesDropped: orphans },
        "tsdb: samples dropped because their series record was damaged (their labels are unknown)",
      );
      this.#metrics?.droppedSamples.inc({ kind }, orphans);
    }
    return last + 1;
  }

  appender(): Appender {
    if (this.closed) throw new TsdbClosedError();
    return new TsdbAppender(this);
  }

  querier(): Querier {
    if (this.closed) throw new TsdbClosedError();
    return new TsdbQuerier(this.head, this.#blocks.slice(), this.#holdBlocks);
  }

  /**
   * Readers holding blocks (an iteration, a query worker reading them itself), per block: a block a
   * merge or retention replaced is deleted once no reader holds it, not when every reader has ended,
   * so a steady stream of overlapping queries cannot keep replaced blocks on disk.
   */
  readonly #holds = new Map<Block, number>();
  readonly #doomed = new Set<Block>();

  readonly #holdBlocks = (blocks: readonly Block[]): (() => void) => {
    for (const b of blocks) this.#holds.set(b, (this.#holds.get(b) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      for (const b of blocks) {
        const n = (this.#holds.get(b) ?? 1) - 1;
        if (n > 0) {
          this.#holds.set(b, n);
          continue;
        }
        this.#holds.delete(b);
        if (this.#doomed.delete(b)) b.delete();
      }
    };
  };

  /** Deletes a block no longer in the store's list, now or once no reader holds it. */
  #retire(b: Block): void {
    if (this.#holds.has(b) && !this.closed) this.#doomed.add(b);
    else b.delete();
  }

  commitBatch(batch: Batch): Promise<{ accepted: number; refused: Partial<Record<AppendRefusal, number>> }> {
    const head = this.head;
    const newSeries: { ref: number; labels: Labels }[] = [];
    for (const ref of batch.touched) {
      if (head.walLogged[ref] === 0) {
        head.walLogged[ref] = 1;
        newSeries.push({ ref, labels: head.reg.labels(ref) });
      }
    }
    let rec = frameCompactSamples(batch.n, batch.refs, batch.ts, batch.his, batch.los);
    if (newSeries.length > 0) {
      const w = new ByteWriter();
      frameSeriesRecord(w, newSeries);
      rec = Buffer.concat([w.finish(), rec]);
    }
    const apply = () => {
      const refused: Partial<Record<AppendRefusal, number>> = {};
      let accepted = 0;
      const oooBefore = head.ooo.samples;
      for (let i = 0; i < batch.n; i++) {
        const o = head.append(batch.refs[i], batch.ts[i], batch.his[i], batch.los[i]);
        if (o === "appended" || o === "duplicate") accepted++;
        else refused[o] = (refused[o] ?? 0) + 1;
      }
      const m = this.#metrics;
      if (m) {
        m.appended.inc(accepted);
        const ooo = head.ooo.samples - oooBefore;
        if (ooo > 0) m.outOfOrder.inc({ outcome: "accepted" }, ooo);
        if (refused.out_of_order) m.outOfOrder.inc({ outcome: "refused" }, refused.out_of_order);
      }
      this.#maybeScheduleCompaction();
      return { accepted, refused };
    };
    // Durable now, applied once no cut is writing the range it falls in (the gate may reopen for
    // the next compaction before this runs, hence the re-check).
    const applyPastGate = (): ReturnType<typeof apply> | Promise<ReturnType<typeof apply>> => {
      const gate = this.#cutGate;
      if (gate && hasSampleBefore(batch, gate.before)) return gate.done.then(applyPastGate);
      return apply();
    };
    return this.#wal.log(rec, applyPastGate);
  }

  #headDue(): boolean {
    return this.head.dataMaxT - this.head.dataMinT > 1.5 * this.opts.blockRangeMs;
  }

  #maybeScheduleCompaction(): void {
    if (!this.opts.autoCompact || this.#compacting) return;
    const segsSince = this.#wal.segment - this.#lastCheckpoint - 1;
    if (this.#headDue() || segsSince >= this.opts.checkpointEverySegments) {
      setImmediate(() => this.#compactInBackground("commit"));
    }
  }

  compact(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.#compacting ??= (async () => {
      await this.#compactHead();
      await this.#mergeDue();
    })().finally(() => {
      this.#compacting = null;
    });
    return this.#compacting;
  }

  /** The cut lines due now, ascending: each block range the head holds 1.5 ranges beyond. */
  #cutLines(): number[] {
    const R = this.opts.blockRangeMs;
    const lines: number[] = [];
    const maxT = this.head.dataMaxT;
    for (let minT = this.head.dataMinT; maxT - minT > 1.5 * R; ) {
      minT = Math.floor(minT / R) * R + R;
      lines.push(minT);
    }
    return lines;
  }

  async #compactHead(): Promise<void> {
    const lines = this.#cutLines();
    if (
      lines.length > 0 ||
      this.#wal.segment - this.#lastCheckpoint - 1 >= this.opts.checkpointEverySegments
    ) {
      let open = () => {};
      const done = new Promise<void>((r) => {
        open = r;
      });
      // Closed before the WAL is sealed, so every sample below the lines is in the head by then.
      this.#cutGate = { before: lines.at(-1) ?? Number.NEGATIVE_INFINITY, done };
      let sealed: number;
      try {
        await this.#wal.idle();
        if (this.closed) return;
        sealed = this.#wal.rotate();
        for (const line of lines) {
          if (this.head.dataMinT >= line) continue; // a gap: nothing below this line
          if (!(await this.#measured(this.#cutBlock(line, sealed), "compactions", "compactionDuration")))
            return;
        }
      } finally {
        this.#cutGate = null;
        open();
      }
      if (!(await this.#measured(this.#checkpoint(sealed), "checkpoints"))) return;
    }
    this.applyRetention();
  }

  /**
   * A pacer for long work on the event loop: `due()` says a slice (compactionSliceMs) has passed
   * since the last yield, `yield()` gives the loop back to requests and resolves false when the
   * store is closing.
   */
  #slicer(sliceMs = this.opts.compactionSliceMs): { due(): boolean; yield(): Promise<boolean> } {
    let since = performance.now();
    return {
      due: () => performance.now() - since >= sliceMs,
      yield: () =>
        new Promise<boolean>((resolve) =>
          setImmediate(() => {
            since = performance.now();
            resolve(!this.#closing);
          }),
        ),
    };
  }

  /**
   * Writes every head sample below `before` into one block, then drops them from the head. Series
   * are sorted by labels first and their chunks encoded one series at a time, yielding between
   * series; the samples below `before` cannot change meanwhile (the cut gate). Returns false,
   * leaving the head whole and no block, when the store closes first.
   */
  async #cutBlock(before: number, walSegment: number): Promise<boolean> {
    const head = this.head;
    const refs = Array.from(head.reg.allPostings()).filter((ref) => head.hasDataBefore(ref, before));
    const res = this.opts.rollupResolutionMs;
    const series = refs.map((ref) => ({ ref, labels: head.reg.labels(ref) }));
    series.sort((a, b) => compareLabels(a.labels, b.labels));
    const slicer = this.#slicer();
    const w = new BlockWriter(this.#blocksDir, this.opts.rollupGroupLabel);
    try {
      for (const { ref, labels } of series) {
        const s = head.samples(ref, Number.NEGATIVE_INFINITY, before - 1);
        w.add(
          labels,
          encodeChunks(s.t, s.v, s.t.length, this.opts.chunkTargetSamples),
          res > 0 ? encodeRollups(rollupsOf(s.t, s.v, res)) : undefined,
        );
        if (slicer.due() && !(await slicer.yield())) return false;
      }
      const meta = w.finish({ coversBefore: before, walSegment, rollupResolutionMs: res });
      if (meta) {
        this.#blocks.push(this.#openBlock(join(this.#blocksDir, meta.name)));
        this.#sortBlocks();
      }
      head.truncate(before);
      return true;
    } finally {
      w.abort();
    }
  }

  /**
   * Merges blocks level by level (compactor.ts) while a group is due. Windows are merged once they
   * end an out-of-order window before the head's minimum valid time, so late samples rarely land in
   * an already merged range. Each merge yields to the event loop every few ms, between series; close()
   * stops it, leaving the sources in place.
   */
  async #mergeDue(): Promise<void> {
    if (!this.opts.mergeBlocks) return;
    const ranges = mergeRanges(this.opts.blockRangeMs, this.opts.retentionMs, this.opts.maxBlockDurationMs);
    for (;;) {
      if (this.#closing) return;
      const safeBefore = this.head.minValidT - this.opts.outOfOrderWindowMs;
      const group = planMerge(this.#blocks, ranges, safeBefore);
      if (!group) return;
      const sources = group.slice().sort((a, b) => a.meta.minTime - b.meta.minTime);
      const slicer = this.#slicer();
      const pause = () => {
        if (!slicer.due()) return undefined;
        return slicer.yield().then((open) => {
          if (!open) throw new TsdbClosedError();
        });
      };
      let meta: BlockMeta | undefined;
      try {
        meta = await this.#measured(
          mergeBlocks(
            this.#blocksDir,
            sources,
            this.opts.rollupResolutionMs,
            this.opts.chunkTargetSamples,
            pause,
            this.opts.rollupGroupLabel,
          ),
          "merges",
          "mergeDuration",
        );
      } catch (err) {
        if (err instanceof TsdbClosedError) return;
        throw err;
      }
      const merged = meta ? [this.#openBlock(join(this.#blocksDir, meta.name))] : [];
      this.#blocks = this.#blocks.filter((b) => !sources.includes(b)).concat(merged);
      this.#sortBlocks();
      for (const b of sources) this.#retire(b);
    }
  }

  /**
   * Writes checkpoint.N (series + head samples) covering segments ≤ N, then drops them; yields
   * between series. Appends go on meanwhile: a sample they add lies in a later segment, so whether
   * the checkpoint also holds it or not, replay gets it once (an identical sample is a no-op).
   * Returns false, writing nothing, when the store closes first.
   */
  async #checkpoint(upTo: number): Promise<boolean> {
    const head = this.head;
    const name = `checkpoint.${segmentName(upTo)}`;
    const tmp = join(this.#walDir, `${name}.tmp`);
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp);
    // Streamed to the file through a 1 MB buffer: built whole in memory, the checkpoint (every head
    // sample) doubled a buffer up to tens of MB, garbage held until a full collection.
    const file = new BufferedFile(join(tmp, segmentName(0)));
    let closed = false;
    const abandon = (): false => {
      if (!closed) file.close(false);
      closed = true;
      rmSync(tmp, { recursive: true, force: true });
      return false;
    };
    try {
      const refs = Array.from(head.reg.allPostings());
      for (let i = 0; i < refs.length; i += CHECKPOINT_RECORD_SERIES) {
        const part = refs
          .slice(i, i + CHECKPOINT_RECORD_SERIES)
          .map((ref) => ({ ref, labels: head.reg.labels(ref) }));
        const w = new ByteWriter();
        frameSeriesRecord(w, part);
        file.write(w.finish());
      }
      const slicer = this.#slicer();
      // Samples of many series go into one record (the format carries a ref per sample): a record,
      // its buffer and its CRC per series cost more than the samples of a series at 30 s.
      const b = new Batch();
      const flush = () => {
        if (b.n > 0) file.write(frameCompactSamples(b.n, b.refs, b.ts, b.his, b.los));
        b.n = 0;
      };
      for (const ref of refs) {
        if (slicer.due() && !(await slicer.yield())) return abandon();
        head.walLogged[ref] = 1;
        const s = head.samples(ref, Number.NEGATIVE_INFINITY, Number.POSITIVE_INFINITY);
        if (s.t.length === 0) continue;
        const u = new Uint32Array(s.v.buffer, s.v.byteOffset, s.v.length * 2);
        for (let k = 0; k < s.t.length; k++) {
          b.push(ref, s.t[k], u[2 * k + 1], u[2 * k]);
          if (b.n >= CHECKPOINT_RECORD_SAMPLES) flush();
        }
      }
      flush();
      closed = true;
      file.close(true);
    } catch (e) {
      abandon();
      throw e;
    }
    renameSync(tmp, join(this.#walDir, name));
    fsyncDir(this.#walDir);
    this.#wal.truncate(upTo, upTo);
    this.#lastCheckpoint = upTo;
    return true;
  }

  applyRetention(nowMs = this.opts.now()): number {
    const limit = nowMs - this.opts.retentionMs;
    const keep: Block[] = [];
    let dropped = 0;
    for (const b of this.#blocks) {
      if (b.meta.maxTime < limit) {
        this.#retire(b);
        dropped++;
      } else keep.push(b);
    }
    this.#blocks = keep;
    if (dropped > 0) this.#metrics?.retentionDeletions.inc(dropped);
    // Memory the dropped blocks held may now fit older blocks' rollups.
    if (dropped > 0) this.#sortBlocks();
    return dropped;
  }

  async flush(): Promise<void> {
    await this.#wal.idle();
  }

  async snapshot(dest: string): Promise<TsdbSnapshot> {
    if (this.closed || this.#closing) throw new TsdbClosedError();
    // Holds the compaction slot: a cut, checkpoint, merge or retention pass deletes the segments and
    // blocks being copied. A compaction due meanwhile runs at the next maintenance tick.
    while (this.#compacting) await this.#compacting.catch(() => {});
    let release = () => {};
    this.#compacting = new Promise<void>((r) => {
      release = r;
    });
    let unhold = () => {};
    try {
      await this.#wal.idle();
      if (this.closed) throw new TsdbClosedError();
      // Every commit acknowledged so far is durable in a segment ≤ sealed; later ones go to the next.
      const sealed = this.#wal.rotate();
      const timeMs = Date.now();
      const blocks = this.#blocks.slice();
      unhold = this.#holdBlocks(blocks);
      mkdirSync(dest);
      const files: SnapshotFile[] = [];
      const add = async (rel: string, from: string, link: boolean) => {
        const to = join(dest, rel);
        let linked = false;
        if (link) {
          try {
            linkSync(from, to);
            linked = true;
          } catch {
            // another file system, or links not allowed: copy instead
          }
        }
        if (!linked) await copyFile(from, to, constants.COPYFILE_FICLONE);
        files.push({ path: rel, bytes: statSync(to).size, linked });
      };
      await mkdir(join(dest, "blocks"));
      for (const b of blocks) {
        const name = basename(b.dir);
        await mkdir(join(dest, "blocks", name));
        // Block files are never written after the block is renamed into place: links are safe.
        for (const f of readdirSync(b.dir)) await add(join("blocks", name, f), join(b.dir, f), true);
      }
      // WAL files are copied: a replay truncates a torn tail in place, which must not reach the live store.
      await mkdir(join(dest, "wal"));
      const { checkpoint, segments } = walFilesUpTo(this.#walDir, sealed);
      if (checkpoint !== undefined) {
        const cp = `checkpoint.${segmentName(checkpoint)}`;
        await mkdir(join(dest, "wal", cp));
        for (const f of readdirSync(join(this.#walDir, cp)))
          await add(join("wal", cp, f), join(this.#walDir, cp, f), false);
      }
      for (const s of segments)
        await add(join("wal", segmentName(s)), join(this.#walDir, segmentName(s)), false);
      await writeFile(join(dest, VERSION_FILE), versionFileText());
      files.push({ path: VERSION_FILE, bytes: statSync(join(dest, VERSION_FILE)).size, linked: false });
      return { timeMs, files };
    } finally {
      unhold();
      this.#compacting = null;
      release();
    }
  }

  /**
   * Counts one compaction step by outcome and times it; a step the closing store stopped
   * (false, or TsdbClosedError) is neither.
   */
  async #measured<T>(
    step: Promise<T>,
    count: "compactions" | "checkpoints" | "merges",
    duration?: "compactionDuration" | "mergeDuration",
  ): Promise<T> {
    const m = this.#metrics;
    if (!m) return step;
    const t0 = performance.now();
    try {
      const r = await step;
      if (r !== false) {
        m[count].inc({ outcome: "ok" });
        if (duration) m[duration].observe((performance.now() - t0) / 1000);
      }
      return r;
    } catch (err) {
      if (!(err instanceof TsdbClosedError)) m[count].inc({ outcome: "failed" });
      throw err;
    }
  }

  /** What /metrics reads at scrape time. */
  gaugeSource(): TsdbGaugeSource {
    const head = this.head;
    const empty = head.dataMinT === Number.POSITIVE_INFINITY;
    const oldest = Math.min(this.#blocks[0]?.meta.minTime ?? Number.POSITIVE_INFINITY, head.dataMinT);
    let blockBytes = 0;
    for (const b of this.#blocks) {
      // Blocks are immutable: stat their files once, not on every scrape.
      let size = this.#blockSizes.get(b);
      if (size === undefined) {
        size = b.sizeBytes();
        this.#blockSizes.set(b, size);
      }
      blockBytes += size;
    }
    return {
      headSeries: head.reg.live,
      headChunks: head.chunkCount(),
      headSamples: head.inOrderSamples,
      headChunkBytes: head.chunkBytes(),
      blocks: this.#blocks.length,
      blockBytes,
      walSegment: this.#wal.segment,
      oldestSampleMs: Number.isFinite(oldest) ? oldest : undefined,
      newestSampleMs: empty ? undefined : head.dataMaxT,
    };
  }

  /**
   * Encoded chunk bytes per value of label `name` (the tenant label: per project), in the head's
   * memory and the blocks' chunks files. Index, rollups and WAL are not attributed: they are shared
   * or short-lived; docs/operations.md says what the figure is. One pass over the label's postings.
   */
  chunkBytesByLabel(name: string): Map<string, number> {
    const out = new Map<string, number>();
    const add = (v: string, n: number) => {
      if (n > 0) out.set(v, (out.get(v) ?? 0) + n);
    };
    for (const v of this.head.reg.labelValues(name))
      add(v, this.head.chunkBytesOf(this.head.reg.postings(name, v)));
    for (const b of this.#blocks)
      for (const v of b.labelValues(name)) add(v, b.chunkBytesOf(b.postings(name, v)));
    return out;
  }

  stats(): TsdbStats {
    let blockSamples = 0;
    let blockBytes = 0;
    let rollupHeldBytes = 0;
    for (const b of this.#blocks) {
      blockSamples += b.meta.numSamples;
      blockBytes += b.sizeBytes();
      if (b.rollupsHeld) rollupHeldBytes += b.rollupsBytes();
    }
    return {
      headSeries: this.head.reg.live,
      headSamples: this.head.inOrderSamples,
      oooSamples: this.head.ooo.samples,
      headChunkBytes: this.head.chunkBytes(),
      headMemoryBytes: this.head.memoryBytes(),
      blocks: this.#blocks.length,
      blockSamples,
      blockBytes,
      rollupHeldBytes,
      walSegment: this.#wal.segment,
      walFlushes: this.#wal.flushes,
      walCommits: this.#wal.commits,
      replayMs: this.#replayMs,
      replayedSamples: this.#replayed,
      replayedSegments: this.#replayedSegments,
    };
  }

  /** Directory the store lives in. */
  get dir(): string {
    return this.#dir;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    clearInterval(this.#timer);
    this.#closing = true;
    if (this.#compacting) await this.#compacting.catch(() => {});
    this.closed = true;
    await this.#wal.close();
    for (const b of this.#blocks) b.close();
    // Replaced while an iteration held them; a crash here instead leaves them for the next open
    // (merge sources) or the next retention pass.
    for (const b of this.#doomed) b.delete();
    this.#doomed.clear();
  }
}

/** True when the batch holds a sample older than `t` (ms). */
function hasSampleBefore(batch: Batch, t: number): boolean {
  const ts = batch.ts;
  for (let i = 0; i < batch.n; i++) if (ts[i] < t) return true;
  return false;
}
