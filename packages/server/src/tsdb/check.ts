/**
 * Offline check of a store (`svc admin check --data-dir DIR`): reads VERSION, the WAL checkpoint and
 * segments, and every block (meta.json, index, each chunk's and rollup's CRC) and reports the damage
 * the server would drop at its next start, changing nothing (no replay, truncation or deletion:
 * files are opened read-only). Plain node: the CLI bundles it.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Block } from "./block.ts";
import { blockBytes, blockSamples, type Damage, type DamageKind } from "./damage.ts";
import { newerFormat, readTsdbFormat, type TsdbFormat } from "./version.ts";
import { readRecords, segmentName, walFileDamage, walFilesUpTo } from "./wal.ts";

export interface TsdbCheckReport {
  /** The store's directory (`<data dir>/tsdb`). */
  readonly dir: string;
  readonly format: TsdbFormat;
  /** WAL files and blocks read. */
  readonly walFiles: number;
  readonly blocks: number;
  /** Damaged units; a start drops each of them. A torn WAL tail is listed but is not damage. */
  readonly damage: readonly Damage[];
  /** Samples the damage drops, where the format says how many. */
  readonly samplesDropped: number;
  /** Whether any unit besides a torn tail is damaged. */
  readonly damaged: boolean;
  /** Things a start will tidy that are not damage (unfinished blocks or checkpoints). */
  readonly notes: readonly string[];
}

/** The store directory of a data directory (`DIR/tsdb`), or DIR itself when it is one. */
export function tsdbDirOf(dataDir: string): string {
  const inner = join(dataDir, "tsdb");
  return existsSync(inner) ? inner : dataDir;
}

export function checkTsdb(dataDir: string): TsdbCheckReport {
  const dir = tsdbDirOf(dataDir);
  if (!existsSync(join(dir, "wal")) && !existsSync(join(dir, "blocks")))
    throw new Error(
      `${dataDir}: no metrics store here (neither tsdb/ nor wal/ and blocks/): check --data-dir`,
    );
  const format = readTsdbFormat(dir);
  const newer = newerFormat(format);
  if (newer)
    throw new Error(`${join(dir, "VERSION")}: ${newer}: check it with the svc release that wrote it`);
  const damage: Damage[] = [];
  const notes: string[] = [];
  const wal = checkWal(join(dir, "wal"), damage, notes);
  let blocks = 0;
  const blocksDir = join(dir, "blocks");
  for (const e of existsSync(blocksDir) ? readdirSync(blocksDir).sort() : []) {
    const p = join(blocksDir, e);
    if (e.endsWith(".tmp") || !existsSync(join(p, "meta.json"))) {
      notes.push(`${p}: an unfinished block (removed at the next start)`);
      continue;
    }
    blocks++;
    let b: Block | undefined;
    try {
      b = new Block(p, { onDamage: (d) => damage.push(d) });
      b.verify();
    } catch (err) {
      // Merged or dropped by a running server while being read: gone, not damaged.
      if (!existsSync(p)) {
        notes.push(`${p}: removed while it was read (a running server merged or dropped it)`);
        continue;
      }
      damage.push({
        kind: "block",
        file: p,
        offset: 0,
        bytes: blockBytes(p),
        samples: blockSamples(p),
        detail: `block left out at start: ${(err as Error).message}`,
      });
    } finally {
      b?.close();
    }
  }
  const real = damage.filter((d) => d.kind !== "wal_torn_tail");
  return {
    dir,
    format,
    walFiles: wal,
    blocks,
    damage,
    samplesDropped: real.reduce((s, d) => s + (d.samples ?? 0), 0),
    damaged: real.length > 0,
    notes,
  };
}

/** Reads the newest checkpoint and the segments after it, as a start would; returns the files read. */
function checkWal(walDir: string, damage: Damage[], notes: string[]): number {
  if (!existsSync(walDir)) return 0;
  for (const e of readdirSync(walDir))
    if (e.startsWith("checkpoint.") && !/^checkpoint\.\d{8}$/.test(e))
      notes.push(`${join(walDir, e)}: an unfinished checkpoint (removed at the next start)`);
  const { checkpoint, segments } = walFilesUpTo(walDir, Number.POSITIVE_INFINITY);
  const files: { path: string; kind: "checkpoint_record" | "wal_record"; newest: boolean }[] = [];
  if (checkpoint !== undefined) {
    const path = join(walDir, `checkpoint.${segmentName(checkpoint)}`, segmentName(0));
    files.push({ path, kind: "checkpoint_record", newest: false });
  }
  for (const [i, s] of segments.entries())
    files.push({ path: join(walDir, segmentName(s)), kind: "wal_record", newest: i === segments.length - 1 });
  const known = new Set<number>();
  let orphans = 0;
  let seriesLost: DamageKind | undefined;
  for (const f of files) {
    let buf: Buffer;
    try {
      buf = readFileSync(f.path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      notes.push(`${f.path}: removed while it was read (a running server checkpointed it)`);
      continue;
    }
    const r = readRecords(buf, {
      series: (ref) => known.add(ref),
      sample: (ref) => {
        if (!known.has(ref)) orphans++;
      },
    });
    const found = walFileDamage(r, f.path, f.kind, f.newest);
    if (found.seriesLost) seriesLost ??= f.kind;
    damage.push(...found.damage);
  }
  if (orphans > 0 && seriesLost)
    damage.push({
      kind: seriesLost,
      file: walDir,
      offset: 0,
      bytes: 0,
      samples: orphans,
      detail: "samples whose series record was damaged (their labels are unknown)",
    });
  return files.length;
}
