/**
 * Reads across blocks and the head: matcher evaluation per source through its postings, samples
 * merged per label set (duplicates by timestamp dropped, the earliest-persisted source wins),
 * results sorted by labels.
 */

import { ColumnsBuilder, columnsOf } from "../storage/columns.ts";
import type {
  LabelMatcher,
  Labels,
  LatestSamples,
  Querier,
  RollupSeriesData,
  SelectHints,
  SelectParts,
  SeriesData,
} from "../storage/interface.ts";
import { Rollups } from "../storage/rollups.ts";
import type { Block } from "./block.ts";
import type { Head, SampleArrays } from "./head.ts";
import { compareLabels, labelsHash, labelsKey } from "./labels.ts";
import { compileMatchers, postingsForMatchers } from "./matchers.ts";
import { mergeParts } from "./merge.ts";

/** A head-only select of up to this many samples decodes into one scratch (reads are synchronous). */
const HEAD_SCRATCH_SAMPLES = 1 << 15;
let headScratch: ColumnsBuilder | undefined;

export class TsdbQuerier implements Querier {
  readonly #head: Head;
  readonly #blocks: readonly Block[];

  readonly #hold: (blocks: readonly Block[]) => () => void;

  /**
   * `blocks` ordered by min time; the querier sees the sources as they are at each call. `hold`
   * keeps the store from deleting those blocks until the function it returns is called
   * (selectParts).
   */
  constructor(
    head: Head,
    blocks: readonly Block[],
    hold: (blocks: readonly Block[]) => () => void = () => () => {},
  ) {
    this.#head = head;
    this.#blocks = blocks;
    this.#hold = hold;
  }

  /**
   * See Querier.selectParts: the blocks in range (held until `release`) for the reader to read with
   * selectFromBlocks, and the head's samples of matching series, read now into columns keyed by the
   * head's series refs (never reused within a process).
   */
  selectParts(
    matchers: readonly LabelMatcher[],
    mintMs: number,
    maxtMs: number,
    hints?: SelectHints,
  ): SelectParts {
    const blocks = this.#blocks.filter((b) => b.meta.maxTime >= mintMs && b.meta.minTime <= maxtMs);
    const live = this.#blocks.map((b) => b.dir);
    if (hints?.labelsOnly) {
      return {
        blocks: [],
        liveBlockDirs: live,
        rest: columnsOf(this.select(matchers, mintMs, maxtMs, hints)),
        release() {},
      };
    }
    const release = blocks.length > 0 ? this.#hold(blocks) : () => {};
    try {
      const head = this.#head;
      const refs = postingsForMatchers(head.reg, compileMatchers(matchers));
      // Sized once from the chunks' counts: a dashboard's small select then transfers a few KB, not a
      // default capacity (array buffers the GC has to account for on every query).
      let bound = 0;
      for (let i = 0; i < refs.length; i++) bound += head.sampleBound(refs[i], mintMs, maxtMs);
      const out = new ColumnsBuilder(bound);
      for (let i = 0; i < refs.length; i++) head.appendSamples(refs[i], mintMs, maxtMs, out);
      return {
        blocks: blocks.map((b) => ({ dir: b.dir, fd: b.chunksFd })),
        liveBlockDirs: live,
        rest: out.finish((ref) => head.reg.labels(ref)),
        release,
      };
    } catch (err) {
      release();
      throw err;
    }
  }

