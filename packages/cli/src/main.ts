import { CommanderError } from "commander";
import { exitCodeOf } from "./common.ts";
import { buildProgram } from "./program.ts";

async function main(): Promise<void> {
  try {
    await buildProgram().parseAsync(process.argv);
  } catch (err) {
    const code = exitCodeOf(err);
    // Commander has printed its own message (and help for usage errors).
    if (!(err instanceof CommanderError)) {
      // Errors from svc never contain a token or assertion; print the message only.
      process.stderr.write(`svc: ${err instanceof Error ? err.message : String(err)}\n`);
    }
    process.exitCode = code;
  }
}

await main();
