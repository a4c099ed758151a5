import { type AuditEvent, ListAuditEventsResponseSchema } from "@svc/sdk/gen/svc/monitoring/v1/audit_pb";
import type { Command } from "commander";
import { pageSizeOption, printPage, projectOption, UsageError } from "../common.ts";
import { type CliIo, clientsOf, jsonOf, outOf, printJson } from "./alerts.ts";

const UNITS: Record<string, number> = { m: 60_000, h: 3_600_000, d: 86_400_000 };

/** "24h", "7d", "30m" before now, or an ISO time; "" is unbounded (0). */
export function timeOf(value: string | undefined, flag: string, nowMs = Date.now()): bigint {
  if (!value) return 0n;
  const ago = /^(\d+)([mhd])$/.exec(value);
  if (ago) return BigInt(nowMs - Number(ago[1]) * UNITS[ago[2]]);
  const t = Date.parse(value);
  if (Number.isNaN(t))
    throw new UsageError(
      `${flag} must be a duration before now (30m, 24h, 7d) or an ISO time (2026-11-27T10:00Z)`,
    );
  return BigInt(t);
}

function eventLine(e: AuditEvent): string {
  const detail = Object.entries(e.actorDetail)
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
  return [
    new Date(Number(e.timeUnixMs)).toISOString(),
    e.actorKind,
    detail ? `${e.actor} (${detail})` : e.actor,
    e.method,
    e.resource || "-",
    e.replay ? `${e.outcome} (replay)` : e.outcome,
    e.changedFields.join(",") || "-",
    e.clientAddress,
    e.userAgent || "-",
  ].join("\t");
}

/** `svc audit list`: who did what, newest first (project owners and audit.read; the operator for --all-projects). */
export function registerAuditCommands(program: Command, io: CliIo = {}): void {
  const { out, err } = outOf(io);
  const audit = program
    .command("audit")
    .description("the audit log: every change, refused ones included (owners or audit.read; SVC_TOKEN)");
  audit
    .command("list")
    .description("one page of audit events, newest first (the next page's token goes to stderr)")
    .addOption(projectOption("projects/<project_id>", false))
    .option("--all-projects", "every project's events (the operator token)")
    .option(
      "--actor <actor>",
      "users/<id>, projects/<p>/serviceAccounts/<id>, operator, or a kind (CI_TOKEN)",
    )
    .option("--method <method>", "a method, e.g. RotateKey or svc.iam.v1.KeyService/RotateKey")
    .option(
      "--resource <name>",
      "a resource name (with what is under it: a service account's keys), or a prefix ending in / (projects/<p>/alertRules/)",
    )
    .option("--since <time>", "from: 30m, 24h, 7d before now, or an ISO time")
    .option("--until <time>", "until (exclusive): a duration before now or an ISO time")
    .option("--page-size <n>", "events per page", "50")
    .option("--page-token <token>", "nextPageToken of the previous page")
    .option("--json", "print JSON")
    .action(async (opts, cmd: Command) => {
      const pageSize = pageSizeOption(opts.pageSize);
      const request = {
        projectName: opts.allProjects ? "" : (opts.project ?? ""),
        actor: opts.actor ?? "",
        method: opts.method ?? "",
        resource: opts.resource ?? "",
        startTimeUnixMs: timeOf(opts.since, "--since"),
        endTimeUnixMs: timeOf(opts.until, "--until"),
        pageSize,
        pageToken: opts.pageToken ?? "",
      };
      const clients = clientsOf(cmd, io);
      const res = opts.allProjects
        ? await clients.admin.audit.listAuditEvents(request)
        : await clients.audit.listAuditEvents(request);
      if (opts.json) return printJson(out, jsonOf(ListAuditEventsResponseSchema, res));
      const header = "TIME\tACTOR KIND\tACTOR\tMETHOD\tRESOURCE\tOUTCOME\tCHANGED\tADDRESS\tUSER AGENT";
      printPage(
        { out, err, toTerminal: !io.stdout },
        [header, ...res.events.map(eventLine)],
        res.nextPageToken,
      );
    });
}
