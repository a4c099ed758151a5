/**
 * Offline restore (`svc admin restore --from DIR --data-dir NEW`): checks the whole backup against its
 * manifest first, then copies `data/` into a sibling of NEW and renames it into place, so a refused or
 * failed restore leaves nothing behind and never writes into an existing, non-empty directory. Plain
 * node: the CLI bundles it.
 */
import { randomBytes } from "node:crypto";
import {
  chmodSync,
  closeSync,
  existsSync,
  fsyncSync,
  openSync,
  readdirSync,
  rmdirSync,
  rmSync,
  statSync,
} from "node:fs";
import { copyFile, mkdir, rename } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { BackupRefusedError, type Manifest, verifyBackup } from "./manifest.ts";

export interface RestoreResult {
  readonly dataDir: string;
  readonly manifest: Manifest;
}

export async function restoreBackup(from: string, dataDir: string): Promise<RestoreResult> {
  const src = resolve(from);
  const dest = resolve(dataDir);
  if (!existsSync(src) || !statSync(src).isDirectory())
    throw new BackupRefusedError(src, "not a directory (--from must name a backup directory)");
  if (existsSync(dest) && (!statSync(dest).isDirectory() || readdirSync(dest).length > 0))
    throw new BackupRefusedError(
      dest,
      "exists and is not an empty directory: restore never overwrites; name a new one",
    );
  const manifest = await verifyBackup(src);
  const parent = dirname(dest);
  await mkdir(parent, { recursive: true });
  const staging = join(parent, `.${basename(dest)}.restoring-${randomBytes(4).toString("hex")}`);
  try {
    await mkdir(staging, { mode: 0o700 });
    for (const f of manifest.files) {
      const parts = f.path.split("/").slice(1); // under data/
      const to = join(staging, ...parts);
      await mkdir(dirname(to), { recursive: true, mode: 0o700 });
      await copyFile(join(src, ...f.path.split("/")), to);
      chmodSync(to, f.mode);
      fsync(to);
    }
    if (existsSync(dest)) rmdirSync(dest); // empty (checked above); rename needs it gone
    await rename(staging, dest);
    fsync(parent);
    return { dataDir: dest, manifest };
  } catch (err) {
    rmSync(staging, { recursive: true, force: true });
    throw err;
  }
}

function fsync(path: string): void {
  const fd = openSync(path, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
