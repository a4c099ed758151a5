/**
 * `svc admin backup --to ROOT --keep N`: each run writes a new backup into ROOT/<UTC time> and then keeps
 * the N newest complete backups of ROOT, deleting older ones. Only directories this command names
 * (`svc-YYYYMMDDTHHMMSS.mmmZ`, UTC) are ever deleted, and only complete ones (with manifest.json) count towards N;
 * an unfinished one older than the newest complete backup is a failed run's leftover and goes too.
 * The server writes the backup on its host, so pruning needs ROOT to be the same directory here: run it
 * on the server's host (the systemd timer in deploy/ does).
 */
import { existsSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";

const NAME = /^svc-\d{8}T\d{6}\.\d{3}Z$/;

/** The directory of a backup taken at `ms`: sortable by name. */
export function rotatedName(ms: number): string {
  return `svc-${new Date(ms).toISOString().replace(/[-:]/g, "")}`;
}

/** Deletes what `keep` leaves over in `root`; returns the names deleted. */
export function pruneBackups(root: string, keep: number): string[] {
  const names = readdirSync(root, { withFileTypes: true })
    .filter((e) => e.isDirectory() && NAME.test(e.name))
    .map((e) => e.name)
    .sort();
  const complete = names.filter((n) => existsSync(join(root, n, "manifest.json")));
  const kept = new Set(complete.slice(-keep));
  const newest = complete.at(-1) ?? "";
  const doomed = names.filter((n) => !kept.has(n) && (complete.includes(n) || n < newest));
  for (const n of doomed) rmSync(join(root, n), { recursive: true, force: true });
  return doomed;
}
