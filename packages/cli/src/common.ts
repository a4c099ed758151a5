import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import type { JsonValue } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { type Command, CommanderError, Option } from "commander";
import { stringify as toYaml } from "yaml";

/** A mistake in how the command was called (exit code 2). */
export class UsageError extends Error {}

// ---------------------------------------------------------------------------------------------------
// Configuration: $XDG_CONFIG_HOME/svc/config.json (default ~/.config/svc/config.json), mode 0600.

/** What `svc config set` stores. Never a key itself: `keyFile` names a file that holds one. */
export interface CliConfig {
  baseUrl?: string;
  project?: string;
  keyFile?: string;
  output?: OutputFormat;
}

export const configKeys = ["baseUrl", "project", "keyFile", "output"] as const;
export type ConfigKey = (typeof configKeys)[number];

export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SVC_CONFIG) return env.SVC_CONFIG;
  const base = env.XDG_CONFIG_HOME || join(homedir(), ".config");
  return join(base, "svc", "config.json");
}

let cached: { path: string; config: CliConfig } | undefined;

export function readConfig(path = configPath()): CliConfig {
  if (cached?.path === path) return cached.config;
  let config: CliConfig = {};
  try {
    const doc = JSON.parse(readFileSync(path, "utf8")) as unknown;
    if (doc && typeof doc === "object" && !Array.isArray(doc)) config = doc as CliConfig;
    else throw new UsageError(`${path} must hold a JSON object`);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") {
      if (e instanceof UsageError) throw e;
      throw new UsageError(`cannot read ${path}: ${(e as Error).message}`);
    }
  }
  cached = { path, config };
  return config;
}

/** Writes the whole file with mode 0600 (its directory 0700), replacing any looser mode. */
export function writeConfig(config: CliConfig, path = configPath()): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  writeFileSync(path, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  chmodSync(path, 0o600);
  cached = { path, config };
}

/** The API origin from --base-url, SVC_BASE_URL or the config file, without a trailing slash. */
export function baseUrlOf(cmd: Command): string {
  const url =
    (cmd.optsWithGlobals().baseUrl as string | undefined) ?? process.env.SVC_BASE_URL ?? readConfig().baseUrl;
  if (!url)
    throw new UsageError(
      "set --base-url, SVC_BASE_URL or `svc config set baseUrl <url>` to the svc API origin",
    );
  return url.replace(/\/+$/, "");
}

/**
 * `--project <name>`: the flag, else $SVC_PROJECT, else `project` in the config file. Mandatory
 * options are checked after these defaults are applied, so a default satisfies them.
 */
export function projectOption(description = "projects/<project_id>", mandatory = true): Option {
  const o = new Option("--project <name>", `${description}; default $SVC_PROJECT or the config file`).env(
    "SVC_PROJECT",
  );
  let fromConfig: string | undefined;
  try {
    fromConfig = readConfig().project;
  } catch {
    // A broken config file is reported when it is needed (base URL, key file), not while building help.
  }
  if (fromConfig) o.default(fromConfig);
  return mandatory ? o.makeOptionMandatory() : o;
}

// ---------------------------------------------------------------------------------------------------
// Credentials: never a command-line argument (it would land in shell history and `ps`).

let notedBoth = false;

/**
 * Both SVC_API_KEY and SVC_TOKEN set (a key exported earlier, then a sign-in): which one is used, naming no
 * secret. The key wins, so a session's `svc keys create` would otherwise fail HUMAN_ONLY with no hint why.
 */
export function bothCredentialsNote(env: NodeJS.ProcessEnv): string | undefined {
  if (!env.SVC_API_KEY || !env.SVC_TOKEN || env.SVC_API_KEY.trim() === env.SVC_TOKEN.trim()) return undefined;
  return "both SVC_API_KEY and SVC_TOKEN are set; using SVC_API_KEY (unset it to use SVC_TOKEN)";
}

/**
 * The credential: $SVC_API_KEY, else $SVC_TOKEN (an API key, CI token or console session token), else
 * the first line of the file named by $SVC_API_KEY_FILE or `keyFile` in the config file.
 */
export function tokenOf(env: NodeJS.ProcessEnv = process.env): string {
  const direct = env.SVC_API_KEY || env.SVC_TOKEN;
  const note = bothCredentialsNote(env);
  if (note && !notedBoth) {
    notedBoth = true;
    process.stderr.write(`svc: note: ${note}\n`);
  }
  if (direct) return direct.trim();
  const named = env.SVC_API_KEY_FILE || readConfig(configPath(env)).keyFile;
  const file = named?.startsWith("~/") ? join(homedir(), named.slice(2)) : named;
  if (file) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (e) {
      throw new UsageError(`cannot read the key file ${file}: ${(e as NodeJS.ErrnoException).code ?? e}`);
    }
    if (process.platform !== "win32" && (statSync(file).mode & 0o077) !== 0)
      process.stderr.write(`svc: warning: ${file} is readable by others; chmod 600 it\n`);
    const token = text.split(/\r?\n/)[0]?.trim();
    if (!token) throw new UsageError(`the key file ${file} is empty`);
    return token;
  }
  throw new UsageError(
    "set SVC_API_KEY (or SVC_TOKEN) to an svc key, CI token or console session token, or SVC_API_KEY_FILE / `svc config set keyFile <path>` to a file holding one",
  );
}

