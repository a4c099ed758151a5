/**
 * The store: opens blocks, replays checkpoint + WAL into the head (recovery.ts), hands out
 * appenders and queriers, and cuts the head into blocks (cut.ts), checkpoints the WAL
 * (checkpoint.ts), merges blocks (compactor.ts) and applies retention on its block list
 * (block-list.ts).
 *
 * Compaction shares the event loop with requests in slices of a few milliseconds (slicer.ts): the
 * head is cut into blocks, the WAL checkpointed and blocks merged one series at a time, while
 * queries and in-order appends go on. What keeps the "which WAL records are already in a block"
 * bookkeeping exact is the cut gate: from before the WAL is sealed until the last cut has truncated
 * the head, a commit holding a sample older than the last cut line is applied (and acknowledged)
 * only after it, so no sample lands below a line whose block is being written. Such samples are
 * over an hour late (the line trails the newest sample by at least half a block range), so in
 * practice only backfills wait.
 */
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "pino";
import type { Appender, AppendRefusal, Labels, Querier } from "../storage/interface.ts";
import type { Tsdb, TsdbSnapshot, TsdbStats } from "./api.ts";
import { type Batch, TsdbAppender } from "./appender.ts";
import { Block, type BlockMeta, ByteWriter, writeDurable } from "./block.ts";
import { BlockList } from "./block-list.ts";
import { writeCheckpoint } from "./checkpoint.ts";
import { mergeBlocks, mergeRanges, planMerge } from "./compactor.ts";
import { cutBlock, cutLines, hasSampleBefore } from "./cut.ts";
import type { DamageSink } from "./damage.ts";
import { TsdbClosedError } from "./errors.ts";
import { Head } from "./head.ts";
import { damageReporter, measured, type TsdbGaugeSource, type TsdbMetrics } from "./instrumentation.ts";
import type { TsdbOptions } from "./options.ts";
import { TsdbQuerier } from "./querier.ts";
import { loadBlocks, replayWal } from "./recovery.ts";
import { type Slicer, slicer } from "./slicer.ts";
import { writeSnapshot } from "./snapshot.ts";
import { checkTsdbFormat, readTsdbFormat, TSDB_FORMAT, VERSION_FILE, versionFileText } from "./version.ts";
import { frameCompactSamples, frameSeriesRecord, Wal } from "./wal.ts";

/**
 * Waits for a promise without taking over its failure: a compaction's failure is its starter's to
 * report (logged and counted by #compactInBackground, or thrown to whoever awaited compact()).
 */
const settled = (p: Promise<unknown>): Promise<void> =>
  p.then(
    () => {},
    () => {},
  );

export class TsdbImpl implements Tsdb {
  readonly head: Head;
  readonly opts: TsdbOptions;
  closed = false;
  #closing = false;
  readonly spareBatches: Batch[] = [];
  readonly #dir: string;
  readonly #blocksDir: string;
  readonly #walDir: string;
  readonly #blocks: BlockList;
  #wal: Wal;
  #lastCheckpoint = 0;
  #compacting: Promise<void> | null = null;
  /** While the head is being cut: samples below `before` wait for `done` (see the header). */
  #cutGate: { readonly before: number; readonly done: Promise<void> } | null = null;
  #timer: NodeJS.Timeout | undefined;
  readonly #replay: { readonly ms: number; readonly samples: number; readonly segments: number };
  readonly #metrics: TsdbMetrics | undefined;
  readonly #log: Logger;
  /** Logs and counts each damaged unit found (instrumentation.ts). */
  readonly #damaged: DamageSink;

