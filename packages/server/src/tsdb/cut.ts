/**
 * Cutting the head into blocks: which lines are due, and the cut itself, written one series at a
 * time while requests go on (the store's cut gate keeps the samples below the line still).
 */
import { join } from "node:path";
import type { Labels } from "../storage/interface.ts";
import { rollupsOf } from "../storage/rollups.ts";
import type { Batch } from "./appender.ts";
import { type BlockMeta, BlockWriter } from "./block.ts";
import { encodeChunks } from "./chunk.ts";
import type { Head } from "./head.ts";
import { compareLabels } from "./labels.ts";
import type { TsdbOptions } from "./options.ts";
import { encodeRollups } from "./rollup-codec.ts";
import type { Slicer } from "./slicer.ts";

/**
 * The cut lines due for a head holding samples in [minT, maxT], ascending: each block range
 * (multiple of `rangeMs`) the head holds 1.5 ranges beyond.
 */
export function cutLines(minT: number, maxT: number, rangeMs: number): number[] {
  const lines: number[] = [];
  for (let t = minT; maxT - t > 1.5 * rangeMs; ) {
    t = Math.floor(t / rangeMs) * rangeMs + rangeMs;
    lines.push(t);
  }
  return lines;
}

/** True when the batch holds a sample older than `t` (ms). */
export function hasSampleBefore(batch: Batch, t: number): boolean {
  const ts = batch.ts;
  for (let i = 0; i < batch.n; i++) if (ts[i] < t) return true;
  return false;
}

/**
 * Writes every head sample below `before` into one block in `blocksDir`, then has `install` put it
 * in the store's list (undefined when there was none) and drops the samples from the head, in the
 * same turn. Series are sorted by labels first and their chunks encoded one series at a time,
 * yielding between series; the samples below `before` must not change meanwhile (the cut gate).
 * Returns false, leaving the head whole and no block, when the store closes first.
 */
export async function cutBlock(
  head: Head,
  blocksDir: string,
  opts: Pick<TsdbOptions, "rollupResolutionMs" | "rollupGroupLabel" | "chunkTargetSamples">,
  before: number,
  walSegment: number,
  slicer: Slicer,
  install: (dir: string | undefined) => void,
): Promise<boolean> {
  const refs = Array.from(head.reg.allPostings()).filter((ref) => head.hasDataBefore(ref, before));
  const res = opts.rollupResolutionMs;
  const series: { ref: number; labels: Labels }[] = refs.map((ref) => ({
    ref,
    labels: head.reg.labels(ref),
  }));
  series.sort((a, b) => compareLabels(a.labels, b.labels));
  const w = new BlockWriter(blocksDir, opts.rollupGroupLabel);
  try {
    for (const { ref, labels } of series) {
      const s = head.samples(ref, Number.NEGATIVE_INFINITY, before - 1);
      w.add(
        labels,
        encodeChunks(s.t, s.v, s.t.length, opts.chunkTargetSamples),
        res > 0 ? encodeRollups(rollupsOf(s.t, s.v, res)) : undefined,
      );
      if (slicer.due() && !(await slicer.yield())) return false;
    }
    const meta: BlockMeta | undefined = w.finish({
      coversBefore: before,
      walSegment,
      rollupResolutionMs: res,
    });
    install(meta && join(blocksDir, meta.name));
    head.truncate(before);
    return true;
  } finally {
    w.abort();
  }
}
