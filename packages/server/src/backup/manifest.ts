/**
 * A backup directory (docs/operations.md "Backup and restore"): `data/` holds what a data directory
 * holds, `manifest.json` (written last) lists every file under `data/` with its size and sha256, and
 * the format versions the files were written in. Plain node, no server modules: the CLI bundles it.
 */
import { createHash } from "node:crypto";
import { createReadStream, existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { SCHEMA_VERSION } from "../db/schema-version.ts";
import { TSDB_FORMAT } from "../tsdb/version.ts";

export const MANIFEST_FILE = "manifest.json";
export const DATA_DIR = "data";
/**
 * Written first into a backup directory and removed after the manifest: with no manifest beside it,
 * the directory is a backup that did not finish (killed midway), which the next backup there clears.
 */
export const UNFINISHED_FILE = ".svc-backup-unfinished";
/** The manifest's own layout; a newer one is refused. */
export const BACKUP_FORMAT_VERSION = 1;

export interface ManifestFile {
  /** Relative to the backup directory, `/`-separated, under `data/`. */
  readonly path: string;
  readonly bytes: number;
  readonly sha256: string;
  /** Permission bits (e.g. 0o600 for secrets), restored as they were. */
  readonly mode: number;
}

export interface Manifest {
  readonly format: "svc-backup";
  readonly formatVersion: number;
  /** ISO 8601, when the backup was finished. */
  readonly createTime: string;
  /** Every sample acknowledged before this time (Unix ms) is in the snapshot. */
  readonly snapshotTimeUnixMs: number;
  readonly formats: {
    readonly tsdbWal: number;
    readonly tsdbBlock: number;
    /** Control-plane schema version (the newest migration's number) and that migration's name. */
    readonly schema: number;
    readonly schemaMigration: string;
  };
  readonly files: readonly ManifestFile[];
  readonly totalBytes: number;
}

/** A backup that cannot be restored: names the file and why. */
export class BackupRefusedError extends Error {
  constructor(
    readonly file: string,
    readonly why: string,
  ) {
    super(`${file}: ${why}`);
    this.name = "BackupRefusedError";
  }
}

export async function sha256Of(path: string): Promise<string> {
  const h = createHash("sha256");
  for await (const chunk of createReadStream(path)) h.update(chunk as Buffer);
  return h.digest("hex");
}

/** Every regular file under `dir`, as paths relative to `base` with `/` separators. */
export function listFiles(dir: string, base: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...listFiles(p, base));
    else out.push(relative(base, p).split(sep).join("/"));
  }
  return out.sort();
}

/** The versions this build writes and reads. */
export function currentFormats(schemaMigration: string): Manifest["formats"] {
  return { tsdbWal: TSDB_FORMAT.wal, tsdbBlock: TSDB_FORMAT.block, schema: SCHEMA_VERSION, schemaMigration };
}

const isInt = (v: unknown): v is number => Number.isInteger(v);

/** Reads and checks `manifest.json`: present, well formed, not newer than this build. */
export function readManifest(backupDir: string): Manifest {
  const path = join(backupDir, MANIFEST_FILE);
  if (!existsSync(path))
    throw new BackupRefusedError(
      MANIFEST_FILE,
      "missing: the backup did not finish (the manifest is written last) or this is not a backup directory",
    );
  let m: Manifest;
  try {
    m = JSON.parse(readFileSync(path, "utf8")) as Manifest;
  } catch (e) {
    throw new BackupRefusedError(
      MANIFEST_FILE,
      `not valid JSON (${(e as Error).message}): truncated or edited`,
    );
  }
  if (m?.format !== "svc-backup" || !isInt(m.formatVersion))
    throw new BackupRefusedError(MANIFEST_FILE, 'not an svc backup manifest (format must be "svc-backup")');
  if (m.formatVersion > BACKUP_FORMAT_VERSION)
    throw new BackupRefusedError(
      MANIFEST_FILE,
      `backup format ${m.formatVersion} is newer than this build reads (${BACKUP_FORMAT_VERSION}): restore with the svc release that took it`,
    );
  const f = m.formats ?? ({} as Manifest["formats"]);
  const newer = (what: string, found: unknown, ours: number) => {
    if (!isInt(found))
      throw new BackupRefusedError(MANIFEST_FILE, `formats.${what} is missing or not an integer`);
    if (found > ours)
      throw new BackupRefusedError(
        MANIFEST_FILE,
        `${what} format ${found} is newer than this build reads (${ours}): restore with the svc release that took it`,
      );
  };
  newer("tsdbWal", f.tsdbWal, TSDB_FORMAT.wal);
  newer("tsdbBlock", f.tsdbBlock, TSDB_FORMAT.block);
  newer("schema", f.schema, SCHEMA_VERSION);
  if (!Array.isArray(m.files)) throw new BackupRefusedError(MANIFEST_FILE, "files must be a list");
  for (const e of m.files) {
    const p = e?.path;
    if (
      typeof p !== "string" ||
      !p.startsWith(`${DATA_DIR}/`) ||
      p.split("/").some((s) => s === "" || s === "." || s === "..") ||
      !isInt(e.bytes) ||
      typeof e.sha256 !== "string" ||
      !isInt(e.mode)
    )
      throw new BackupRefusedError(MANIFEST_FILE, `entry ${JSON.stringify(p)} is malformed`);
  }
  return m;
}

/**
 * Checks every file of a backup against its manifest: none missing, none extra, each of the listed
 * size (else truncated or grown) and sha256 (else changed). Reads only; returns the manifest.
 */
export async function verifyBackup(backupDir: string): Promise<Manifest> {
  const m = readManifest(backupDir);
  const dataDir = join(backupDir, DATA_DIR);
  const listed = new Set(m.files.map((f) => f.path));
  const present = existsSync(dataDir) ? listFiles(dataDir, backupDir) : [];
  for (const p of present)
    if (!listed.has(p))
      throw new BackupRefusedError(p, "not listed in the manifest (added after the backup)");
  for (const f of m.files) {
    const path = join(backupDir, ...f.path.split("/"));
    if (!existsSync(path)) throw new BackupRefusedError(f.path, "missing (listed in the manifest)");
    const size = statSync(path).size;
    if (size !== f.bytes)
      throw new BackupRefusedError(
        f.path,
        `${size} bytes, the manifest says ${f.bytes} (${size < f.bytes ? "truncated" : "grown"} since the backup)`,
      );
    if ((await sha256Of(path)) !== f.sha256)
      throw new BackupRefusedError(f.path, "sha256 differs from the manifest (changed since the backup)");
  }
  return m;
}