  constructor(dir: string, opts: TsdbOptions, log: Logger, metrics?: TsdbMetrics) {
    this.#metrics = metrics;
    this.#log = log;
    this.#damaged = damageReporter(log, metrics);
    this.#dir = dir;
    this.opts = opts;
    this.head = new Head(opts);
    this.#blocks = new BlockList(opts.rollupMemoryBytes);
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
    this.#blocks.add(...loadBlocks(this.#blocksDir, this.#openBlock, this.#damaged, log));
    for (const b of this.#blocks.all)
      this.head.minValidT = Math.max(this.head.minValidT, b.meta.coversBefore);
    const t0 = performance.now();
    const r = replayWal(this.#walDir, this.head, this.#blocks.all, this.#damaged, log, metrics);
    this.#replay = { ms: performance.now() - t0, samples: r.samples, segments: r.segments };
    this.#lastCheckpoint = r.checkpoint;
    this.#wal = new Wal(this.#walDir, r.next, opts.walSegmentBytes, opts.groupCommitWindowMs);
    this.#wal.observer = {
      flushed: (bytes, seconds) => {
        metrics?.walBytes.inc(bytes);
        metrics?.walFsync.observe(seconds);
      },
      failed: (err) => {
        metrics?.walFailures.inc();
        this.#log.error({ err }, "tsdb: WAL write failed; the store refuses writes until restarted");
      },
    };
    if (opts.autoCompact) {
      this.#timer = setInterval(() => this.#compactInBackground("timer"), opts.maintenanceIntervalMs);
      this.#timer.unref();
    }
  }

  /**
   * A compaction nobody awaits (timer, after a commit): its failure is logged here (and counted by
   * `measured` as a failed step); the next tick tries again.
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

  readonly #openBlock = (dir: string): Block => new Block(dir, { onDamage: this.#damaged });

  get options(): TsdbOptions {
    return this.opts;
  }

  appender(): Appender {
    if (this.closed) throw new TsdbClosedError();
    return new TsdbAppender(this);
  }

  querier(): Querier {
    if (this.closed) throw new TsdbClosedError();
    return new TsdbQuerier(this.head, this.#blocks.all.slice(), this.#blocks.hold);
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

  #maybeScheduleCompaction(): void {
    if (!this.opts.autoCompact || this.#compacting) return;
    const segsSince = this.#wal.segment - this.#lastCheckpoint - 1;
    const headDue = this.head.dataMaxT - this.head.dataMinT > 1.5 * this.opts.blockRangeMs;
    if (headDue || segsSince >= this.opts.checkpointEverySegments) {
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

  /** A slicer for one compaction step: it stops when the store starts closing. */
  #slicer(): Slicer {
    return slicer(this.opts.compactionSliceMs, () => !this.#closing);
  }

  async #compactHead(): Promise<void> {
    const lines = cutLines(this.head.dataMinT, this.head.dataMaxT, this.opts.blockRangeMs);
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
          const install = (dir: string | undefined) => {
            if (dir) this.#blocks.add(this.#openBlock(dir));
          };
          const cut = cutBlock(this.head, this.#blocksDir, this.opts, line, sealed, this.#slicer(), install);
          if (!(await measured(this.#metrics, cut, "compactions", "compactionDuration"))) return;
        }
      } finally {
        this.#cutGate = null;
        open();
      }
      const checkpoint = writeCheckpoint(this.#walDir, this.head, sealed, this.#slicer()).then((written) => {
        if (!written) return false;
        this.#wal.truncate(sealed, sealed);
        this.#lastCheckpoint = sealed;
        return true;
      });
      if (!(await measured(this.#metrics, checkpoint, "checkpoints"))) return;
    }
    this.applyRetention();
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
      const group = planMerge(this.#blocks.all, ranges, safeBefore);
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
        const { rollupResolutionMs, chunkTargetSamples, rollupGroupLabel } = this.opts;
        const merge = mergeBlocks(
          this.#blocksDir,
          sources,
          rollupResolutionMs,
          chunkTargetSamples,
          pause,
          rollupGroupLabel,
        );
        meta = await measured(this.#metrics, merge, "merges", "mergeDuration");
      } catch (err) {
        if (err instanceof TsdbClosedError) return;
        throw err;
      }
      this.#blocks.replace(sources, meta ? [this.#openBlock(join(this.#blocksDir, meta.name))] : []);
    }
  }

  applyRetention(nowMs = this.opts.now()): number {
    const dropped = this.#blocks.dropBefore(nowMs - this.opts.retentionMs);
    if (dropped > 0) this.#metrics?.retentionDeletions.inc(dropped);
    return dropped;
  }

  async flush(): Promise<void> {
    await this.#wal.idle();
  }

  async snapshot(dest: string): Promise<TsdbSnapshot> {
    if (this.closed || this.#closing) throw new TsdbClosedError();
    // Holds the compaction slot: a cut, checkpoint, merge or retention pass deletes the segments and
    // blocks being copied. A compaction due meanwhile runs at the next maintenance tick.
    while (this.#compacting) await settled(this.#compacting);
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
      const blocks = this.#blocks.all.slice();
      unhold = this.#blocks.hold(blocks);
      const files = await writeSnapshot(dest, blocks, this.#walDir, sealed, this.#log);
      return { timeMs, files };
    } finally {
      unhold();
      this.#compacting = null;
      release();
    }
  }

  /** What /metrics reads at scrape time. */
  gaugeSource(): TsdbGaugeSource {
    const head = this.head;
    const empty = head.dataMinT === Number.POSITIVE_INFINITY;
    const oldest = Math.min(this.#blocks.all[0]?.meta.minTime ?? Number.POSITIVE_INFINITY, head.dataMinT);
    return {
      headSeries: head.reg.live,
      headChunks: head.chunkCount(),
      headSamples: head.inOrderSamples,
      headChunkBytes: head.chunkBytes(),
      blocks: this.#blocks.length,
      blockBytes: this.#blocks.sizeBytes(),
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
    this.#blocks.chunkBytesByLabel(name, add);
    return out;
  }

  stats(): TsdbStats {
    return {
      headSeries: this.head.reg.live,
      headSamples: this.head.inOrderSamples,
      oooSamples: this.head.ooo.samples,
      headChunkBytes: this.head.chunkBytes(),
      headMemoryBytes: this.head.memoryBytes(),
      ...this.#blocks.stats(),
      walSegment: this.#wal.segment,
      walFlushes: this.#wal.flushes,
      walCommits: this.#wal.commits,
      replayMs: this.#replay.ms,
      replayedSamples: this.#replay.samples,
      replayedSegments: this.#replay.segments,
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
    if (this.#compacting) await settled(this.#compacting);
    this.closed = true;
    await this.#wal.close();
    this.#blocks.close();
  }
}