  /**
   * Series matching all matchers with at least one sample in [mintMs, maxtMs] (inclusive), their
   * samples in that range, sorted by labels. The returned arrays belong to the caller.
   */
  select(
    matchers: readonly LabelMatcher[],
    mintMs: number,
    maxtMs: number,
    hints?: SelectHints,
  ): SeriesData[] {
    const cms = compileMatchers(matchers);
    if (hints?.labelsOnly) return this.#labelsOnly(cms, mintMs, maxtMs);
    const pick = hints?.labels;
    if (!this.#blocks.some((b) => b.meta.maxTime >= mintMs && b.meta.minTime <= maxtMs)) {
      return this.#headOnly(cms, mintMs, maxtMs, pick);
    }
    const out: SeriesData[] = [];
    for (const series of this.#seriesParts(cms, mintMs, maxtMs)) {
      const m = this.#samplesOf(series, mintMs, maxtMs);
      const labels = pick ? series.labels.filter((l) => pick.includes(l.name)) : series.labels;
      if (m.t.length > 0) out.push({ labels, timestamps: m.t, values: m.v });
    }
    return out.sort((a, b) => compareLabels(a.labels, b.labels));
  }

  /**
   * The matching series of every source overlapping [mintMs, maxtMs], by label set: the block
   * series ids (blocks oldest first) and the head ref (−1 when none). Nothing is decoded yet.
   */
  #seriesParts(cms: ReturnType<typeof compileMatchers>, mintMs: number, maxtMs: number): SeriesParts[] {
    const { found, list } = blockSeriesParts(this.#blocks, cms, mintMs, maxtMs);
    const reg = this.#head.reg;
    const refs = postingsForMatchers(reg, cms);
    for (let i = 0; i < refs.length; i++) {
      const ref = refs[i];
      const h = reg.labelsHash(ref);
      let e = found.get(h);
      while (e && !reg.hasLabels(ref, e.labels)) e = e.next;
      if (e) e.ref = ref;
      else {
        const added: SeriesParts = { labels: reg.labels(ref), parts: [], ref, next: found.get(h) };
        found.set(h, added);
        list.push(added);
      }
    }
    return list;
  }

  /** A series' samples in [mintMs, maxtMs] from all its sources, merged (`tail`: the head's, if read). */
  #samplesOf(series: SeriesParts, mintMs: number, maxtMs: number, tail?: SampleArrays): SampleArrays {
    const arrays = series.parts.map(({ block, id }) => block.samples(id, mintMs, maxtMs));
    if (series.ref >= 0) arrays.push(tail ?? this.#head.samples(series.ref, mintMs, maxtMs));
    return mergeParts(arrays);
  }

  /** See Querier.selectLatest: from the head's per-series newest sample when no block is in range. */
  selectLatest(matchers: readonly LabelMatcher[], mintMs: number, maxtMs: number): LatestSamples {
    const head = this.#head;
    const blocksInRange = this.#blocks.some((b) => b.meta.maxTime >= mintMs && b.meta.minTime <= maxtMs);
    if (blocksInRange || mintMs < head.minValidT) {
      const data = this.select(matchers, mintMs, maxtMs);
      const out = latestColumns(data.length);
      for (const s of data) pushLast(out, s.labels, s.timestamps, s.values);
      return finishColumns(out);
    }
    const refs = postingsForMatchers(head.reg, compileMatchers(matchers));
    const out = latestColumns(refs.length);
    for (let i = 0; i < refs.length; i++) {
      const ref = refs[i];
      const t = head.maxTime(ref);
      // Out-of-order samples are older than the in-order newest, so it is the series' newest.
      if (t < mintMs) continue;
      if (t <= maxtMs) {
        out.timestamps[out.labels.length] = t;
        head.lastValueBits(ref, out.bits, out.labels.length);
        out.labels.push(head.reg.labels(ref));
        continue;
      }
      const s = head.samples(ref, mintMs, maxtMs);
      if (s.t.length > 0) pushLast(out, head.reg.labels(ref), s.t, s.v);
    }
    return finishColumns(out);
  }

