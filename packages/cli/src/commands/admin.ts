import { resolve } from "node:path";
import { BackupResponseSchema } from "@svc/sdk/gen/svc/admin/v1/admin_pb";
import type { Command } from "commander";
// Restore runs offline, in this process: the server's restore code is bundled into the CLI (plain node).
import { restoreBackup } from "../../../server/src/backup/restore.ts";
// So does the store check: it reads the files the way a server start would, changing nothing.
import { checkTsdb } from "../../../server/src/tsdb/check.ts";
import { outputFormat, printStructured } from "../common.ts";
import { type CliIo, clientsOf, jsonOf, outOf } from "./alerts.ts";

const mib = (n: bigint | number) => `${(Number(n) / 2 ** 20).toFixed(1)} MiB`;

/** `svc admin`: the provider operator's commands (SVC_TOKEN = the operator token, SVC_ADMIN_TOKEN). */
export function registerAdminCommands(program: Command, io: CliIo = {}): void {
  const { out } = outOf(io);
  const admin = program
    .command("admin")
    .description(
      "operator commands: online backup, offline restore and offline check of the embedded defaults",
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
    .option("--json", "print JSON")
    .action(async (opts, cmd: Command) => {
      const res = await clientsOf(cmd, io).admin.operations.backup({ directory: resolve(opts.to as string) });
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
}

/** `svc admin check` found damage: exit code 1 after the report. */
class StoreDamagedError extends Error {
  constructor(units: number) {
    super(`the metrics store has ${units} damaged units`);
    this.name = "StoreDamagedError";
  }
}
