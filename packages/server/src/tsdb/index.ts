/**
 * The embedded time-series store (modelled on Prometheus' TSDB): series index with postings and
 * RE2 label matchers, Gorilla XOR chunks, WAL with group commit and checkpoints, immutable blocks,
 * retention, and an out-of-order window. Other folders import only from here.
 */
import pino, { type Logger } from "pino";
import type { Registry } from "../instrument.ts";
import type { Tsdb } from "./api.ts";
import { TsdbImpl } from "./db.ts";
import { createTsdbMetrics } from "./instrumentation.ts";
import { resolveTsdbOptions, type TsdbOptions } from "./options.ts";

export type { SnapshotFile, Tsdb, TsdbSnapshot, TsdbStats } from "./api.ts";
export type { Damage, DamageKind } from "./damage.ts";
export {
  CorruptionError,
  InvalidLabelsError,
  InvalidMatcherError,
  SampleOutOfBoundsError,
  SampleTooOldError,
  TsdbClosedError,
} from "./errors.ts";
export { defaultTsdbOptions, InvalidTsdbOptionsError, type TsdbOptions } from "./options.ts";
export { checkTsdbFormat, TSDB_FORMAT, type TsdbFormat, TsdbFormatError } from "./version.ts";

let fallbackLog: Logger | undefined;
/** Where a store opened without a logger (tools, tests) reports: stderr, warnings and errors only. */
function stderrLog(): Logger {
  fallbackLog ??= pino({ level: "warn" }, pino.destination(2));
  return fallbackLog;
}

/**
 * Opens (creating if needed) the store in `dir`: loads blocks, replays checkpoint + WAL (a damaged
 * record is skipped, a torn last record truncated; both logged), and starts a new WAL segment.
 * Options are merged onto defaultTsdbOptions, validated and frozen. With a registry, the store's
 * metrics (svc_tsdb_*) are registered in it; without a logger, warnings and errors go to stderr.
 */
export async function openTsdb(
  dir: string,
  overrides?: Partial<TsdbOptions>,
  instruments?: { readonly registry?: Registry; readonly log?: Logger },
): Promise<Tsdb> {
  const opts = resolveTsdbOptions(overrides);
  let db: TsdbImpl | undefined;
  const registry = instruments?.registry;
  const metrics = registry && createTsdbMetrics(registry, () => (db?.closed ? undefined : db?.gaugeSource()));
  const log = instruments?.log ?? stderrLog();
  db = new TsdbImpl(dir, opts, log.child({ component: "tsdb" }), metrics);
  return db;
}