  /** See Querier.selectRollups: block rollups, then the head's samples bucketed on the fly. */
  selectRollups(
    matchers: readonly LabelMatcher[],
    afterMs: number,
    untilMs: number,
    resolutionMs: number,
    columnsOf?: (labels: Labels) => number,
  ): RollupSeriesData[] {
    const mint = afterMs + 1;
    const buckets = Math.max(1, Math.ceil((untilMs - afterMs) / resolutionMs));
    const entries = this.#seriesParts(compileMatchers(matchers), mint, untilMs).map((series) => ({
      series,
      r: new Rollups(resolutionMs, buckets + 1, columnsOf?.(series.labels)),
      exact: true,
    }));
    // Block by block (oldest first), all its series at once, so a block's reads coalesce
    // (rollupsMany); a series that failed in an earlier block is not read further.
    const byBlock = new Map<Block, { id: number; e: (typeof entries)[number] }[]>();
    for (const e of entries)
      for (const { block, id } of e.series.parts) {
        const list = byBlock.get(block);
        if (list) list.push({ id, e });
        else byBlock.set(block, [{ id, e }]);
      }
    for (const b of this.#blocks) {
      const wanted = byBlock.get(b)?.filter(({ e }) => e.exact) ?? [];
      if (wanted.length === 0) continue;
      const ids = wanted.map((w) => w.id);
      const ok = b.rollupsMany(
        ids,
        afterMs + resolutionMs,
        untilMs,
        wanted.map((w) => w.e.r),
      );
      for (let k = 0; k < ok.length; k++) if (!ok[k]) wanted[k].e.exact = false;
    }
    const out: RollupSeriesData[] = [];
    const none = new Float64Array(0);
    for (const { series, r, exact: readExact } of entries) {
      let exact = readExact;
      const tail = series.ref >= 0 ? this.#head.samples(series.ref, mint, untilMs) : undefined;
      if (exact && tail && tail.t.length > 0) {
        if (tail.t[0] <= r.lastTime) exact = false;
        else r.addSamples(tail.t, tail.v);
      }
      if (exact && r.allFinite()) {
        if (r.n > 0) out.push({ labels: series.labels, timestamps: none, values: none, rollups: r });
        continue;
      }
      const m = this.#samplesOf(series, mint, untilMs, tail);
      if (m.t.length > 0) out.push({ labels: series.labels, timestamps: m.t, values: m.v });
    }
    return out.sort((a, b) => compareLabels(a.labels, b.labels));
  }

  /**
   * The range touches no block: the head holds one ref per label set, so there is nothing to merge
   * or de-duplicate, and labels are built only for series with samples in range.
   */
  #headOnly(
    cms: ReturnType<typeof compileMatchers>,
    mintMs: number,
    maxtMs: number,
    pick: readonly string[] | undefined,
  ): SeriesData[] {
    const head = this.#head;
    const refs = postingsForMatchers(head.reg, cms);
    // Only the labels the reader looks at (SelectHints.labels): fewer objects per series.
    const names = pick && head.reg.nameSymbols(pick);
    // Every series decoded into one pair of columns and copied out once: each series' arrays are views
    // of the select's own pair, two array buffers a select instead of two a series (an alert cycle's
    // reads return ~100,000 small series, and the GC accounts for every buffer).
    let bound = 0;
    for (let i = 0; i < refs.length; i++) bound += head.sampleBound(refs[i], mintMs, maxtMs);
    const small = bound <= HEAD_SCRATCH_SAMPLES;
    if (small && !headScratch) headScratch = new ColumnsBuilder(HEAD_SCRATCH_SAMPLES);
    const b = small && headScratch ? headScratch.reset() : new ColumnsBuilder(bound);
    // Series with samples, as (index into refs, first sample, end) triples.
    const kept: number[] = [];
    for (let i = 0; i < refs.length; i++) {
      const from = b.used;
      head.appendSamples(refs[i], mintMs, maxtMs, b);
      if (b.used > from) kept.push(i, from, b.used);
    }
    const used = b.used;
    // The scratch is copied out; a select's own columns too when chunk bounds left much of them unused.
    const copy = small || used < b.timestamps.length * 0.75;
    const t = copy ? b.timestamps.slice(0, used) : b.timestamps;
    const v = copy ? b.values.slice(0, used) : b.values;
    const out: SeriesData[] = [];
    for (let k = 0; k < kept.length; k += 3) {
      const from = kept[k + 1];
      const to = kept[k + 2];
      const ref = refs[kept[k]];
      out.push({
        labels: names ? head.reg.labelsPicked(ref, names) : head.reg.labels(ref),
        timestamps: t.subarray(from, to),
        values: v.subarray(from, to),
      });
    }
    return out.sort((a, b) => compareLabels(a.labels, b.labels));
  }

  /**
   * See Querier.estimateSeries: the largest postings list among the head and the blocks in range
   * (a series is in several sources, so a sum would count it once per block).
   */
  estimateSeries(matchers: readonly LabelMatcher[], mintMs: number, maxtMs: number): number {
    const cms = compileMatchers(matchers);
    let n = postingsForMatchers(this.#head.reg, cms).length;
    for (const b of this.#blocks) {
      if (b.meta.maxTime < mintMs || b.meta.minTime > maxtMs) continue;
      n = Math.max(n, postingsForMatchers(b, cms).length);
    }
    return n;
  }

  /** Matching series with a sample in range, labels only: postings and chunk bounds, no decoding. */
  #labelsOnly(cms: ReturnType<typeof compileMatchers>, mintMs: number, maxtMs: number): SeriesData[] {
    const found = new Map<string, Labels>();
    const add = (labels: Labels): void => {
      const key = labelsKey(labels);
      if (!found.has(key)) found.set(key, labels);
    };
    for (const b of this.#blocks) {
      if (b.meta.maxTime < mintMs || b.meta.minTime > maxtMs) continue;
      const ids = postingsForMatchers(b, cms);
      for (let i = 0; i < ids.length; i++) if (b.hasSamplesIn(ids[i], mintMs, maxtMs)) add(b.labels(ids[i]));
    }
    const head = this.#head;
    const refs = postingsForMatchers(head.reg, cms);
    for (let i = 0; i < refs.length; i++) {
      if (head.hasSamplesIn(refs[i], mintMs, maxtMs)) add(head.reg.labels(refs[i]));
    }
    const empty = new Float64Array(0);
    const out: SeriesData[] = [];
    for (const labels of found.values()) out.push({ labels, timestamps: empty, values: empty });
    return out.sort((a, b) => compareLabels(a.labels, b.labels));
  }

  /** Label names of matching series with samples in [mintMs, maxtMs], sorted. */
  labelNames(matchers: readonly LabelMatcher[], mintMs: number, maxtMs: number): string[] {
    const names = new Set<string>();
    for (const s of this.select(allIfEmpty(matchers), mintMs, maxtMs, { labelsOnly: true })) {
      for (const l of s.labels) names.add(l.name);
    }
    return [...names].sort();
  }

  /** Values of label `name` on matching series with samples in [mintMs, maxtMs], sorted, unique. */
  labelValues(name: string, matchers: readonly LabelMatcher[], mintMs: number, maxtMs: number): string[] {
    const ms = matchers.length > 0 ? matchers : [{ type: "!=", name, value: "" } as const];
    const values = new Set<string>();
    for (const s of this.select(ms, mintMs, maxtMs, { labelsOnly: true })) {
      for (const l of s.labels) if (l.name === name) values.add(l.value);
    }
    return [...values].sort();
  }
}

