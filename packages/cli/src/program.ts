import { Command, Option } from "commander";
import { registerAlertCommands } from "./commands/alerts.ts";
import { registerAuthCommands } from "./commands/auth.ts";
import { registerCompletionCommand } from "./commands/completion.ts";
import { registerConfigCommands } from "./commands/config.ts";
import { registerDeliveryCommands } from "./commands/deliveries.ts";
import { type DestinationIo, registerDestinationCommands } from "./commands/destinations.ts";
import { registerIncidentCommands } from "./commands/incidents.ts";
import { registerKeyCommands } from "./commands/keys.ts";
import { registerMonitoringCommands } from "./commands/monitoring.ts";
import { registerServiceAccountCommands } from "./commands/service-accounts.ts";
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
  registerMonitoringCommands(program, io);
  registerServiceAccountCommands(program, io);
  registerKeyCommands(program, io);
  registerAlertCommands(program, io);
  registerIncidentCommands(program, io);
  registerDestinationCommands(program, io);
  registerDeliveryCommands(program, io);
  registerConfigCommands(program, io);
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
  return program;
}

function outputOption(): Option {
  return new Option(
    "-o, --output <format>",
    "table (default), json or yaml; --json is --output json",
  ).choices(outputFormats);
}
