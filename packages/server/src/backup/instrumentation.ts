import { counter, observed, type Registry } from "../instrument.ts";

/**
 * Backups as an operator leaves them running (`svc admin backup --keep`, the timer in deploy/): when the
 * last one succeeded, how long it took and how big it was, and every attempt by outcome. The `last`
 * families are absent until a backup succeeded in this process (missing is not zero); the mixin's
 * SvcBackupMissing reads them over 27 hours, so a restart in between loses nothing.
 */
export function createBackupMetrics(registry: Registry) {
  let last: { endMs: number; seconds: number; bytes: number } | undefined;
  observed(
    registry,
    "gauge",
    "svc_backup_last_success_timestamp_seconds",
    "When the last successful backup of this process finished, Unix seconds.",
    () => last && last.endMs / 1000,
  );
  observed(
    registry,
    "gauge",
    "svc_backup_last_duration_seconds",
    "How long the last successful backup took.",
    () => last?.seconds,
  );
  observed(
    registry,
    "gauge",
    "svc_backup_last_bytes",
    "Bytes of the last successful backup (hard-linked blocks included).",
    () => last?.bytes,
  );
  const attempts = counter(
    registry,
    "svc_backups_total",
    "Backups by outcome (ok, failed: refused or broken off).",
    ["outcome"],
    [{ outcome: "ok" }, { outcome: "failed" }],
  );
  return {
    /** Runs `take`, recording its outcome, duration and size. */
    async measure<T extends { manifest: { totalBytes: number } }>(
      now: () => number,
      take: () => Promise<T>,
    ): Promise<T> {
      const t0 = performance.now();
      try {
        const r = await take();
        last = { endMs: now(), seconds: (performance.now() - t0) / 1000, bytes: r.manifest.totalBytes };
        attempts.inc({ outcome: "ok" });
        return r;
      } catch (e) {
        attempts.inc({ outcome: "failed" });
        throw e;
      }
    },
  };
}

export type BackupMetrics = ReturnType<typeof createBackupMetrics>;
