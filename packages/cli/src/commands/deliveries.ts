import {
  type Delivery,
  DeliverySchema,
  ListDeliveriesResponseSchema,
} from "@svc/sdk/gen/svc/monitoring/v1/destinations_pb";
import type { Command } from "commander";
import { pageSizeOption, printPage, projectOption, stateOption } from "../common.ts";
import { addGetCommand, type CliIo, clientsOf, iso, jsonOf, outOf, printJson } from "./alerts.ts";

const states = ["PENDING", "SENT", "FAILED", "SKIPPED"];

/** SENT, FAILED, PENDING, or the skip reason of a skipped one. */
function stateOf(d: Delivery): string {
  return d.state === "SKIPPED" && d.skipReason ? `SKIPPED (${d.skipReason})` : d.state;
}

/** time, destination, event, state or skip reason, attempts, last HTTP code, and the name for `get`. */
export function deliveryLine(d: Delivery): string {
  const last = d.attempts.at(-1);
  return [
    iso(d.createTimeUnix),
    d.destination,
    d.eventType,
    stateOf(d),
    `attempts ${d.attempts.length}`,
    `code ${last?.responseCode ? last.responseCode : "-"}`,
    d.name,
  ].join("\t");
}

export function printDelivery(out: (s: string) => void, d: Delivery): void {
  const rows: [string, string][] = [
    ["name", d.name],
    ["destination", d.destination],
    ["incident", d.incident || "- (test notification)"],
    ["event", d.eventType],
    ["state", stateOf(d)],
    ["created", iso(d.createTimeUnix)],
  ];
  if (d.state === "PENDING") rows.push(["next attempt", iso(d.nextAttemptTimeUnix)]);
  rows.push(["expires", iso(d.expireTimeUnix)]);
  for (const [k, v] of rows) out(`${k.padEnd(12)} ${v}\n`);
  out(d.attempts.length ? "attempts:\n" : "attempts:   none yet\n");
  for (const a of d.attempts)
    out(
      `  ${iso(a.timeUnix)}\t${a.status}\tcode ${a.responseCode || "-"}\t${a.detail || "-"}\t${a.durationMs} ms\t${a.attemptId}\n`,
    );
}

/** `svc deliveries`: the record of every notification sent (or not) to a destination. Reading only. */
export function registerDeliveryCommands(program: Command, io: CliIo = {}): void {
  const { out, err } = outOf(io);
  const deliveries = program
    .command("deliveries")
    .description("notification deliveries with their attempts, newest first (monitoring.read; SVC_TOKEN)");

  deliveries
    .command("list")
    .description("one page of the project's deliveries (the next page's token goes to stderr)")
    .addOption(projectOption())
    .option("--destination <name>", "only this destination's: projects/<p>/destinations/<id>")
    .option("--incident <name>", "only this incident's: projects/<p>/incidents/<id>")
    .option("--state <state>", "PENDING, SENT, FAILED or SKIPPED (default: all)")
    .option("--page-size <n>", "deliveries per page", "50")
    .option("--page-token <token>", "nextPageToken of the previous page")
    .option("--json", "print JSON")
    .action(async (opts, cmd: Command) => {
      const state = stateOption(opts.state, states);
      const pageSize = pageSizeOption(opts.pageSize);
      const clients = clientsOf(cmd, io);
      const res = await clients.destinations.listDeliveries({
        projectName: opts.project,
        destination: opts.destination ?? "",
        incident: opts.incident ?? "",
        state,
        pageSize,
        pageToken: opts.pageToken ?? "",
      });
      if (opts.json) return printJson(out, jsonOf(ListDeliveriesResponseSchema, res));
      printPage({ out, err, toTerminal: !io.stdout }, res.deliveries.map(deliveryLine), res.nextPageToken);
    });

  addGetCommand(deliveries, io, {
    description: "one delivery with every attempt: time, status, code, detail, duration",
    nameHelp: "projects/<p>/destinations/<d>/deliveries/<delivery_id>",
    schema: DeliverySchema,
    read: (clients, name) => clients.destinations.getDelivery({ name }),
    print: printDelivery,
  });
}