// ---------------------------------------------------------------------------------------------------
// Output: --output table|json|yaml (--json is the same as --output json).

export const outputFormats = ["table", "json", "yaml"] as const;
export type OutputFormat = (typeof outputFormats)[number];

let format: OutputFormat = "table";

export function setOutputFormat(f: OutputFormat): void {
  format = f;
}

export function outputFormat(): OutputFormat {
  return format;
}

/** Prints a structured value as JSON or YAML, whichever --output chose (JSON for table). */
export function printStructured(out: (s: string) => void, value: JsonValue): void {
  if (format === "yaml") out(toYaml(value, { lineWidth: 0 }));
  else out(`${JSON.stringify(value, null, 2)}\n`);
}

/**
 * Rows under a header, columns padded; on a terminal the widest column is shortened (with …) so each
 * line fits its width. Piped output keeps every character.
 */
export function printTable(
  out: (s: string) => void,
  header: readonly string[],
  rows: readonly (readonly string[])[],
  width: number | undefined = process.stdout.isTTY ? process.stdout.columns : undefined,
): void {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? "").length)));
  if (width) {
    const gap = 2 * (widths.length - 1);
    while (widths.reduce((a, b) => a + b, 0) + gap > width) {
      const i = widths.indexOf(Math.max(...widths));
      if (widths[i] <= 8) break;
      widths[i]--;
    }
  }
  const cell = (s: string, w: number) => (s.length > w ? `${s.slice(0, w - 1)}…` : s.padEnd(w));
  for (const r of all) {
    out(
      `${widths
        .map((w, i) => cell(r[i] ?? "", w))
        .join("  ")
        .trimEnd()}\n`,
    );
  }
}

/**
 * Tab-separated lines as they are when piped (scripts split on tabs), aligned and shortened to the
 * terminal's width when stdout is one.
 */
export function printLines(out: (s: string) => void, lines: readonly string[], toTerminal: boolean): void {
  if (toTerminal && process.stdout.isTTY && lines.length > 0) {
    const rows = lines.map((l) => l.split("\t"));
    const [first, ...rest] = rows;
    printTable(out, first, rest);
    return;
  }
  for (const l of lines) out(`${l}\n`);
}

// ---------------------------------------------------------------------------------------------------
// Paged lists (docs/cli.md): the same --state, --page-size and --page-token wherever a command lists.

/** `--state` upper-cased, "" (all) when absent; a UsageError naming the allowed states otherwise. */
export function stateOption(value: string | undefined, states: readonly string[]): string {
  const state = value?.toUpperCase() ?? "";
  if (state && !states.includes(state)) throw new UsageError(`--state must be one of ${states.join(", ")}`);
  return state;
}

/** `--page-size` as a whole number ≥ 1, or a UsageError. */
export function pageSizeOption(value: unknown): number {
  const pageSize = Number(value);
  if (!Number.isInteger(pageSize) || pageSize < 1)
    throw new UsageError("--page-size must be a whole number ≥ 1");
  return pageSize;
}

/** One page's lines (printLines), then the next page's token on stderr where there is one. */
export function printPage(
  io: { out: (s: string) => void; err: (s: string) => void; toTerminal: boolean },
  lines: readonly string[],
  nextPageToken: string | undefined,
): void {
  printLines(io.out, lines, io.toTerminal);
  if (nextPageToken) io.err(`more: --page-token ${nextPageToken}\n`);
}

// ---------------------------------------------------------------------------------------------------
// Exit codes (docs/cli.md).

export const exitCodes = {
  ok: 0,
  error: 1,
  usage: 2,
  invalid: 3,
  denied: 4,
  notFound: 5,
  conflict: 6,
  retryLater: 7,
} as const;

/** The process exit code for an error thrown by a command. */
export function exitCodeOf(err: unknown): number {
  if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : exitCodes.usage;
  if (err instanceof UsageError) return exitCodes.usage;
  if (!(err instanceof ConnectError)) return exitCodes.error;
  switch (err.code) {
    case Code.InvalidArgument:
    case Code.FailedPrecondition:
    case Code.OutOfRange:
      return exitCodes.invalid;
    case Code.Unauthenticated:
    case Code.PermissionDenied:
      return exitCodes.denied;
    case Code.NotFound:
      return exitCodes.notFound;
    case Code.AlreadyExists:
    case Code.Aborted:
      return exitCodes.conflict;
    case Code.ResourceExhausted:
    case Code.Unavailable:
    case Code.DeadlineExceeded:
      return exitCodes.retryLater;
    default:
      return exitCodes.error;
  }
}
