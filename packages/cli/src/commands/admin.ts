import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import {
  BackupResponseSchema,
  ListDeliveryBacklogResponseSchema,
  ListProjectUsageResponseSchema,
} from "@svc/sdk/gen/svc/admin/v1/admin_pb";
import type { Command } from "commander";
// Restore runs offline, in this process: the server's restore code is bundled into the CLI (plain node).
import { restoreBackup } from "../../../server/src/backup/restore.ts";
// So does the store check: it reads the files the way a server start would, changing nothing.
import { checkTsdb } from "../../../server/src/tsdb/check.ts";
import { pruneBackups, rotatedName } from "../backup-rotation.ts";
import { outputFormat, printStructured, UsageError } from "../common.ts";
import { type CliIo, clientsOf, iso, jsonOf, outOf } from "./alerts.ts";
import { deliveryLine } from "./deliveries.ts";

const mib = (n: bigint | number) => `${(Number(n) / 2 ** 20).toFixed(1)} MiB`;

/** `svc admin`: the provider operator's commands (SVC_TOKEN = the operator token, SVC_ADMIN_TOKEN). */
export function registerAdminCommands(program: Command, io: CliIo = {}): void {
  const { out, err } = outOf(io);
  const admin = program
    .command("admin")
    .description(
      "operator commands: online backup, offline restore and offline check of the embedded defaults, the notification backlog, usage by project",
    );

  admin
    .command("backup")
    .description(
      "online backup of the server's metrics store and SQLite database into a directory on the server's host (operator token in SVC_TOKEN)",
    )
    .requiredOption(
      "--to <dir>",
      "destination on the server's host: absent or empty, outside the data directory (a relative path is made absolute here)",
    )
    .option(
      "--keep <n>",
      "treat --to as a root: write into <dir>/svc-<UTC time> and keep only the n newest complete backups there (run on the server's host)",
    )
    .option("--json", "print JSON")
    .action(async (opts, cmd: Command) => {
      const root = resolve(opts.to as string);
      let keep: number | undefined;
      if (opts.keep !== undefined) {
        keep = Number(opts.keep);
        if (!Number.isInteger(keep) || keep < 1 || keep > 1000)
          throw new UsageError("--keep must be a whole number from 1 to 1000");
        if (!existsSync(root))
          throw new UsageError(
            `--keep: ${root} does not exist here; create it on the server's host and run there`,
          );
      }
      const directory = keep === undefined ? root : join(root, rotatedName(Date.now()));
      const res = await clientsOf(cmd, io).admin.operations.backup({ directory });
      if (keep !== undefined) {
        // The server wrote it on its host: pruning here is only right if this is that host.
        if (!existsSync(join(directory, "manifest.json")))
          throw new UsageError(
            `--keep: the backup ${directory} is not visible here; run svc admin backup --keep on the server's host (nothing was deleted)`,
          );
        for (const gone of pruneBackups(root, keep)) err(`deleted ${join(root, gone)} (--keep ${keep})\n`);
      }
      if (opts.json) return printStructured(out, jsonOf(BackupResponseSchema, res));
      const rows: [string, string][] = [
        ["directory", res.directory],
        ["snapshot time", new Date(Number(res.snapshotTimeUnixMs)).toISOString()],
        ["files", String(res.files)],
        ["size", `${mib(res.totalBytes)} (${mib(res.linkedBytes)} hard-linked to the live blocks)`],
        [
          "formats",
          `TSDB WAL ${res.tsdbWalFormat}, block ${res.tsdbBlockFormat}, schema ${res.schemaVersion} (${res.schemaMigration})`,
        ],
      ];
      for (const [k, v] of rows) out(`${k.padEnd(14)} ${v}\n`);
    });

  admin
    .command("restore")
    .description(
      "offline: check a backup against its manifest and make a new data directory from it (run on the backup's host, with the server stopped or pointed elsewhere)",
    )
    .requiredOption("--from <dir>", "the backup directory (written by `svc admin backup`)")
    .requiredOption("--data-dir <dir>", "the new data directory: absent or empty; never overwritten")
    .option("--json", "print JSON")
    .action(async (opts) => {
      const { dataDir, manifest } = await restoreBackup(opts.from as string, opts.dataDir as string);
      const summary = {
        dataDir,
        snapshotTime: new Date(manifest.snapshotTimeUnixMs).toISOString(),
        files: manifest.files.length,
        totalBytes: manifest.totalBytes,
        formats: manifest.formats,
      };
      if (opts.json || outputFormat() !== "table") return printStructured(out, summary);
      out(`restored ${summary.files} files (${mib(summary.totalBytes)}) into ${dataDir}\n`);
      out(`snapshot time ${summary.snapshotTime}; start the server with SVC_DATA_DIR=${dataDir}\n`);
    });

  admin
    .command("check")
    .description(
      "offline, read-only: read the metrics store's WAL, checkpoint and blocks and report damaged records, chunks and blocks (exit code 1 when any is damaged)",
    )
    .requiredOption("--data-dir <dir>", "the server's data directory (SVC_DATA_DIR), or its tsdb/ directory")
    .option("--json", "print JSON")
    .action((opts) => {
      const report = checkTsdb(resolve(opts.dataDir as string));
      if (opts.json || outputFormat() !== "table")
        // Unknown sample counts are null, never 0 (missing data is not zero).
        printStructured(out, {
          ...report,
          format: { ...report.format },
          damage: report.damage.map((d) => ({ ...d, samples: d.samples ?? null })),
          notes: [...report.notes],
        });
      else {
        out(`store ${report.dir}: WAL format ${report.format.wal}, block format ${report.format.block}\n`);
        out(`read ${report.walFiles} WAL files and ${report.blocks} blocks\n`);
        for (const d of report.damage) {
          const samples = d.samples === undefined ? "unknown" : String(d.samples);
          out(
            `${d.kind}\t${d.file}\toffset ${d.offset}\t${d.bytes} bytes\t${samples} samples\t${d.detail}\n`,
          );
        }
        for (const n of report.notes) out(`note\t${n}\n`);
        out(
          report.damaged
            ? `DAMAGED: a start drops these units (${report.samplesDropped} samples where known); see docs/operations.md#svcstoredamaged\n`
            : "no damage found\n",
        );
      }
      if (report.damaged) throw new StoreDamagedError(report.damage.length);
    });

  admin
    .command("deliveries")
    .description(
      "the notification backlog across every project: totals, the destinations holding most, and the deliveries due longest with their last attempt (operator token in SVC_TOKEN)",
    )
    .option("--top <n>", "how many destinations and deliveries (at most 500)", "20")
    .option("--json", "print JSON")
    .action(async (opts, cmd: Command) => {
      const top = Number(opts.top);
      if (!Number.isInteger(top) || top < 1 || top > 500)
        throw new UsageError("--top must be a whole number from 1 to 500");
      const res = await clientsOf(cmd, io).admin.operations.listDeliveryBacklog({ pageSize: top });
      if (opts.json || outputFormat() !== "table")
        return printStructured(out, jsonOf(ListDeliveryBacklogResponseSchema, res));
      const age = res.oldestDueAgeSeconds === undefined ? "none due" : `${res.oldestDueAgeSeconds} s`;
      out(`pending ${res.pending}\tdue ${res.due}\toldest due waited ${age}\n`);
      if (res.destinations.length) out("destinations (most pending first):\n");
      for (const d of res.destinations)
        out(
          `  ${d.destination}\t${d.kind}\tpending ${d.pending}\tdue ${d.due}\toldest ${iso(d.oldestNextAttemptTimeUnix)}\n`,
        );
      if (res.deliveries.length) out("deliveries (due longest first):\n");
      for (const d of res.deliveries)
        out(
          `  next ${iso(d.nextAttemptTimeUnix)}\t${deliveryLine(d)}\t${d.attempts.at(-1)?.detail || "-"}\n`,
        );
    });

  admin
    .command("usage")
    .description(
      "the projects using the metrics store most: active series, samples stored per second and query CPU seconds over the last 5 minutes, and stored bytes, heaviest first (operator token in SVC_TOKEN)",
    )
    .option("--top <n>", "how many projects (at most 1000)", "20")
    .option(
      "--sort <figure>",
      "active_series, samples_per_second, query_cpu_seconds or stored_bytes",
      "active_series",
    )
    .option("--json", "print JSON")
    .action(async (opts, cmd: Command) => {
      const top = Number(opts.top);
      if (!Number.isInteger(top) || top < 1 || top > 1000)
        throw new UsageError("--top must be a whole number from 1 to 1000");
      const res = await clientsOf(cmd, io).admin.operations.listProjectUsage({
        pageSize: top,
        orderBy: opts.sort as string,
      });
      if (opts.json || outputFormat() !== "table")
        return printStructured(out, jsonOf(ListProjectUsageResponseSchema, res));
      out(`${res.projects.length} of ${res.totalProjects} projects at ${iso(res.timeUnix)}\n`);
      out("project\tactive series\tsamples/s\tquery CPU s\tstored bytes\n");
      // A figure the backend cannot give, or a project without queries, prints "-", never 0.
      for (const p of res.projects)
        out(
          `${p.project}\t${p.activeSeries}\t${p.samplesPerSecond.toFixed(2)}\t${p.queryCpuSeconds?.toFixed(3) ?? "-"}\t${p.storedBytes ?? "-"}\n`,
        );
      for (const u of res.unavailable) out(`unavailable: ${u}\n`);
    });
}

/** `svc admin check` found damage: exit code 1 after the report. */
class StoreDamagedError extends Error {
  constructor(units: number) {
    super(`the metrics store has ${units} damaged units`);
    this.name = "StoreDamagedError";
  }
}
