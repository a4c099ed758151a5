import { Command, Option } from "commander";
import { registerAdminCommands } from "./commands/admin.ts";
import { registerAlertCommands } from "./commands/alerts.ts";
import { registerAuditCommands } from "./commands/audit.ts";
import { registerAuthCommands } from "./commands/auth.ts";
import { registerCiTrustCommands } from "./commands/ci-trusts.ts";
import { registerCompletionCommand } from "./commands/completion.ts";
import { registerConfigCommands } from "./commands/config.ts";
import { registerDeliveryCommands } from "./commands/deliveries.ts";
import { type DestinationIo, registerDestinationCommands } from "./commands/destinations.ts";
import { registerIncidentCommands } from "./commands/incidents.ts";
import { registerKeyCommands } from "./commands/keys.ts";
import { registerLoginCommands } from "./commands/login.ts";
import { registerMonitoringCommands } from "./commands/monitoring.ts";
import { registerServiceAccountCommands } from "./commands/service-accounts.ts";
import { registerSilenceCommands } from "./commands/silences.ts";
import { type OutputFormat, outputFormats, readConfig, setOutputFormat } from "./common.ts";

/**
 * `svc`: one file per command group under commands/, each adding itself to the program. The global
 * `--output` picks table, JSON or YAML; a command's own `--json` is the same as `--output json`.
 */
export function buildProgram(io: DestinationIo = {}): Command {
  const program = new Command("svc")
    .description("svc command-line tool: monitoring and automation for your VMs")
    .version("1.1.2")
    .option("--base-url <url>", "svc API origin (default: $SVC_BASE_URL or the config file)")
    .addOption(outputOption())
    .enablePositionalOptions()
    .showHelpAfterError()
    .exitOverride()
    .addHelpText(
      "after",
      `
Credentials come from the environment or a file, never from an argument: SVC_API_KEY (or SVC_TOKEN), or
SVC_API_KEY_FILE / \`svc config set keyFile <path>\`. Exit codes: 0 ok, 1 error, 2 usage, 3 invalid request,
4 unauthenticated or denied, 5 not found, 6 conflict, 7 retry later (see docs/cli.md).

Examples:
  export SVC_BASE_URL=http://127.0.0.1:8080 SVC_PROJECT=projects/demo
  export SVC_API_KEY="$(cat ~/.config/svc/key)"
  svc monitoring list --inventory-only
  svc alerts list --output yaml
  svc service-accounts create --display-name grafana --template "Metrics scraper"`,
    );
  if (io.stdout || io.stderr) {
    program.configureOutput({
      ...(io.stdout ? { writeOut: io.stdout } : {}),
      ...(io.stderr ? { writeErr: io.stderr } : {}),
    });
  }
  program.hook("preAction", (_root, action) => {
    const o = action.optsWithGlobals();
    let format = o.output as OutputFormat | undefined;
    if (format === undefined && o.json) format = "json";
    if (format === undefined) {
      try {
        format = readConfig().output;
      } catch {
        // reported by the command that needs the file
      }
    }
    setOutputFormat(format ?? "table");
    // Commands print structured output when their --json is set: --output json|yaml sets it too.
    if (format === "json" || format === "yaml") action.setOptionValue("json", true);
  });
  registerAuthCommands(program);
  registerLoginCommands(program, io);
  registerMonitoringCommands(program, io);
  registerServiceAccountCommands(program, io);
  registerKeyCommands(program, io);
  registerCiTrustCommands(program, io);
  registerAlertCommands(program, io);
  registerIncidentCommands(program, io);
  registerSilenceCommands(program, io);
  registerDestinationCommands(program, io);
  registerDeliveryCommands(program, io);
  registerAuditCommands(program, io);
  registerConfigCommands(program, io);
  registerAdminCommands(program, io);
  registerCompletionCommand(program, io);
  // Program options are positional (before the command, for `auth ci -- …`), so every command that
  // prints also takes --output itself.
  const addOutput = (cmd: Command) => {
    for (const c of cmd.commands) addOutput(c);
    if (cmd.commands.length === 0 && !["config", "completion"].includes(cmd.parent?.name() ?? "")) {
      if (cmd.name() !== "completion" && !cmd.options.some((o) => o.long === "--output"))
        cmd.addOption(outputOption());
    }
  };
  addOutput(program);
  addExamples(program);
  return program;
}

