import type { JsonValue } from "@bufbuild/protobuf";
import { type ServiceAccount, ServiceAccountSchema } from "@svc/sdk/gen/svc/iam/v1/service_account_pb";
import type { Command } from "commander";
import { printTable, projectOption, UsageError } from "../common.ts";
import { type CliIo, clientsOf, iso, jsonOf, outOf, printJson } from "./alerts.ts";
import { registerKeyCommands } from "./keys.ts";

/** The templates a service account is created from (the server is the authority; this is for --help). */
export const templates = {
  "Metrics scraper": "monitoring.read",
  "Alert manager": "monitoring.read, monitoring.write",
  "Notification manager": "monitoring.read, notifications.write",
  "Silence manager": "monitoring.read, silences.write",
  Auditor: "audit.read",
} as const;

/** Accepts the template's name in any case, or its short form (scraper, alert-manager, notification-manager). */
export function templateOf(s: string): string {
  const norm = s.toLowerCase().replace(/[\s_-]+/g, "");
  const key = (name: string) => name.toLowerCase().replace(/\s+/g, "");
  const exact = Object.keys(templates).find((name) => key(name) === norm);
  if (exact) return exact;
  // A short form must name one template ("manager" alone names two).
  const partial = Object.keys(templates).filter(
    (name) => key(name).startsWith(norm) || key(name).endsWith(norm),
  );
  if (partial.length === 1) return partial[0];
  throw new UsageError(
    `--template must be one of ${Object.keys(templates)
      .map((t) => `"${t}"`)
      .join(", ")}`,
  );
}

/** A bare id becomes projects/<p>/serviceAccounts/<id> when --project (or its default) is known. */
function nameOf(arg: string, project: string | undefined): string {
  if (arg.startsWith("projects/")) return arg;
  if (!project)
    throw new UsageError("give the full name projects/<p>/serviceAccounts/<id>, or --project with the id");
  return `${project}/serviceAccounts/${arg}`;
}

function row(sa: ServiceAccount): string[] {
  return [sa.name, sa.state, sa.template, sa.permissions.join(","), iso(sa.createTimeUnix), sa.displayName];
}
const header = ["NAME", "STATE", "TEMPLATE", "PERMISSIONS", "CREATED", "DISPLAY NAME"];

/** `svc service-accounts`: unattended project identities and their keys (a console session). */
export function registerServiceAccountCommands(program: Command, io: CliIo = {}): void {
  const { out, err } = outOf(io);
  const print = (cmd: Command, sa: ServiceAccount) => {
    if (cmd.opts().json) return printJson(out, jsonOf(ServiceAccountSchema, sa));
    printTable(out, header, [row(sa)]);
  };
  const sas = program
    .command("service-accounts")
    .alias("sa")
    .description("project service accounts and their keys (owners; a console session in SVC_TOKEN)");

  sas
    .command("list")
    .description("the project's service accounts")
    .addOption(projectOption())
    .option("--json", "print JSON")
    .addHelpText("after", "\nExample:\n  svc service-accounts list --project projects/demo")
    .action(async (opts, cmd: Command) => {
      const { serviceAccounts } = await clientsOf(cmd, io).serviceAccounts.listServiceAccounts({
        parent: opts.project,
      });
      if (opts.json)
        return printJson(out, serviceAccounts.map((s) => jsonOf(ServiceAccountSchema, s)) as JsonValue);
      printTable(out, header, serviceAccounts.map(row));
    });

  sas
    .command("create")
    .description("create a service account from a permission template")
    .addOption(projectOption())
    .requiredOption("--display-name <name>", "a name to recognise it by")
    .requiredOption(
      "--template <name>",
      `${Object.entries(templates)
        .map(([t, p]) => `"${t}" (${p})`)
        .join(" or ")}`,
    )
    .option("--json", "print JSON")
    .addHelpText(
      "after",
      `
Examples:
  svc service-accounts create --project projects/demo --display-name grafana --template "Metrics scraper"
  svc service-accounts create --display-name deployer --template alert-manager   # project from SVC_PROJECT
  svc service-accounts keys create <id> --display-name ci > key.txt               # then a key for it`,
    )
    .action(async (opts, cmd: Command) => {
      const sa = await clientsOf(cmd, io).serviceAccounts.createServiceAccount({
        parent: opts.project,
        displayName: opts.displayName,
        template: templateOf(opts.template),
      });
      print(cmd, sa);
    });

  for (const [verb, what] of [
    ["get", "one service account"],
    ["disable", "disable: every key and CI token of the account is refused from the next request"],
    ["enable", "enable again: its unexpired, unrevoked keys work again"],
  ] as const) {
    sas
      .command(verb)
      .description(what)
      .argument("<name>", "projects/<p>/serviceAccounts/<id>, or the id with --project")
      .addOption(projectOption("projects/<project_id> when <name> is a bare id", false))
      .option("--json", "print JSON")
      .addHelpText("after", `\nExample:\n  svc service-accounts ${verb} projects/demo/serviceAccounts/<id>`)
      .action(async (arg: string, opts, cmd: Command) => {
        const c = clientsOf(cmd, io).serviceAccounts;
        const name = nameOf(arg, opts.project);
        const sa =
          verb === "get"
            ? await c.getServiceAccount({ name })
            : verb === "disable"
              ? await c.disableServiceAccount({ name })
              : await c.enableServiceAccount({ name });
        if (verb !== "get" && !cmd.opts().json) err(`${sa.name} is ${sa.state}\n`);
        print(cmd, sa);
      });
  }

  // `svc service-accounts keys …`: the key commands with the account as parent.
  const keys = sas
    .command("keys")
    .description("keys of one service account: list, create, rotate, revoke, recover");
  registerKeyCommands(keys, io, {
    accountArgument: (arg: string, cmd: Command) => nameOf(arg, cmd.opts().project),
  });
}
