/**
 * The storage contract between the embedded TSDB (writer and reader) and everything that reads
 * series (the PromQL engine first). Modelled on Prometheus' storage/interface.go: readers never
 * touch tsdb internals, they go through a Queryable.
 *
 * Units: every timestamp here is **milliseconds** since the Unix epoch (integer-valued number).
 * Bounds are **inclusive** on both ends unless a method says otherwise.
 */
import type { Rollups } from "./rollups.ts";

/** One label. */
export interface Label {
  readonly name: string;
  readonly value: string;
}

/**
 * A label set: sorted by name (code-unit order), names unique, no empty values.
 * Treated as immutable; build new arrays instead of mutating.
 */
export type Labels = readonly Label[];

export type MatchType = "=" | "!=" | "=~" | "!~";

/** A label matcher; regex matchers are fully anchored and use RE2 semantics. */
export interface LabelMatcher {
  readonly type: MatchType;
  readonly name: string;
  readonly value: string;
}

/**
 * The samples of one series. `timestamps` ascending, same length as `values`.
 * A staleness marker is stored in `values` as the exact bit pattern STALE_NAN_BITS (use
 * `isStaleMarker` / `writeStaleMarker`, never compare numbers: NaN payloads are lost by arithmetic).
 * The arrays belong to the caller once returned.
 */
export interface SeriesData {
  readonly labels: Labels;
  readonly timestamps: Float64Array;
  readonly values: Float64Array;
}

/**
 * Newest samples of several series, column-wise: series i has labels[i], timestamps[i] and values[i]
 * (raw bits; read staleness with isStaleMarker). One pair of arrays for all series, so a read of
 * thousands of series allocates two arrays, not two per series.
 */
export interface LatestSamples {
  readonly labels: Labels[];
  readonly timestamps: Float64Array;
  readonly values: Float64Array;
}

/** One series of `Querier.selectRollups`: its buckets, or its raw samples (then `rollups` is absent). */
export interface RollupSeriesData extends SeriesData {
  readonly rollups?: Rollups;
}

/** Hints a reader may pass so the store can skip work; the store may ignore them. */
export interface SelectHints {
  /** Evaluation step of a range query, ms (0 for instant). */
  readonly stepMs?: number;
  /** Name of the function the selector feeds, e.g. "rate". */
  readonly func?: string;
  /** The reader only needs series labels, not samples (the series / labels APIs). */
  readonly labelsOnly?: boolean;
  /**
   * The reader looks at these label names only: the store may leave the others out of the labels it
   * returns (the order is then by those labels; series are not merged by them). The alert evaluator's
   * reads, which return ~100,000 small series a cycle and need five labels of each.
   */
  readonly labels?: readonly string[];
}

/**
 * Series' samples as columns, the shape in which they cross to another thread as a few buffers: series
 * i has samples offsets[i] … offsets[i+1] − 1 of timestamps and values (raw float64 bits), its labels
 * from labelsOf(i) (built when asked), and keys[i], a number the store gives no other label set while
 * the process lives (−1: none), so a reader in another thread may keep the labels it was sent by it.
 * In no particular order. The buffers may be longer than the samples (room left over).
 */
export interface SeriesColumns {
  readonly length: number;
  readonly keys: Float64Array;
  readonly offsets: Uint32Array;
  readonly timestamps: Float64Array;
  readonly values: Float64Array;
  labelsOf(i: number): Labels;
}

/** See Querier.selectParts. */
export interface SelectParts {
  /**
   * The blocks to read, oldest first: each one's directory and its open chunks file, which the
   * reader (in the same process) reads through without opening or closing it.
   */
  readonly blocks: readonly { readonly dir: string; readonly fd: number }[];
  /** Every block the store has now, so a reader can forget the ones it no longer holds. */
  readonly liveBlockDirs: readonly string[];
  /**
   * The matching series' samples outside those blocks (the head's), read now: decoded straight into
   * columns, not an array pair per series, so they cross to the reader's thread without another copy.
   */
  readonly rest: SeriesColumns;
  /** The blocks may be deleted again; idempotent. */
  release(): void;
}