/** `--help` examples of the commands whose files do not add their own (alerts, incidents, notifications, CI). */
const examples: Readonly<Record<string, readonly string[]>> = {
  "auth ci verify": [
    "svc auth ci verify --setup-id <setup id> --audience <audience>   # in the workflow, SVC_SETUP_CODE from secrets",
  ],
  "alerts templates": ["svc alerts templates", "svc alerts templates --output yaml"],
  "alerts list": ["svc alerts list --project projects/demo", "svc alerts list --output json > rules.json"],
  "alerts get": [
    "svc alerts get projects/demo/alertRules/<id> --instances",
    "svc alerts get projects/demo/alertRules/<id> --output yaml > rule.yaml",
  ],
  "alerts save": [
    "svc alerts save --project projects/demo --template cpu --threshold 85 --sustained 5m --all-vms --enabled",
    "svc alerts save --file rule.yaml                        # edits the rule the file names, at its version",
    "svc alerts save --project projects/demo --id <id> --edit --severity CRITICAL",
  ],
  "alerts preview": [
    "svc alerts preview --project projects/demo --template cpu --threshold 90 --history 6h",
    "svc alerts preview --rule projects/demo/alertRules/<id> --threshold 95",
  ],
  "alerts delete": ["svc alerts delete projects/demo/alertRules/<id>"],
  "incidents list": [
    "svc incidents list --project projects/demo --state OPEN",
    "svc incidents list --vm projects/demo/locations/dc-1/vms/web-2 --output json",
  ],
  "incidents get": ["svc incidents get projects/demo/incidents/<id>"],
  "silences create": [
    "svc silences create --project projects/demo --rule projects/demo/alertRules/<id> --duration 2h --comment deploy",
    "svc silences create --project projects/demo --vm projects/demo/locations/dc-1/vms/web-2 --start 2026-11-28T22:00:00Z --end 2026-11-29T02:00:00Z --comment upgrade",
  ],
  "silences list": ["svc silences list --project projects/demo --state ACTIVE"],
  "silences get": ["svc silences get projects/demo/silences/<id>"],
  "silences update": ["svc silences update projects/demo/silences/<id> --duration 4h"],
  "silences expire": ["svc silences expire projects/demo/silences/<id>"],
  "destinations list": ["svc destinations list --project projects/demo"],
  "destinations get": ["svc destinations get projects/demo/destinations/<id> --output yaml"],
  "destinations create": [
    "svc destinations create --project projects/demo --kind WEBHOOK --display-name ops --url https://hooks.example.com/svc",
    "svc destinations create --project projects/demo --kind SLACK --display-name chat --url-file slack-url.txt",
    "svc destinations create --project projects/demo --kind EMAIL --display-name oncall --recipient users/<id>",
  ],
  "destinations update": [
    "svc destinations update projects/demo/destinations/<id> --pause",
    "svc destinations update projects/demo/destinations/<id> --url-file new-url.txt",
  ],
  "destinations delete": ["svc destinations delete projects/demo/destinations/<id>"],
  "destinations rotate-secret": [
    "svc destinations rotate-secret projects/demo/destinations/<id> --overlap 1h",
  ],
  "deliveries list": [
    "svc deliveries list --project projects/demo --state FAILED",
    "svc deliveries list --destination projects/demo/destinations/<id> --output json",
  ],
  "audit list": [
    "svc audit list --project projects/demo --since 7d",
    "svc audit list --project projects/demo --method RotateKey --output json",
    'SVC_TOKEN="$(cat .data/admin-token)" svc audit list --all-projects --actor operator',
  ],
  "admin backup": [
    'SVC_TOKEN="$(cat .data/admin-token)" svc admin backup --to /var/backups/svc/$(date +%F)',
    'SVC_TOKEN="$(cat /var/lib/svc/admin-token)" svc admin backup --to /var/lib/svc-backups --keep 7   # on the server\'s host',
  ],
  "admin usage": ['SVC_TOKEN="$(cat .data/admin-token)" svc admin usage --top 10 --sort samples_per_second'],
  "admin deliveries": ['SVC_TOKEN="$(cat .data/admin-token)" svc admin deliveries --top 10'],
  "admin restore": ["svc admin restore --from /var/backups/svc/2026-11-27 --data-dir /srv/svc/data-restored"],
  "admin check": [
    "svc admin check --data-dir /srv/svc/data",
    "svc admin check --data-dir /srv/svc/data --json",
  ],
  "deliveries get": ["svc deliveries get projects/demo/destinations/<id>/deliveries/<delivery_id>"],
};

function addExamples(program: Command): void {
  const walk = (cmd: Command, path: string) => {
    for (const c of cmd.commands) walk(c, path ? `${path} ${c.name()}` : c.name());
    const lines = examples[path];
    if (lines)
      cmd.addHelpText(
        "after",
        `\nExample${lines.length > 1 ? "s" : ""}:\n${lines.map((l) => `  ${l}`).join("\n")}`,
      );
  };
  walk(program, "");
}

function outputOption(): Option {
  return new Option(
    "-o, --output <format>",
    "table (default), json or yaml; --json is --output json",
  ).choices(outputFormats);
}