/**
 * The matching series of every block overlapping [mintMs, maxtMs], by label set, blocks oldest
 * first. Joined by a hash of the labels (kept per block series) and checked for equality, so a read
 * builds labels once per series, not once per source, and no string key per source. Nothing is
 * decoded yet.
 */
function blockSeriesParts(
  blocks: readonly Block[],
  cms: ReturnType<typeof compileMatchers>,
  mintMs: number,
  maxtMs: number,
): { found: Map<number, SeriesParts>; list: SeriesParts[] } {
  const found = new Map<number, SeriesParts>();
  const list: SeriesParts[] = [];
  for (const block of blocks) {
    if (block.meta.maxTime < mintMs || block.meta.minTime > maxtMs) continue;
    const ids = postingsForMatchers(block, cms);
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      const h = block.labelsHash(id);
      let e = found.get(h);
      while (e && !block.hasLabels(id, e.labels)) e = e.next;
      if (e) e.parts.push({ block, id });
      else {
        const added: SeriesParts = {
          labels: block.labels(id),
          parts: [{ block, id }],
          ref: -1,
          next: found.get(h),
        };
        found.set(h, added);
        list.push(added);
      }
    }
  }
  return { found, list };
}

/**
 * `select` over blocks the reader opened itself (a query worker, from Querier.selectParts) and the
 * rest of the store's samples (`rest`: the head's, which take the place of the head as the latest
 * source), one series at a time in label order, so the reader can count samples as they come.
 */