export interface Querier {
  /**
   * Series that match **all** matchers and have at least one sample in [mintMs, maxtMs];
   * only those samples are returned. Order: by labels (stable), so results are deterministic.
   * At least one matcher must not match the empty string, or the store may refuse the select.
   */
  select(
    matchers: readonly LabelMatcher[],
    mintMs: number,
    maxtMs: number,
    hints?: SelectHints,
  ): SeriesData[];
  /**
   * Optional: `select` split for a reader in another thread (a query worker) that reads the store's
   * immutable on-disk blocks itself (tsdb/block-set.ts), so the event loop does not: the blocks in
   * range, kept from deletion until `release()`, and the rest of the store's samples, read now.
   */
  selectParts?(
    matchers: readonly LabelMatcher[],
    mintMs: number,
    maxtMs: number,
    hints?: SelectHints,
  ): SelectParts;
  /**
   * Optional: about how many series match all matchers in [mintMs, maxtMs], from the index alone
   * (no sample decoded): for choosing where a query runs (promql/cost.ts), not for answers.
   */
  estimateSeries?(matchers: readonly LabelMatcher[], mintMs: number, maxtMs: number): number;
  /**
   * Optional: the newest sample in [mintMs, maxtMs] of each series matching all matchers (a
   * staleness marker included as such), in no particular order. Lets a store answer from what it
   * keeps per series, without decoding.
   */
  selectLatest?(matchers: readonly LabelMatcher[], mintMs: number, maxtMs: number): LatestSamples;
  /**
   * Optional: series matching all matchers with a sample in (afterMs, untilMs], as rollup buckets of
   * `resolutionMs` (storage/rollups.ts) ending in that range; both bounds must be multiples of the
   * resolution. A series whose samples the buckets cannot stand for exactly (sources that overlap,
   * data written without rollups, non-finite sums) comes back as its raw samples instead. Same order
   * as `select`. `columnsOf` names the bucket columns (storage/rollups.ts RollupColumn bits) the
   * caller will read of each series, by its labels; the store may leave the others NaN. Default: all.
   */
  selectRollups?(
    matchers: readonly LabelMatcher[],
    afterMs: number,
    untilMs: number,
    resolutionMs: number,
    columnsOf?: (labels: Labels) => number,
  ): RollupSeriesData[];
  /** Label names of series matching the matchers (all series when empty) in range, sorted. */
  labelNames(matchers: readonly LabelMatcher[], mintMs: number, maxtMs: number): string[];
  /** Values of one label on series matching the matchers in range, sorted, unique. */
  labelValues(name: string, matchers: readonly LabelMatcher[], mintMs: number, maxtMs: number): string[];
}

export interface Queryable {
  querier(): Querier;
}

/** Why a sample was refused; counted per reason so a 400 can say which and how many. */
export type AppendRefusal =
  | "out_of_bounds" // older than retention or further in the future than allowed
  | "out_of_order" // older than the out-of-order window for that series
  | "duplicate_sample_for_timestamp" // same timestamp, different value
  | "invalid_labels";

export interface AppendResult {
  readonly accepted: number;
  readonly refused: Readonly<Partial<Record<AppendRefusal, number>>>;
}

/**
 * A batch writer. `append` validates and buffers; `commit` resolves only after the batch is in the
 * write-ahead log (group commit: concurrent commits share one fsync). Acknowledge a client only
 * after `commit` resolved.
 */
export interface Appender {
  /** Returns false (and counts the reason) when the sample is refused; the rest of the batch is kept. */
  append(labels: Labels, timestampMs: number, value: number): boolean;
  /**
   * Optional fast path (Prometheus' series refs) for writers that keep their label sets: `ref` is
   * the handle a previous call returned for these same labels on this store, or -1. Returns the
   * handle to pass next time (>= 0) when the sample was buffered, -1 when refused (counted as
   * `append` counts). A stale handle is detected and looked up again; a handle given with other
   * labels than it was returned for is a caller bug.
   */
  appendRef?(ref: number, labels: Labels, timestampMs: number, value: number): number;
  commit(): Promise<AppendResult>;
  rollback(): void;
}

export interface Storage extends Queryable {
  appender(): Appender;
  close(): Promise<void>;
}

/** Prometheus' staleness marker: NaN with payload 2 (value.StaleNaN). */
export const STALE_NAN_BITS_HI = 0x7ff00000;
export const STALE_NAN_BITS_LO = 0x00000002;

const scratch = new Float64Array(1);
const scratchBits = new Uint32Array(scratch.buffer);

/** True when values[i] holds the staleness marker's exact bits. */
export function isStaleMarker(values: Float64Array, i: number): boolean {
  const x = values[i];
  // Only a NaN can carry the marker: every other value is decided without touching its bits.
  if (!Number.isNaN(x)) return false;
  const bits = new Uint32Array(values.buffer, values.byteOffset + i * 8, 2);
  return bits[1] === STALE_NAN_BITS_HI && bits[0] === STALE_NAN_BITS_LO;
}

/** Writes the staleness marker's exact bits into values[i]. */
export function writeStaleMarker(values: Float64Array, i: number): void {
  const bits = new Uint32Array(values.buffer, values.byteOffset + i * 8, 2);
  bits[0] = STALE_NAN_BITS_LO;
  bits[1] = STALE_NAN_BITS_HI;
}

/**
 * The staleness marker as a number, for appenders (remote write carries it as a float64).
 * Only meaningful when stored straight into a Float64Array without arithmetic.
 */
export function staleNaN(): number {
  scratchBits[0] = STALE_NAN_BITS_LO;
  scratchBits[1] = STALE_NAN_BITS_HI;
  return scratch[0];
}

/** True when a number carries the staleness marker's bits (survives plain copies on V8). */
export function isStaleNaNValue(v: number): boolean {
  scratch[0] = v;
  return scratchBits[1] === STALE_NAN_BITS_HI && scratchBits[0] === STALE_NAN_BITS_LO;
}

/** Builds a sorted, de-duplicated label set from a plain object, dropping empty values. */
export function labelsFromRecord(rec: Readonly<Record<string, string>>): Labels {
  return Object.keys(rec)
    .filter((k) => rec[k] !== "")
    .sort()
    .map((name) => ({ name, value: rec[name] }));
}

/** Value of a label, or "" when absent (Prometheus treats absent and empty alike). */
export function labelValue(labels: Labels, name: string): string {
  for (const l of labels) if (l.name === name) return l.value;
  return "";
}
