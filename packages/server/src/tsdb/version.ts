/**
 * The store's on-disk format versions (FORMAT.md "Versions"): `<dir>/VERSION` names the WAL and block
 * formats the files were written in. A build checks it, and every block's meta.json, before it
 * touches anything, so one that meets a newer format refuses to start instead of reading newer
 * records as a torn tail and truncating them. Plain node: the backup tools import it.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

/**
 * WAL 1: record types 1–2; 2: adds compact samples (3) and snappy series (4). Block 1: meta.json v1,
 * index SVCIDX01/02; 2: meta.json v2, index SVCIDX03 (a CRC32 after every chunk and series' rollups).
 */
export const TSDB_FORMAT = Object.freeze({ wal: 2, block: 2 });
export type TsdbFormat = { readonly wal: number; readonly block: number };
export const VERSION_FILE = "VERSION";

/** The store in a directory was written by a newer build (or its VERSION file is unreadable). */
export class TsdbFormatError extends Error {
  constructor(
    readonly path: string,
    detail: string,
  ) {
    super(`${path}: ${detail}`);
    this.name = "TsdbFormatError";
  }
}

/** The format a store was written in: its VERSION file, or the current one when absent (a new or pre-VERSION store). */
export function readTsdbFormat(dir: string): TsdbFormat {
  const path = join(dir, VERSION_FILE);
  if (!existsSync(path)) return TSDB_FORMAT;
  let v: unknown;
  try {
    v = JSON.parse(readFileSync(path, "utf8"));
  } catch (e) {
    throw new TsdbFormatError(path, `not valid JSON (${(e as Error).message}); refusing to open the store`);
  }
  const { wal, block } = (v ?? {}) as Record<string, unknown>;
  if (!Number.isInteger(wal) || !Number.isInteger(block))
    throw new TsdbFormatError(
      path,
      'must be {"wal": <integer>, "block": <integer>}; refusing to open the store',
    );
  return { wal: wal as number, block: block as number };
}

/** Why `found` cannot be opened by this build, or undefined when it can. */
export function newerFormat(found: TsdbFormat): string | undefined {
  if (found.wal > TSDB_FORMAT.wal)
    return `WAL format ${found.wal} is newer than this build reads (${TSDB_FORMAT.wal})`;
  if (found.block > TSDB_FORMAT.block)
    return `block format ${found.block} is newer than this build reads (${TSDB_FORMAT.block})`;
  return undefined;
}

/**
 * Throws TsdbFormatError when the store in `dir` (VERSION, then each block's meta.json) is in a format
 * newer than this build's; reads only.
 */
export function checkTsdbFormat(dir: string): void {
  const why = newerFormat(readTsdbFormat(dir));
  const advice = "upgrade svc to the build that wrote it (nothing was changed)";
  if (why) throw new TsdbFormatError(join(dir, VERSION_FILE), `${why}: ${advice}`);
  const blocks = join(dir, "blocks");
  if (!existsSync(blocks)) return;
  for (const e of readdirSync(blocks)) {
    const meta = join(blocks, e, "meta.json");
    if (e.endsWith(".tmp") || !existsSync(meta)) continue;
    let version: unknown;
    try {
      version = (JSON.parse(readFileSync(meta, "utf8")) as { version?: unknown }).version;
    } catch {
      continue; // unreadable: the block loader reports it as corruption
    }
    if (typeof version === "number" && version > TSDB_FORMAT.block)
      throw new TsdbFormatError(
        meta,
        `block format ${version} is newer than this build reads (${TSDB_FORMAT.block}): ${advice}`,
      );
  }
}

/** The VERSION file's content for the current formats. */
export function versionFileText(): string {
  return `${JSON.stringify(TSDB_FORMAT)}\n`;
}
