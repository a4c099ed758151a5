/**
 * Online backup of the embedded defaults (svc.admin.v1 OperationsService.Backup): the TSDB's snapshot
 * (blocks linked, WAL up to a point in time), the SQLite database through its online backup API, and
 * the data directory's other files (generated secrets: the secret key seals destination secrets), then
 * the manifest, last. Ingest, queries, the evaluator and the dispatcher go on meanwhile.
 */
import { existsSync, readdirSync, rmSync, statSync } from "node:fs";
import { copyFile, mkdir, open, rename, writeFile } from "node:fs/promises";
import { isAbsolute, join, relative, resolve } from "node:path";
import { appliedMigrations, type DbHandle } from "../db/database.ts";
import { LATEST_MIGRATION } from "../db/schema-version.ts";
import { invalidArgument, SvcError } from "../errors.ts";
import type { Tsdb } from "../tsdb/index.ts";
import {
  BACKUP_FORMAT_VERSION,
  currentFormats,
  DATA_DIR,
  listFiles,
  MANIFEST_FILE,
  type Manifest,
  type ManifestFile,
  sha256Of,
} from "./manifest.ts";

export interface BackupSources {
  /** Absent with SVC_METRICS_BACKEND=remote. */
  readonly tsdb?: Tsdb;
  readonly db: DbHandle;
  readonly dataDir: string;
}

export interface BackupResult {
  readonly directory: string;
  readonly manifest: Manifest;
  /** Bytes hard-linked to the live store's blocks rather than copied. */
  readonly linkedBytes: number;
}

/** Entries of the data directory that the snapshot steps write themselves (or that are SQLite's own). */
const OWN = new Set(["tsdb", "svc.db", "svc.db-wal", "svc.db-shm", "svc.db-journal"]);

const within = (parent: string, child: string) => {
  const r = relative(parent, child);
  return r === "" || (!r.startsWith("..") && !isAbsolute(r));
};

const refused = (why: string, message: string) =>
  new SvcError("failed_precondition", message, { reason: "BACKUP_REFUSED", metadata: { why } });

/** Checks the destination: absolute, outside the data directory, empty or absent. */
function checkDestination(dataDir: string, to: string): string {
  if (!to) throw invalidArgument("directory", "is required (an absolute path on the server's host)");
  if (!isAbsolute(to)) throw invalidArgument("directory", "must be an absolute path on the server's host");
  const dest = resolve(to);
  const data = resolve(dataDir);
  if (within(data, dest) || within(dest, data))
    throw invalidArgument("directory", `must lie outside the data directory ${data}`);
  if (existsSync(dest)) {
    if (!statSync(dest).isDirectory()) throw invalidArgument("directory", "exists and is not a directory");
    if (readdirSync(dest).length > 0)
      throw refused("destination_not_empty", "directory: not empty; a backup never overwrites files");
  }
  return dest;
}

function unsupported(sources: BackupSources): string | undefined {
  if (sources.db.dialect !== "sqlite")
    return "the control plane is in PostgreSQL (SVC_DATABASE_URL): back it up with pg_dump, and the data directory's files with the file system (docs/operations.md#backup-and-restore)";
  if (!sources.tsdb)
    return "metrics are kept by a remote engine (SVC_METRICS_BACKEND=remote): back the engine up with its own tool, e.g. vmbackup (docs/operations.md#backup-and-restore)";
  if (!sources.db.backup) return "this database handle cannot take an online backup";
  return undefined;
}

/** fsync off the event loop: ingest and queries go on while the copies reach the disk. */
async function fsyncFile(path: string): Promise<void> {
  const fh = await open(path, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Copies the data directory's other entries (secrets, demo state) as they are. */
async function copyOthers(from: string, to: string, skip: (name: string) => boolean): Promise<void> {
  for (const e of readdirSync(from, { withFileTypes: true })) {
    if (skip(e.name)) continue;
    const src = join(from, e.name);
    if (e.isDirectory()) {
      await mkdir(join(to, e.name), { mode: statSync(src).mode & 0o777 });
      await copyOthers(src, join(to, e.name), () => false);
    } else if (e.isFile()) await copyFile(src, join(to, e.name));
  }
}

/** One backup at a time per process: a second is refused rather than queued behind a long one. */
let running = false;

export async function takeBackup(sources: BackupSources, to: string): Promise<BackupResult> {
  const why = unsupported(sources);
  if (why) throw refused("unsupported", `backup covers the embedded defaults only: ${why}`);
  const dest = checkDestination(sources.dataDir, to);
  if (running)
    throw new SvcError(
      "failed_precondition",
      "another backup is running in this process; retry when it ends",
      {
        reason: "BACKUP_RUNNING",
      },
    );
  running = true;
  const created = !existsSync(dest);
  const data = join(dest, DATA_DIR);
  try {
    await mkdir(data, { recursive: true, mode: 0o700 });
    const snap = await sources.tsdb!.snapshot(join(data, "tsdb"));
    await sources.db.backup!(join(data, "svc.db"));
    const applied = await appliedMigrations(sources.db.db);
    await copyOthers(sources.dataDir, data, (name) => OWN.has(name));
    const linked = new Set(snap.files.filter((f) => f.linked).map((f) => `${DATA_DIR}/tsdb/${f.path}`));
    const files: ManifestFile[] = [];
    let linkedBytes = 0;
    let totalBytes = 0;
    for (const path of listFiles(data, dest)) {
      const abs = join(dest, ...path.split("/"));
      const st = statSync(abs);
      // A link shares the live block's inode, which is already durable.
      if (linked.has(path)) linkedBytes += st.size;
      else await fsyncFile(abs);
      totalBytes += st.size;
      files.push({ path, bytes: st.size, sha256: await sha256Of(abs), mode: st.mode & 0o777 });
    }
    const manifest: Manifest = {
      format: "svc-backup",
      formatVersion: BACKUP_FORMAT_VERSION,
      createTime: new Date().toISOString(),
      snapshotTimeUnixMs: snap.timeMs,
      formats: currentFormats(applied.at(-1) ?? LATEST_MIGRATION),
      files,
      totalBytes,
    };
    // Written last and renamed into place: a backup without manifest.json is unfinished.
    const tmp = join(dest, `${MANIFEST_FILE}.tmp`);
    await writeFile(tmp, `${JSON.stringify(manifest, null, 2)}\n`);
    await fsyncFile(tmp);
    await rename(tmp, join(dest, MANIFEST_FILE));
    await fsyncFile(dest);
    return { directory: dest, manifest, linkedBytes };
  } catch (err) {
    rmSync(created ? dest : data, { recursive: true, force: true });
    rmSync(join(dest, `${MANIFEST_FILE}.tmp`), { force: true });
    throw err;
  } finally {
    running = false;
  }
}