export function* selectFromBlocks(
  blocks: readonly Block[],
  matchers: readonly LabelMatcher[],
  mintMs: number,
  maxtMs: number,
  rest: readonly SeriesData[],
): Generator<SeriesData, void, undefined> {
  const { found, list } = blockSeriesParts(blocks, compileMatchers(matchers), mintMs, maxtMs);
  for (const s of rest) {
    const h = labelsHash(s.labels);
    let e = found.get(h);
    while (e && compareLabels(e.labels, s.labels) !== 0) e = e.next;
    const tail = { t: s.timestamps, v: s.values };
    if (e) e.tail = tail;
    else {
      const added: SeriesParts = { labels: s.labels, parts: [], ref: -1, next: found.get(h), tail };
      found.set(h, added);
      list.push(added);
    }
  }
  list.sort((a, b) => compareLabels(a.labels, b.labels));
  for (const series of list) {
    const arrays = series.parts.map(({ block, id }) => block.samples(id, mintMs, maxtMs));
    if (series.tail) arrays.push(series.tail);
    const m = mergeParts(arrays);
    if (m.t.length > 0) yield { labels: series.labels, timestamps: m.t, values: m.v };
  }
}

function allIfEmpty(ms: readonly LabelMatcher[]): readonly LabelMatcher[] {
  return ms.length > 0 ? ms : [{ type: "!=", name: "__name__", value: "" }];
}

/** One label set's sources for a read: block series ids (blocks oldest first) and the head ref (−1: none). */
interface SeriesParts {
  readonly labels: Labels;
  readonly parts: { block: Block; id: number }[];
  ref: number;
  /** Another label set with the same hash (a collision), if any. */
  readonly next: SeriesParts | undefined;
  /** The latest source's samples when they came read already (selectFromBlocks' `rest`). */
  tail?: SampleArrays;
}

interface LatestColumns {
  labels: Labels[];
  timestamps: Float64Array;
  values: Float64Array;
  bits: Uint32Array;
}

function latestColumns(capacity: number): LatestColumns {
  const values = new Float64Array(capacity);
  return { labels: [], timestamps: new Float64Array(capacity), values, bits: new Uint32Array(values.buffer) };
}

/** Appends the newest sample of ascending arrays (copied as raw bits). */
function pushLast(out: LatestColumns, labels: Labels, t: Float64Array, v: Float64Array): void {
  const n = t.length;
  if (n === 0) return;
  const src = new Uint32Array(v.buffer, v.byteOffset + (n - 1) * 8, 2);
  const k = out.labels.length;
  out.timestamps[k] = t[n - 1];
  out.bits[2 * k] = src[0];
  out.bits[2 * k + 1] = src[1];
  out.labels.push(labels);
}

function finishColumns(out: LatestColumns): LatestSamples {
  const n = out.labels.length;
  return { labels: out.labels, timestamps: out.timestamps.subarray(0, n), values: out.values.subarray(0, n) };
}
