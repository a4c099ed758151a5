import { stopOnSignals } from "@svc/remotewrite";
import { createAgent } from "./agent.ts";
import { configFromArgs, USAGE } from "./config.ts";
import { AgentConfigError, writeUrl } from "./options.ts";

const argv = process.argv.slice(2);
if (argv.includes("--help") || argv.includes("-h")) {
  process.stdout.write(USAGE);
  process.exit(0);
}
let opts: ReturnType<typeof configFromArgs>;
try {
  opts = configFromArgs(argv, process.env);
} catch (err) {
  if (!(err instanceof AgentConfigError)) throw err;
  process.stderr.write(`svc-agent: ${err.message}\n\n${USAGE}`);
  process.exit(2);
}
const agent = createAgent(opts);
opts.logger.info("svc-agent started", {
  url: writeUrl(opts),
  vm: opts.vm,
  intervalMs: opts.intervalMs,
  spoolDir: opts.spoolDir,
});
agent.start();

stopOnSignals("svc-agent", agent, opts.logger);
