import {
  type Incident,
  IncidentSchema,
  ListIncidentsResponseSchema,
} from "@svc/sdk/gen/svc/monitoring/v1/alerts_pb";
import type { Command } from "commander";
import { pageSizeOption, printPage, projectOption, stateOption } from "../common.ts";
import {
  addGetCommand,
  type CliIo,
  clientsOf,
  conditionOf,
  iso,
  jsonOf,
  outOf,
  printJson,
} from "./alerts.ts";

const states = ["OPEN", "RESOLVED", "RETIRED"];

/** What is notable about an incident besides its state: acknowledged, snoozed, no data, failing. */
function flagsOf(i: Incident): string {
  return [
    i.acknowledgedBy ? `acknowledged by ${i.acknowledgedBy}` : "",
    i.snoozeUntilUnix > 0n ? `snoozed until ${iso(i.snoozeUntilUnix)}` : "",
    i.silencedBy.length > 0 ? "silenced" : "",
    i.noData ? "NO DATA" : "",
    i.evaluationError ? "EVALUATION ERROR" : "",
  ]
    .filter(Boolean)
    .join(", ");
}

function incidentLine(i: Incident): string {
  return [
    i.name,
    i.state,
    i.severity,
    i.mountpoint ? `${i.vmName} ${i.mountpoint}` : i.vmName,
    conditionOf(i),
    `opened ${iso(i.openTimeUnix)}`,
    i.closeTimeUnix > 0n ? `closed ${iso(i.closeTimeUnix)}` : "open",
    flagsOf(i) || "-",
    i.ruleDisplayName,
  ].join("\t");
}

function printIncident(out: (s: string) => void, i: Incident): void {
  const value = (v: number | undefined) => (v === undefined ? "-" : String(v));
  const rows: [string, string][] = [
    ["name", i.name],
    ["state", i.retireReason ? `${i.state} (${i.retireReason})` : i.state],
    ["rule", `${i.rule} version ${i.ruleVersion} "${i.ruleDisplayName}"`],
    ["severity", i.severity],
    ["condition", conditionOf(i)],
    ["vm", i.mountpoint ? `${i.vmName} ${i.mountpoint}` : i.vmName],
    ["opened", iso(i.openTimeUnix)],
    ["closed", iso(i.closeTimeUnix)],
    ["values", `fired at ${value(i.firingValue)}, last ${value(i.lastValue)}`],
    ["flags", flagsOf(i) || "-"],
    ["silenced by", i.silencedBy.join(", ") || "-"],
    ["next notify", iso(i.nextNotifyTimeUnix)],
  ];
  for (const [k, v] of rows) out(`${k.padEnd(12)} ${v}\n`);
  out("events:\n");
  for (const e of i.events)
    out(`  ${iso(e.timeUnix)}\t${e.kind}\t${e.actor}${e.detail ? `\t${e.detail}` : ""}\n`);
}

/** `svc incidents`: reading only; acknowledge and snooze are done by people in the console. */
export function registerIncidentCommands(program: Command, io: CliIo = {}): void {
  const { out, err } = outOf(io);
  const incidents = program
    .command("incidents")
    .description("incidents of alert rules, newest first (monitoring.read; SVC_TOKEN)");

  incidents
    .command("list")
    .description("one page of the project's incidents (the next page's token goes to stderr)")
    .addOption(projectOption())
    .option("--state <state>", "OPEN, RESOLVED or RETIRED (default: all)")
    .option("--rule <name>", "only this rule's: projects/<p>/alertRules/<id>")
    .option("--vm <name>", "only this VM's (full name)")
    .option("--page-size <n>", "incidents per page", "50")
    .option("--page-token <token>", "nextPageToken of the previous page")
    .option("--json", "print JSON")
    .action(async (opts, cmd: Command) => {
      const state = stateOption(opts.state, states);
      const pageSize = pageSizeOption(opts.pageSize);
      const clients = clientsOf(cmd, io);
      const res = await clients.incidents.listIncidents({
        projectName: opts.project,
        state,
        rule: opts.rule ?? "",
        vmName: opts.vm ?? "",
        pageSize,
        pageToken: opts.pageToken ?? "",
      });
      if (opts.json) return printJson(out, jsonOf(ListIncidentsResponseSchema, res));
      printPage({ out, err, toTerminal: !io.stdout }, res.incidents.map(incidentLine), res.nextPageToken);
    });

  addGetCommand(incidents, io, {
    description: "one incident with its event timeline",
    nameHelp: "projects/<project_id>/incidents/<id>",
    schema: IncidentSchema,
    read: (clients, name) => clients.incidents.getIncident({ name }),
    print: printIncident,
  });
}
