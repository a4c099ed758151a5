/**
 * Online backup of the embedded defaults (svc.admin.v1 OperationsService.Backup): the TSDB's snapshot
 * (blocks linked, WAL up to a point in time), the SQLite database through its online backup API, and
 * the data directory's other files (generated secrets: the secret key seals destination secrets), then
 * the manifest, last. Ingest, queries, the evaluator and the dispatcher go on meanwhile.
 */
import { existsSync, readdirSync, realpathSync, rmSync, statSync } from "node:fs";
import { copyFile, mkdir, open, rename, rm, writeFile } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, relative, resolve } from "node:path";
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
  UNFINISHED_FILE,
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

/**
 * The path with every symbolic link resolved, also for a directory not created yet: its deepest
 * existing ancestor resolved, the rest appended. A string comparison alone would let a link into the
 * data directory pass as "outside" and the backup copy itself.
 */
function realPath(path: string): string {
  const missing: string[] = [];
  let at = resolve(path);
  for (;;) {
    try {
      return join(realpathSync(at), ...missing.reverse());
    } catch (err) {
      const parent = dirname(at);
      if ((err as NodeJS.ErrnoException).code !== "ENOENT" || parent === at) throw err;
      missing.push(basename(at));
      at = parent;
    }
  }
}

/**
 * Checks the destination: absolute, outside the data directory (real paths), empty or absent, or
 * the remains of a backup of ours that did not finish, which it returns to be cleared.
 */
function checkDestination(dataDir: string, to: string): { dest: string; unfinished: boolean } {
  if (!to) throw invalidArgument("directory", "is required (an absolute path on the server's host)");
  if (to.includes("\0")) throw invalidArgument("directory", "must not contain a NUL character");
  if (!isAbsolute(to)) throw invalidArgument("directory", "must be an absolute path on the server's host");
  let dest: string;
  try {
    dest = realPath(to);
  } catch (err) {
    throw fileSystemRefusal(err, to, true);
  }
  const data = realPath(dataDir);
  if (within(data, dest) || within(dest, data))
    throw invalidArgument("directory", `must lie outside the data directory ${data}`);
  if (existsSync(dest)) {
    if (!statSync(dest).isDirectory()) throw invalidArgument("directory", "exists and is not a directory");
    const entries = readdirSync(dest);
    // A backup killed midway left its marker and no manifest: it is ours and unusable, so it is cleared.
    const unfinished = entries.includes(UNFINISHED_FILE) && !entries.includes(MANIFEST_FILE);
    if (entries.length > 0 && !unfinished)
      throw refused("destination_not_empty", "directory: not empty; a backup never overwrites files");
    return { dest, unfinished };
  }
  return { dest, unfinished: false };
}

/** What the file system said, named for the operator (the server log keeps the rest). */
const CAUSES: Readonly<Record<string, { why: string; says: string }>> = {
  EACCES: { why: "permission_denied", says: "the server's user may not write there" },
  EPERM: { why: "permission_denied", says: "the operation is not permitted there" },
  EROFS: { why: "read_only", says: "the file system is read-only" },
  ENOSPC: { why: "no_space", says: "no space left on the device" },
  EDQUOT: { why: "no_space", says: "the disk quota is used up" },
  EEXIST: { why: "exists", says: "a file of that name already exists" },
  ENOTDIR: { why: "not_a_directory", says: "a part of the path is not a directory" },
  ENAMETOOLONG: { why: "name_too_long", says: "the path is too long" },
  ELOOP: { why: "symlink_loop", says: "the path has a loop of symbolic links" },
  ENOENT: { why: "cannot_create", says: "a part of the path cannot be created" },
};

/**
 * A file-system error writing into the backup's directory as BACKUP_REFUSED naming its cause (EACCES,
 * ENOSPC, …); any other error (reading the live data, say) as is, for the server log.
 */
function fileSystemRefusal(err: unknown, dest: string, anyPath = false): unknown {
  const e = err as (NodeJS.ErrnoException & { dest?: string }) | undefined;
  const cause = e?.code === undefined ? undefined : CAUSES[e.code];
  const inDest = [e?.path, e?.dest].some((p) => typeof p === "string" && within(dest, p));
  if (!cause || !(anyPath || inDest)) return err;
  const code = e?.code;
  return refused(cause.why, `directory: cannot write the backup into ${dest}: ${cause.says} (${code})`);
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
  const { dest, unfinished } = checkDestination(sources.dataDir, to);
  if (running) throw refused("running", "another backup is running in this process; retry when it ends");
  running = true;
  const created = !existsSync(dest);
  const data = join(dest, DATA_DIR);
  const marker = join(dest, UNFINISHED_FILE);
  try {
    if (unfinished)
      for (const name of readdirSync(dest)) await rm(join(dest, name), { recursive: true, force: true });
    await mkdir(dest, { recursive: true, mode: 0o700 });
    // Written first, removed last: a backup killed midway is known as one and cleared by the next.
    await writeFile(marker, "an unfinished svc backup: the next backup into this directory clears it\n");
    await fsyncFile(dest);
    await mkdir(data, { mode: 0o700 });
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
    await rm(marker);
    await fsyncFile(dest);
    return { directory: dest, manifest, linkedBytes };
  } catch (err) {
    rmSync(created ? dest : data, { recursive: true, force: true });
    rmSync(join(dest, `${MANIFEST_FILE}.tmp`), { force: true });
    rmSync(marker, { force: true });
    throw fileSystemRefusal(err, dest);
  } finally {
    running = false;
  }
}
