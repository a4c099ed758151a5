/**
 * Merging blocks into larger ones (Prometheus' compactor levels): a 7-day read then opens a few
 * dozen series parts instead of 84 per series. Blocks of one aligned window of a level range merge
 * once that window is safely behind the head; a series whose parts do not overlap keeps its chunks
 * byte for byte (copied, not re-encoded) and gets its rollups re-joined; overlapping parts (late
 * samples cut into a later block) are decoded, merged and re-encoded.
 */
import type { Labels } from "../storage/interface.ts";
import { Rollups, rollupsOf } from "../storage/rollups.ts";
import { type Block, type BlockChunk, type BlockMeta, BlockWriter } from "./block.ts";
import { encodeChunks } from "./chunk.ts";
import type { SampleArrays } from "./head.ts";
import { compareLabels } from "./labels.ts";
import { mergeParts } from "./merge.ts";
import { encodeRollups } from "./rollup-codec.ts";

/**
 * The next group of blocks to merge, or undefined: for each range (ascending), the blocks lying
 * wholly inside one aligned window [k·range, (k+1)·range) that ends at or before `safeBefore`,
 * when there are at least two of them and no other block reaches into the window.
 */
export function planMerge<M extends { readonly meta: Pick<BlockMeta, "minTime" | "maxTime"> }>(
  blocks: readonly M[],
  ranges: readonly number[],
  safeBefore: number,
): M[] | undefined {
  for (const range of ranges) {
    const windows = new Map<number, M[]>();
    for (const b of blocks) {
      const w = Math.floor(b.meta.minTime / range);
      if ((w + 1) * range > safeBefore) continue;
      const list = windows.get(w);
      if (list) list.push(b);
      else windows.set(w, [b]);
    }
    for (const [w, members] of windows) {
      const start = w * range;
      const end = start + range;
      if (members.length < 2) continue;
      if (members.some((b) => b.meta.maxTime >= end)) continue;
      if (blocks.some((b) => !members.includes(b) && b.meta.maxTime >= start && b.meta.minTime < end))
        continue;
      return members;
    }
  }
  return undefined;
}

/**
 * The level ranges for a block range: 3× and 12× it (6 h and 24 h for 2-hour blocks), up to
 * `maxBlockDurationMs` (0: a seventh of the retention).
 */
export function mergeRanges(blockRangeMs: number, retentionMs: number, maxBlockDurationMs = 0): number[] {
  // Retention deletes whole blocks, so a block much longer than a tenth of it keeps data too long.
  const cap = maxBlockDurationMs > 0 ? maxBlockDurationMs : Math.max(blockRangeMs, retentionMs / 7);
  return [3 * blockRangeMs, 12 * blockRangeMs].filter((r) => r <= cap);
}

/**
 * Writes one block holding every series of `sources` (ordered by min time) into `dir`; returns its
 * meta (undefined if the sources were empty). `pause` is called after each series and awaited when it
 * returns a promise (every few ms), so the event loop keeps serving while a large merge runs; the
 * sources are immutable meanwhile.
 */
export async function mergeBlocks(
  dir: string,
  sources: readonly Block[],
  rollupResolutionMs: number,
  chunkTargetSamples: number,
  pause: () => Promise<void> | undefined,
  rollupGroupLabel = "",
): Promise<BlockMeta | undefined> {
  const w = new BlockWriter(dir, rollupGroupLabel);
  try {
    // k-way merge of the sources' series (each in label order).
    const cursors = sources.map((b) => ({ b, id: 0, labels: b.numSeries > 0 ? b.labels(0) : undefined }));
    for (;;) {
      let next: Labels | undefined;
      for (const c of cursors) if (c.labels && (!next || compareLabels(c.labels, next) < 0)) next = c.labels;
      if (!next) break;
      const parts: { b: Block; id: number }[] = [];
      for (const c of cursors) {
        if (c.labels && compareLabels(c.labels, next) === 0) {
          parts.push({ b: c.b, id: c.id });
          c.id++;
          c.labels = c.id < c.b.numSeries ? c.b.labels(c.id) : undefined;
        }
      }
      mergeSeries(w, next, parts, rollupResolutionMs, chunkTargetSamples);
      const paused = pause();
      if (paused) await paused;
    }
    const last = sources.reduce((a, b) => (b.meta.coversBefore > a.meta.coversBefore ? b : a));
    return w.finish({
      coversBefore: last.meta.coversBefore,
      walSegment: Math.max(...sources.map((b) => b.meta.walSegment)),
      rollupResolutionMs,
      sources: sources.map((b) => b.meta.name),
    });
  } finally {
    w.abort();
  }
}

function mergeSeries(
  w: BlockWriter,
  labels: Labels,
  parts: readonly { b: Block; id: number }[],
  res: number,
  chunkTarget: number,
): void {
  let disjoint = true;
  for (let i = 1; i < parts.length; i++) {
    if (parts[i - 1].b.timeRange(parts[i - 1].id).maxT >= parts[i].b.timeRange(parts[i].id).minT)
      disjoint = false;
  }
  if (disjoint) {
    const chunks: BlockChunk[] = [];
    for (const p of parts) for (const c of p.b.rawChunks(p.id)) chunks.push(c);
    let rollups: Uint8Array | undefined;
    if (res > 0) {
      const r = new Rollups(res);
      let all = true;
      for (const p of parts) {
        if (!p.b.rollups(p.id, Number.NEGATIVE_INFINITY, Number.POSITIVE_INFINITY, r)) {
          all = false;
          break;
        }
      }
      if (all) rollups = encodeRollups(r);
      else {
        // A source without rollups (written before them, or with another resolution).
        const m = allSamples(parts);
        rollups = encodeRollups(rollupsOf(m.t, m.v, res));
      }
    }
    w.add(labels, chunks, rollups);
    return;
  }
  const m = allSamples(parts);
  w.add(
    labels,
    encodeChunks(m.t, m.v, m.t.length, chunkTarget),
    res > 0 ? encodeRollups(rollupsOf(m.t, m.v, res)) : undefined,
  );
}

/** Every sample of a series' parts, merged (duplicates dropped, the earlier block wins). */
function allSamples(parts: readonly { b: Block; id: number }[]): SampleArrays {
  return mergeParts(parts.map((p) => p.b.samples(p.id, Number.NEGATIVE_INFINITY, Number.POSITIVE_INFINITY)));
}
