import { CommanderError } from "commander";
import { exitCodeOf } from "./common.ts";
import { buildProgram } from "./program.ts";

// A reader that stops early (`svc … | head -1`, awk's `exit`) closes the pipe: that ends the output, not a crash.
process.stdout.on("error", (err: NodeJS.ErrnoException) => {
  if (err.code === "EPIPE") process.exit(process.exitCode ?? 0);
  throw err;
});

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
