import { stopOnSignals } from "@svc/remotewrite";
import { createCollector } from "./collector.ts";
import { configFromEnv, USAGE } from "./config.ts";
import { CollectorConfigError } from "./options.ts";

const argv = process.argv.slice(2);
if (argv.includes("--help") || argv.includes("-h")) {
  process.stdout.write(USAGE);
  process.exit(0);
}
let opts: ReturnType<typeof configFromEnv>;
try {
  opts = configFromEnv(process.env);
} catch (err) {
  if (!(err instanceof CollectorConfigError)) throw err;
  process.stderr.write(`svc-collector: ${err.message}\n\n${USAGE}`);
  process.exit(2);
}
const collector = createCollector(opts);
opts.logger.info("svc-collector started", {
  server: new URL(opts.server).origin,
  socket: opts.socketPath,
  uri: opts.libvirtUri,
  guestAgent: opts.guestAgent,
  intervalMs: opts.intervalMs,
  spoolDir: opts.spoolDir,
});
collector.start();

stopOnSignals("svc-collector", collector, opts.logger);
