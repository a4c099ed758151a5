import type { Command } from "commander";
import {
  type CliConfig,
  type ConfigKey,
  configKeys,
  configPath,
  outputFormats,
  readConfig,
  UsageError,
  writeConfig,
} from "../common.ts";
import { type CliIo, outOf } from "./alerts.ts";

function keyOf(s: string): ConfigKey {
  const k = configKeys.find((c) => c.toLowerCase() === s.toLowerCase().replace(/[-_]/g, ""));
  if (!k) throw new UsageError(`unknown setting "${s}"; one of ${configKeys.join(", ")}`);
  return k;
}

/** `svc config`: defaults for --base-url, --project, --output and the key file, in a 0600 file. */
export function registerConfigCommands(program: Command, io: CliIo = {}): void {
  const { out } = outOf(io);
  const config = program
    .command("config")
    .description(`defaults for every command, kept in ${configPath()} (mode 0600)`)
    .addHelpText(
      "after",
      `
Settings: baseUrl, project, output (table, json or yaml), keyFile (a file holding the key; never the key).
Flags win over environment variables (SVC_BASE_URL, SVC_PROJECT, SVC_API_KEY_FILE), which win over this file.
The file is $XDG_CONFIG_HOME/svc/config.json (default ~/.config/svc/config.json), or $SVC_CONFIG.`,
    );

  config
    .command("set")
    .description("store a default")
    .argument("<setting>", configKeys.join(", "))
    .argument("<value>")
    .addHelpText(
      "after",
      `
Examples:
  svc config set baseUrl https://svc.example.com
  svc config set project projects/demo
  svc config set keyFile ~/.config/svc/key      # the file holds the key (chmod 600); the key is never an argument
  svc config set output yaml`,
    )
    .action((setting: string, value: string) => {
      const key = keyOf(setting);
      if (key === "output" && !(outputFormats as readonly string[]).includes(value))
        throw new UsageError(`output must be one of ${outputFormats.join(", ")}`);
      if (key === "project" && !/^projects\/[a-z][a-z0-9-]{2,39}$/.test(value))
        throw new UsageError("project must be projects/<project_id>");
      if (key === "baseUrl" && !/^https?:\/\//.test(value))
        throw new UsageError("baseUrl must be an http(s) origin");
      if (/^svc[pst]_/.test(value))
        throw new UsageError("that looks like a key: store it in a file and set keyFile to the file's path");
      const next: CliConfig = { ...readConfig(), [key]: value };
      writeConfig(next);
    });

  config
    .command("unset")
    .description("remove a default")
    .argument("<setting>", configKeys.join(", "))
    .addHelpText("after", "\nExample:\n  svc config unset project")
    .action((setting: string) => {
      const next: CliConfig = { ...readConfig() };
      delete next[keyOf(setting)];
      writeConfig(next);
    });

  config
    .command("get")
    .description("print one default, or all with their file")
    .argument("[setting]", configKeys.join(", "))
    .addHelpText("after", "\nExamples:\n  svc config get\n  svc config get project")
    .action((setting: string | undefined) => {
      const c = readConfig();
      if (setting) {
        const v = c[keyOf(setting)];
        if (v !== undefined) out(`${v}\n`);
        return;
      }
      out(`# ${configPath()}\n`);
      for (const k of configKeys) if (c[k] !== undefined) out(`${k}\t${c[k]}\n`);
    });
}
