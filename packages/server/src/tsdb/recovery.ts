/**
 * Opening the store: the blocks found on disk (a damaged one left out, leftovers of an interrupted
 * write or merge removed) and the replay of checkpoint + WAL into the head. Everything removed or
 * dropped on the way is logged; damage is also counted (the caller's DamageSink).
 */
import { existsSync, readdirSync, rmSync } from "node:fs";
import { basename, join } from "node:path";
import type { Logger } from "pino";
import type { Block, BlockMeta } from "./block.ts";
import { blockBytes, blockSamples, type DamageKind, type DamageSink } from "./damage.ts";
import type { Head } from "./head.ts";
import type { TsdbMetrics } from "./instrumentation.ts";
import { type RecordVisitor, replayFile, scanWal, segmentName, walFileDamage } from "./wal.ts";

/**
 * The sound blocks in `blocksDir`, unsorted. A block whose meta.json or index is damaged is left out
 * (and left on disk for the operator), not the whole store: the others, the WAL and new writes go
 * on. Removed, each logged: `*.tmp` directories (a block write or delete a crash interrupted; the
 * WAL or the merge sources still hold their samples) and merge sources whose merged block is in place.
 */
export function loadBlocks(
  blocksDir: string,
  openBlock: (dir: string) => Block,
  damaged: DamageSink,
  log: Logger,
): Block[] {
  let blocks: Block[] = [];
  const refused: { dir: string; err: unknown }[] = [];
  for (const e of readdirSync(blocksDir)) {
    const p = join(blocksDir, e);
    if (e.endsWith(".tmp")) {
      log.info({ dir: p }, "tsdb: unfinished block directory removed (a write or delete the last run left)");
      rmSync(p, { recursive: true, force: true });
    } else if (existsSync(join(p, "meta.json"))) {
      try {
        blocks.push(openBlock(p));
      } catch (err) {
        refused.push({ dir: p, err });
      }
    }
  }
  const sources = new Set(blocks.flatMap((b) => b.meta.sources ?? []));
  for (const { dir, err } of refused) {
    if (sources.has(basename(dir))) continue; // already merged into a sound block; deleted below
    damaged({
      kind: "block",
      file: dir,
      offset: 0,
      bytes: blockBytes(dir),
      samples: blockSamples(dir),
      detail: `block left out: ${(err as Error).message}`,
    });
  }
  for (const { dir } of refused.filter((r) => sources.has(basename(r.dir)))) {
    log.info({ dir }, "tsdb: unreadable merge source removed (its merged block is in place)");
    rmSync(dir, { recursive: true, force: true });
  }
  // A crash after a merged block was renamed into place but before its sources were deleted.
  const stale = (b: Block) => sources.has(basename(b.dir));
  for (const b of blocks.filter(stale)) {
    log.info({ dir: b.dir }, "tsdb: merge source removed (its merged block is in place)");
    b.delete();
  }
  blocks = blocks.filter((b) => !stale(b));
  return blocks;
}

/** Samples of WAL segment `seg` below this time are already in one of `blocks`. */
export function skipBefore(
  blocks: readonly { readonly meta: Pick<BlockMeta, "walSegment" | "coversBefore"> }[],
  seg: number,
): number {
  let t = Number.NEGATIVE_INFINITY;
  for (const b of blocks) if (b.meta.walSegment >= seg && b.meta.coversBefore > t) t = b.meta.coversBefore;
  return t;
}

export interface Replayed {
  /** Number of the segment to write next. */
  readonly next: number;
  /** The checkpoint replayed (0 when there was none). */
  readonly checkpoint: number;
  readonly samples: number;
  /** WAL segments (the checkpoint counted as one) found to replay. */
  readonly segments: number;
}

/**
 * Replays checkpoint and segments into `head`. A damaged record is skipped (told to `damaged`) and
 * replay goes on with the next one; only the newest segment's tail is cut off (a torn write).
 * Samples whose series record was damaged cannot be given their labels: they are dropped, logged
 * and counted with it.
 */
export function replayWal(
  walDir: string,
  head: Head,
  blocks: readonly Block[],
  damaged: DamageSink,
  log: Logger,
  metrics: TsdbMetrics | undefined,
): Replayed {
  const { segments, checkpoint, removed } = scanWal(walDir);
  for (const path of removed)
    log.info({ path }, "tsdb: unfinished or superseded WAL checkpoint removed (its segments are replayed)");
  const alias = new Map<number, number>();
  let skip = Number.NEGATIVE_INFINITY;
  let orphans = 0;
  let samples = 0;
  const v: RecordVisitor = {
    series: (ref, labels) => {
      const found = head.reg.find(labels);
      if (found >= 0 && found !== ref) alias.set(ref, found);
      else head.walLogged[head.getOrCreate(labels, ref)] = 1;
    },
    sample: (ref, t, hi, lo) => {
      // Aliases exist only when a series record repeated labels under another ref: usually none, and
      // then no map lookup per sample.
      const r = alias.size === 0 ? ref : (alias.get(ref) ?? ref);
      if (t < skip) return;
      if (!head.reg.isAlive(r)) {
        orphans++;
        return;
      }
      head.append(r, t, hi, lo, true);
      samples++;
    },
  };
  /** Where a damaged series record was first found: orphaned samples are counted under its kind. */
  let seriesLost: DamageKind | undefined;
  const replay = (path: string, kind: "wal_record" | "checkpoint_record", newest: boolean) => {
    const found = walFileDamage(replayFile(path, v, newest), path, kind, newest);
    if (found.seriesLost) seriesLost ??= kind;
    for (const d of found.damage) damaged(d);
  };
  let last = 0;
  if (checkpoint !== undefined) {
    skip = skipBefore(blocks, checkpoint);
    const dir = join(walDir, `checkpoint.${segmentName(checkpoint)}`);
    replay(join(dir, segmentName(0)), "checkpoint_record", false);
    last = checkpoint;
  }
  for (let i = 0; i < segments.length; i++) {
    skip = skipBefore(blocks, segments[i]);
    last = segments[i];
    replay(join(walDir, segmentName(segments[i])), "wal_record", i === segments.length - 1);
  }
  if (orphans > 0) {
    const kind = seriesLost ?? "wal_record";
    log.error(
      { kind, samplesDropped: orphans },
      "tsdb: samples dropped because their series record was damaged (their labels are unknown)",
    );
    metrics?.droppedSamples.inc({ kind }, orphans);
  }
  return {
    next: last + 1,
    checkpoint: checkpoint ?? 0,
    samples,
    segments: segments.length + (checkpoint === undefined ? 0 : 1),
  };
}
