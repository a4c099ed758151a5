import { Command, CommanderError } from "commander";
import { registerAlertCommands } from "./commands/alerts.ts";
import { registerAuthCommands } from "./commands/auth.ts";
import { registerDeliveryCommands } from "./commands/deliveries.ts";
import { registerDestinationCommands } from "./commands/destinations.ts";
import { registerIncidentCommands } from "./commands/incidents.ts";
import { registerKeyCommands } from "./commands/keys.ts";
import { registerMonitoringCommands } from "./commands/monitoring.ts";
import { UsageError } from "./common.ts";

/**
 * `svc`: one file per command group under commands/, each adding itself to the program. Groups to
 * come (monitoring, alerts, keys, service-accounts) follow the same shape.
 */
export function buildProgram(): Command {
  const program = new Command("svc")
    .description("svc command-line tool: monitoring and automation for your VMs")
    .version("1.1.2")
    .option("--base-url <url>", "svc API origin (default: $SVC_BASE_URL)")
    .enablePositionalOptions()
    .showHelpAfterError()
    .exitOverride();
  registerAuthCommands(program);
  registerMonitoringCommands(program);
  registerKeyCommands(program);
  registerAlertCommands(program);
  registerIncidentCommands(program);
  registerDestinationCommands(program);
  registerDeliveryCommands(program);
  return program;
}

async function main(): Promise<void> {
  try {
    await buildProgram().parseAsync(process.argv);
  } catch (err) {
    if (err instanceof CommanderError) process.exit(err.exitCode);
    // Errors from svc never contain a token or assertion; print the message only.
    process.stderr.write(`svc: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = err instanceof UsageError ? 2 : 1;
  }
}

await main();
