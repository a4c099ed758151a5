/**
 * The store: opens blocks, replays checkpoint + WAL into the head, hands out appenders and queriers,
 * and cuts the head into blocks, checkpoints the WAL and applies retention.
 *
 * Compaction runs synchronously once no WAL write is in flight: nothing can be applied to the head
 * while a block is cut, the head truncated and the checkpoint written, which keeps the
 * "which WAL records are already in a block" bookkeeping exact. It blocks the event loop for the
 * duration of one cut. TODO(tsdb): move block writing off the event loop.
 */
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from "node:fs";
import { basename, join } from "node:path";
import type { Appender, AppendRefusal, Labels, Querier, Storage } from "../storage/interface.ts";
import { rollupsOf } from "../storage/rollups.ts";
import type { Batch } from "./appender.ts";
import { TsdbAppender } from "./appender.ts";
import {
  Block,
  type BlockMeta,
  type BlockSeries,
  ByteWriter,
  fsyncDir,
  writeBlock,
  writeDurable,
} from "./block.ts";
import { encodeChunks } from "./chunk.ts";
import { mergeBlocks, mergeRanges, planMerge } from "./compactor.ts";
import { TsdbClosedError } from "./errors.ts";
import { Head } from "./head.ts";
import { compareLabels } from "./labels.ts";
import type { TsdbOptions } from "./options.ts";
import { TsdbQuerier } from "./querier.ts";
import { encodeRollups } from "./rollup-codec.ts";
import {
  frameCompactSamples,
  frameSeriesRecord,
  type RecordVisitor,
  replayFile,
  scanWal,
  segmentName,
  Wal,
} from "./wal.ts";

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
  #timer: NodeJS.Timeout | undefined;
  #replayMs = 0;
  #replayed = 0;

  constructor(dir: string, opts: TsdbOptions) {
    this.#dir = dir;
    this.opts = opts;
    this.head = new Head(opts);
    this.#blocksDir = join(dir, "blocks");
    this.#walDir = join(dir, "wal");
    mkdirSync(this.#blocksDir, { recursive: true });
    mkdirSync(this.#walDir, { recursive: true });
    this.#loadBlocks();
    const t0 = performance.now();
    const next = this.#replay();
    this.#replayMs = performance.now() - t0;
    this.#wal = new Wal(this.#walDir, next, opts.walSegmentBytes, opts.groupCommitWindowMs);
    if (opts.autoCompact) {
      this.#timer = setInterval(() => void this.compact().catch(() => {}), opts.maintenanceIntervalMs);
      this.#timer.unref();
    }
  }

  get options(): TsdbOptions {
    return this.opts;
  }

  #loadBlocks(): void {
    for (const e of readdirSync(this.#blocksDir)) {
      const p = join(this.#blocksDir, e);
      if (e.endsWith(".tmp")) rmSync(p, { recursive: true, force: true });
      else if (existsSync(join(p, "meta.json"))) this.#blocks.push(new Block(p));
    }
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

  /** Replays checkpoint and segments; returns the number of the next segment to write. */
  #replay(): number {
    const { segments, checkpoint } = scanWal(this.#walDir);
    const head = this.head;
    const alias = new Map<number, number>();
    let skip = Number.NEGATIVE_INFINITY;
    const v: RecordVisitor = {
      series: (ref, labels) => {
        const found = head.reg.find(labels);
        if (found >= 0 && found !== ref) alias.set(ref, found);
        else head.walLogged[head.getOrCreate(labels, ref)] = 1;
      },
      sample: (ref, t, hi, lo) => {
        const r = alias.get(ref) ?? ref;
        if (t < skip || !head.reg.isAlive(r)) return;
        head.append(r, t, hi, lo, true);
        this.#replayed++;
      },
    };
    let last = 0;
    if (checkpoint !== undefined) {
      skip = this.#skipBefore(checkpoint);
      const dir = join(this.#walDir, `checkpoint.${segmentName(checkpoint)}`);
      replayFile(join(dir, segmentName(0)), v);
      this.#lastCheckpoint = checkpoint;
      last = checkpoint;
    }
    for (let i = 0; i < segments.length; i++) {
      skip = this.#skipBefore(segments[i]);
      last = segments[i];
      if (!replayFile(join(this.#walDir, segmentName(segments[i])), v)) {
        // A torn record ends the log: later segments cannot be ordered after it.
        for (const s of segments.slice(i + 1)) rmSync(join(this.#walDir, segmentName(s)), { force: true });
        break;
      }
    }
    return last + 1;
  }

  appender(): Appender {
    if (this.closed) throw new TsdbClosedError();
    return new TsdbAppender(this);
  }

  querier(): Querier {
    if (this.closed) throw new TsdbClosedError();
    return new TsdbQuerier(this.head, this.#blocks.slice());
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
    return this.#wal.log(rec, () => {
      const refused: Partial<Record<AppendRefusal, number>> = {};
      let accepted = 0;
      for (let i = 0; i < batch.n; i++) {
        const o = head.append(batch.refs[i], batch.ts[i], batch.his[i], batch.los[i]);
        if (o === "appended" || o === "duplicate") accepted++;
        else refused[o] = (refused[o] ?? 0) + 1;
      }
      this.#maybeScheduleCompaction();
      return { accepted, refused };
    });
  }

  #headDue(): boolean {
    return this.head.dataMaxT - this.head.dataMinT > 1.5 * this.opts.blockRangeMs;
  }

  #maybeScheduleCompaction(): void {
    if (!this.opts.autoCompact || this.#compacting) return;
    const segsSince = this.#wal.segment - this.#lastCheckpoint - 1;
    if (this.#headDue() || segsSince >= this.opts.checkpointEverySegments) {
      setImmediate(() => void this.compact().catch(() => {}));
    }
  }

  compact(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.#compacting ??= (async () => {
      await this.#wal.idle();
      if (this.closed) return;
      this.#compactSync();
      await this.#mergeDue();
    })().finally(() => {
      this.#compacting = null;
    });
    return this.#compacting;
  }

  #compactSync(): void {
    const R = this.opts.blockRangeMs;
    const head = this.head;
    const due = this.#headDue();
    const segsSince = this.#wal.segment - this.#lastCheckpoint - 1;
    if (due || segsSince >= this.opts.checkpointEverySegments) {
      const sealed = this.#wal.rotate();
      while (this.#headDue()) {
        const cut = Math.floor(head.dataMinT / R) * R + R;
        this.#cutBlock(cut, sealed);
      }
      this.#checkpoint(sealed);
    }
    this.applyRetention();
  }

  /**
   * Writes every head sample below `before` into one block, then drops them from the head. Series
   * are sorted by labels first and their chunks encoded one series at a time while the block is
   * written, so the cut holds one series' samples, not the whole block's.
   */
  #cutBlock(before: number, walSegment: number): void {
    const head = this.head;
    const refs = Array.from(head.reg.allPostings()).filter((ref) => head.hasDataBefore(ref, before));
    const res = this.opts.rollupResolutionMs;
    const series: BlockSeries[] = refs.map((ref) => ({
      labels: head.reg.labels(ref),
      data: () => {
        const s = head.samples(ref, Number.NEGATIVE_INFINITY, before - 1);
        return {
          chunks: encodeChunks(s.t, s.v, s.t.length, this.opts.chunkTargetSamples),
          rollups: res > 0 ? encodeRollups(rollupsOf(s.t, s.v, res)) : undefined,
        };
      },
    }));
    series.sort((a, b) => compareLabels(a.labels, b.labels));
    const meta = writeBlock(this.#blocksDir, series, before, walSegment, res, this.opts.rollupGroupLabel);
    if (meta) {
      this.#blocks.push(new Block(join(this.#blocksDir, meta.name)));
      this.#sortBlocks();
    }
    head.truncate(before);
  }

  /**
   * Merges blocks level by level (compactor.ts) while a group is due. Windows are merged once they
   * end an out-of-order window before the head's minimum valid time, so late samples rarely land in
   * an already merged range. Each merge yields to the event loop between series batches; close()
   * stops it, leaving the sources in place.
   */
  async #mergeDue(): Promise<void> {
    if (!this.opts.mergeBlocks) return;
    const ranges = mergeRanges(this.opts.blockRangeMs, this.opts.retentionMs);
    for (;;) {
      if (this.#closing) return;
      const safeBefore = this.head.minValidT - this.opts.outOfOrderWindowMs;
      const group = planMerge(this.#blocks, ranges, safeBefore);
      if (!group) return;
      const sources = group.slice().sort((a, b) => a.meta.minTime - b.meta.minTime);
      const pause = () =>
        new Promise<void>((resolve, reject) =>
          setImmediate(() => (this.#closing ? reject(new TsdbClosedError()) : resolve())),
        );
      let meta: BlockMeta | undefined;
      try {
        meta = await mergeBlocks(
          this.#blocksDir,
          sources,
          this.opts.rollupResolutionMs,
          this.opts.chunkTargetSamples,
          pause,
          this.opts.rollupGroupLabel,
        );
      } catch (err) {
        if (err instanceof TsdbClosedError) return;
        throw err;
      }
      const merged = meta ? [new Block(join(this.#blocksDir, meta.name))] : [];
      this.#blocks = this.#blocks.filter((b) => !sources.includes(b)).concat(merged);
      this.#sortBlocks();
      for (const b of sources) b.delete();
    }
  }

  /** Writes checkpoint.N (series + head samples) covering segments ≤ N, then drops them. */
  #checkpoint(upTo: number): void {
    const head = this.head;
    const name = `checkpoint.${segmentName(upTo)}`;
    const tmp = join(this.#walDir, `${name}.tmp`);
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp);
    const w = new ByteWriter();
    const refs = Array.from(head.reg.allPostings());
    for (let i = 0; i < refs.length; i += 1000) {
      const part = refs.slice(i, i + 1000).map((ref) => ({ ref, labels: head.reg.labels(ref) }));
      frameSeriesRecord(w, part);
    }
    for (const ref of refs) {
      head.walLogged[ref] = 1;
      const s = head.samples(ref, Number.NEGATIVE_INFINITY, Number.POSITIVE_INFINITY);
      if (s.t.length === 0) continue;
      const u = new Uint32Array(s.v.buffer, s.v.byteOffset, s.v.length * 2);
      const his = new Uint32Array(s.t.length);
      const los = new Uint32Array(s.t.length);
      for (let k = 0; k < s.t.length; k++) {
        los[k] = u[2 * k];
        his[k] = u[2 * k + 1];
      }
      const rs = new Uint32Array(s.t.length).fill(ref);
      w.bytes32Raw(frameCompactSamples(s.t.length, rs, s.t, his, los));
    }
    writeDurable(join(tmp, segmentName(0)), w.finish());
    renameSync(tmp, join(this.#walDir, name));
    fsyncDir(this.#walDir);
    this.#wal.truncate(upTo, upTo);
    this.#lastCheckpoint = upTo;
  }

  applyRetention(nowMs = this.opts.now()): number {
    const limit = nowMs - this.opts.retentionMs;
    const keep: Block[] = [];
    let dropped = 0;
    for (const b of this.#blocks) {
      if (b.meta.maxTime < limit) {
        b.delete();
        dropped++;
      } else keep.push(b);
    }
    this.#blocks = keep;
    // Memory the dropped blocks held may now fit older blocks' rollups.
    if (dropped > 0) this.#sortBlocks();
    return dropped;
  }

  async flush(): Promise<void> {
    await this.#wal.idle();
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
  }
}
