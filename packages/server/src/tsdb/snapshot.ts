/**
 * The files of a snapshot (Tsdb.snapshot): blocks as hard links (copies across file systems), the
 * latest checkpoint and the WAL segments up to the one sealed for it, and a VERSION file.
 */
import { constants, linkSync, readdirSync, statSync } from "node:fs";
import { copyFile, mkdir, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import type { Logger } from "pino";
import type { SnapshotFile } from "./api.ts";
import type { Block } from "./block.ts";
import { VERSION_FILE, versionFileText } from "./version.ts";
import { segmentName, walFilesUpTo } from "./wal.ts";

/**
 * Writes the snapshot of `blocks` and of the WAL in `walDir` up to segment `sealed` into `dest`
 * (created; must not exist). The caller keeps the blocks and those WAL files from being deleted
 * meanwhile (it holds the blocks and the compaction slot).
 */
export async function writeSnapshot(
  dest: string,
  blocks: readonly Block[],
  walDir: string,
  sealed: number,
  log: Logger,
): Promise<SnapshotFile[]> {
  await mkdir(dest);
  const files: SnapshotFile[] = [];
  let linkRefused = false;
  const add = async (rel: string, from: string, link: boolean) => {
    const to = join(dest, rel);
    let linked = false;
    if (link) {
      try {
        linkSync(from, to);
        linked = true;
      } catch (err) {
        // Another file system, or links not allowed: copied instead (said once per snapshot).
        if (!linkRefused)
          log.debug({ err, dest }, "tsdb snapshot: block files copied, a hard link was refused");
        linkRefused = true;
      }
    }
    if (!linked) await copyFile(from, to, constants.COPYFILE_FICLONE);
    files.push({ path: rel, bytes: statSync(to).size, linked });
  };
  await mkdir(join(dest, "blocks"));
  for (const b of blocks) {
    const name = basename(b.dir);
    await mkdir(join(dest, "blocks", name));
    // Block files are never written after the block is renamed into place: links are safe.
    for (const f of readdirSync(b.dir)) await add(join("blocks", name, f), join(b.dir, f), true);
  }
  // WAL files are copied: a replay truncates a torn tail in place, which must not reach the live store.
  await mkdir(join(dest, "wal"));
  const { checkpoint, segments } = walFilesUpTo(walDir, sealed);
  if (checkpoint !== undefined) {
    const cp = `checkpoint.${segmentName(checkpoint)}`;
    await mkdir(join(dest, "wal", cp));
    for (const f of readdirSync(join(walDir, cp))) await add(join("wal", cp, f), join(walDir, cp, f), false);
  }
  for (const s of segments) await add(join("wal", segmentName(s)), join(walDir, segmentName(s)), false);
  await writeFile(join(dest, VERSION_FILE), versionFileText());
  files.push({ path: VERSION_FILE, bytes: statSync(join(dest, VERSION_FILE)).size, linked: false });
  return files;
}
