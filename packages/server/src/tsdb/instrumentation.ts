import type { Logger } from "pino";
import { counter, histogram, LATENCY_BUCKETS, observed, perScrape, type Registry } from "../instrument.ts";
import { DAMAGE_KINDS, type Damage, type DamageSink } from "./damage.ts";
import { TsdbClosedError } from "./errors.ts";

/** What the store reports at scrape time (read then, never updated on the write path). */
export interface TsdbGaugeSource {
  readonly headSeries: number;
  readonly headChunks: number;
  readonly headSamples: number;
  readonly headChunkBytes: number;
  readonly blocks: number;
  readonly blockBytes: number;
  readonly walSegment: number;
  /** Oldest sample held (blocks or head), ms; undefined when empty. */
  readonly oldestSampleMs: number | undefined;
  /** Newest sample in the head, ms; undefined when empty. */
  readonly newestSampleMs: number | undefined;
}

/**
 * The embedded store's metrics (Prometheus' `headMetrics` shape): counters the store updates once
 * per commit, per fsync or per compaction step, and gauges read from the store at scrape time.
 */
export function createTsdbMetrics(registry: Registry, readNow: () => TsdbGaugeSource | undefined) {
  // Nine families read the same figures, some of them a walk over every head series: once per scrape.
  const read = perScrape(readNow);
  const at = (f: (s: TsdbGaugeSource) => number | undefined) => () => {
    const s = read();
    return s && f(s);
  };
  const g = (name: string, help: string, f: (s: TsdbGaugeSource) => number | undefined) =>
    observed(registry, "gauge", name, help, at(f));
  g("svc_tsdb_head_series", "Series in the in-memory head.", (s) => s.headSeries);
  g("svc_tsdb_head_chunks", "Chunks in the head (closed and open).", (s) => s.headChunks);
  g("svc_tsdb_head_samples", "In-order samples in the head.", (s) => s.headSamples);
  g("svc_tsdb_head_chunk_bytes", "Encoded bytes of the head's chunks.", (s) => s.headChunkBytes);
  g("svc_tsdb_blocks", "Persisted blocks.", (s) => s.blocks);
  g("svc_tsdb_blocks_bytes", "Bytes of the persisted blocks on disk.", (s) => s.blockBytes);
  g("svc_tsdb_wal_segment", "Number of the WAL segment being written.", (s) => s.walSegment);
  // Missing data is not zero: an empty store has no oldest sample, so the family has none.
  g(
    "svc_tsdb_oldest_sample_timestamp_seconds",
    "Time of the oldest sample stored (blocks or head), Unix seconds.",
    (s) => (s.oldestSampleMs === undefined ? undefined : s.oldestSampleMs / 1000),
  );
  g("svc_tsdb_head_max_timestamp_seconds", "Time of the newest sample in the head, Unix seconds.", (s) =>
    s.newestSampleMs === undefined ? undefined : s.newestSampleMs / 1000,
  );
  return {
    appended: counter(registry, "svc_tsdb_samples_appended_total", "Samples appended to the head."),
    outOfOrder: counter(
      registry,
      "svc_tsdb_out_of_order_samples_total",
      "Samples older than their series' newest: accepted within the out-of-order window, or refused.",
      ["outcome"],
      [{ outcome: "accepted" }, { outcome: "refused" }],
    ),
    walBytes: counter(registry, "svc_tsdb_wal_written_bytes_total", "Bytes written to the WAL."),
    walFsync: histogram(
      registry,
      "svc_tsdb_wal_fsync_duration_seconds",
      "Duration of one WAL write + fdatasync (a group of commits).",
      [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    ),
    walFailures: counter(
      registry,
      "svc_tsdb_wal_write_failures_total",
      "WAL writes that failed (the store then refuses writes until restarted).",
    ),
    checkpoints: counter(
      registry,
      "svc_tsdb_checkpoints_total",
      "WAL checkpoints written.",
      ["outcome"],
      [{ outcome: "ok" }, { outcome: "failed" }],
    ),
    compactions: counter(
      registry,
      "svc_tsdb_compactions_total",
      "Head compactions (a block cut from the head) by outcome.",
      ["outcome"],
      [{ outcome: "ok" }, { outcome: "failed" }],
    ),
    compactionDuration: histogram(
      registry,
      "svc_tsdb_compaction_duration_seconds",
      "Duration of one head compaction, yields to requests included.",
      LATENCY_BUCKETS,
    ),
    merges: counter(
      registry,
      "svc_tsdb_block_merges_total",
      "Block merges by outcome.",
      ["outcome"],
      [{ outcome: "ok" }, { outcome: "failed" }],
    ),
    mergeDuration: histogram(
      registry,
      "svc_tsdb_block_merge_duration_seconds",
      "Duration of one block merge, yields to requests included.",
      LATENCY_BUCKETS,
    ),
    corruptions: counter(
      registry,
      "svc_tsdb_wal_corruptions_total",
      "Damaged units found in the store's files (WAL or checkpoint record, block, chunk, rollups) and dropped, by kind.",
      ["kind"],
      DAMAGE_KINDS.map((kind) => ({ kind })),
    ),
    droppedSamples: counter(
      registry,
      "svc_tsdb_corrupt_dropped_samples_total",
      "Samples dropped with damaged units, by kind (where the format says how many).",
      ["kind"],
      DAMAGE_KINDS.map((kind) => ({ kind })),
    ),
    backgroundErrors: counter(
      registry,
      "svc_tsdb_background_errors_total",
      "Errors of store work nobody awaits (background compaction), each also logged.",
      ["task"],
      [{ task: "compaction" }],
    ),
    retentionDeletions: counter(
      registry,
      "svc_tsdb_retention_deleted_blocks_total",
      "Blocks deleted because they fell out of retention.",
    ),
  };
}

export type TsdbMetrics = ReturnType<typeof createTsdbMetrics>;

/**
 * Counts one compaction step by outcome and times it; a step the closing store stopped (it resolved
 * false, or threw TsdbClosedError) is neither.
 */
export async function measured<T>(
  m: TsdbMetrics | undefined,
  step: Promise<T>,
  count: "compactions" | "checkpoints" | "merges",
  duration?: "compactionDuration" | "mergeDuration",
): Promise<T> {
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

/**
 * The store's DamageSink: logs one damaged unit at error level (a torn tail at warn: a write the
 * crash interrupted, never acknowledged) and counts it with the samples it dropped.
 */
export function damageReporter(log: Logger, m: TsdbMetrics | undefined): DamageSink {
  return (d: Damage): void => {
    const fields = {
      kind: d.kind,
      file: d.file,
      offset: d.offset,
      bytes: d.bytes,
      samplesDropped: d.samples ?? "unknown",
      detail: d.detail,
    };
    if (d.kind === "wal_torn_tail")
      log.warn(fields, "tsdb: torn WAL tail truncated (an unacknowledged write)");
    else log.error(fields, `tsdb: damaged ${d.kind.replace("_", " ")} dropped`);
    m?.corruptions.inc({ kind: d.kind });
    if (d.samples) m?.droppedSamples.inc({ kind: d.kind }, d.samples);
  };
}
