import type { Command } from "commander";
import { outputFormats, UsageError } from "../common.ts";
import { type CliIo, outOf } from "./alerts.ts";

interface Node {
  /** Space-separated path below `svc`, "" for the program. */
  readonly path: string;
  readonly subcommands: string[];
  readonly options: string[];
}

/** Every command path with its subcommands and long options, read from the program itself. */
export function commandTree(program: Command): Node[] {
  const nodes: Node[] = [];
  // Program options are positional: they count only before the first command, so only the root offers them.
  const walk = (cmd: Command, path: string) => {
    const own = cmd.options.map((o) => o.long).filter((l): l is string => Boolean(l));
    nodes.push({
      path,
      subcommands: cmd.commands.map((c) => c.name()).filter((n) => n !== "help"),
      options: [...new Set([...own, "--help"])],
    });
    for (const c of cmd.commands) walk(c, path ? `${path} ${c.name()}` : c.name());
  };
  walk(program, "");
  return nodes;
}

const q = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;

export function bashCompletion(program: Command): string {
  const nodes = commandTree(program);
  const cases = nodes
    .map((n) => `    ${q(n.path)}) words=${q([...n.subcommands, ...n.options].join(" "))} ;;`)
    .join("\n");
  const known = nodes
    .filter((n) => n.path)
    .map((n) => q(n.path))
    .join("|");
  return `# svc completion for bash. Load it with:  source <(svc completion bash)
_svc() {
  local cur prev path="" cand words i w
  cur="\${COMP_WORDS[COMP_CWORD]}"
  prev="\${COMP_WORDS[COMP_CWORD-1]}"
  if [[ "$prev" == "--output" || "$prev" == "-o" ]]; then
    COMPREPLY=( $(compgen -W ${q(outputFormats.join(" "))} -- "$cur") ); return
  fi
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    [[ "$w" == -* ]] && continue
    cand="\${path:+$path }$w"
    case "$cand" in ${known}) path="$cand" ;; esac
  done
  case "$path" in
${cases}
    *) words="" ;;
  esac
  COMPREPLY=( $(compgen -W "$words" -- "$cur") )
}
complete -o default -F _svc svc
`;
}

export function zshCompletion(program: Command): string {
  return `#compdef svc
# svc completion for zsh. Load it with:  source <(svc completion zsh)
autoload -U +X bashcompinit && bashcompinit
${bashCompletion(program).replace(/^# svc completion for bash.*\n/, "")}`;
}

export function fishCompletion(program: Command): string {
  const nodes = commandTree(program);
  const lines = [
    "# svc completion for fish. Load it with:  svc completion fish | source",
    `set -g __svc_paths ${nodes
      .filter((n) => n.path)
      .map((n) => q(n.path))
      .join(" ")}`,
    "function __svc_path",
    "  set -l path",
    "  for w in (commandline -opc)[2..-1]",
    "    string match -q -- '-*' $w; and continue",
    "    set -l cand (string join ' ' $path $w)",
    "    contains -- $cand $__svc_paths; and set path $path $w",
    "  end",
    "  string join ' ' $path",
    "end",
    "complete -c svc -f",
  ];
  for (const n of nodes) {
    const cond = `-n ${q(`test (__svc_path) = ${q(n.path)}`)}`;
    if (n.subcommands.length) lines.push(`complete -c svc ${cond} -a ${q(n.subcommands.join(" "))}`);
    for (const o of n.options) {
      const extra = o === "--output" ? ` -r -a ${q(outputFormats.join(" "))}` : "";
      lines.push(`complete -c svc ${cond} -l ${o.replace(/^--/, "")}${extra}`);
    }
  }
  return `${lines.join("\n")}\n`;
}

/** `svc completion bash|zsh|fish`: a script generated from the commands themselves. */
export function registerCompletionCommand(program: Command, io: CliIo = {}): void {
  const { out } = outOf(io);
  program
    .command("completion")
    .description("print a shell completion script")
    .argument("<shell>", "bash, zsh or fish")
    .addHelpText(
      "after",
      `
Examples:
  source <(svc completion bash)                       # or add that line to ~/.bashrc
  source <(svc completion zsh)                        # or add that line to ~/.zshrc
  svc completion fish > ~/.config/fish/completions/svc.fish`,
    )
    .action((shell: string) => {
      const gen = { bash: bashCompletion, zsh: zshCompletion, fish: fishCompletion }[shell];
      if (!gen) throw new UsageError("the shell must be bash, zsh or fish");
      out(gen(program));
    });
}
