import assert from "node:assert/strict";
import { it } from "node:test";
import type { Command } from "commander";
import { buildProgram } from "./program.ts";

function leaves(c: Command, path = "svc"): [string, Command][] {
  if (c.commands.length === 0) return [[path, c]];
  return c.commands.flatMap((s) => leaves(s, `${path} ${s.name()}`));
}

it("every command's --help shows at least one example of itself", () => {
  const missing: string[] = [];
  for (const [path, cmd] of leaves(buildProgram())) {
    let text = "";
    cmd.configureOutput({ writeOut: (s) => (text += s), writeErr: (s) => (text += s) });
    cmd.outputHelp();
    const name = path.replace(/^svc (service-accounts keys|service-accounts|\S+) /, "");
    if (!/Examples?:/.test(text) || !text.includes(path.split(" ").at(-1)!))
      missing.push(`${path} (${name})`);
  }
  assert.deepEqual(missing, []);
});
