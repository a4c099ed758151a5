import { createApp } from "./app.ts";
import { loadConfig } from "./config.ts";
import { credentialsPath, ensureDemo } from "./demo.ts";
import { startDemoCollector } from "./ingest/demo-collector.ts";

/** `npm start`: every role in one process on HOST:PORT, with the demo project on an empty data directory. */
async function main(): Promise<void> {
  const config = loadConfig();
  const app = await createApp(config);
  const address = await app.server.listen({ host: config.host, port: config.port });
  const url = new URL(address);
  const baseUrl =
    config.baseUrl ?? `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${url.port}`;
  const out = (line: string) => process.stdout.write(`${line}\n`);
  out(`svc listening on ${baseUrl}`);
  if (config.demo) {
    const demo = await ensureDemo(
      app.db.db,
      config.dataDir,
      baseUrl,
      config.adminToken,
      config.collectorToken,
      Date.now(),
    );
    if (demo.created && demo.credentials) {
      const c = demo.credentials;
      // Shown once, as the key API itself does; scripts read the 0600 file instead.
      out(`demo project: ${c.projectName}`);
      out(`read key  (Metrics scraper, monitoring.read):  ${c.readKey}`);
      out(`write key (Alert manager, monitoring.read+write): ${c.writeKey}`);
      out(`console login: ${c.consoleEmail} / ${c.consolePassword}`);
      out(`credentials written to ${credentialsPath(config.dataDir)} (mode 0600)`);
    } else if (demo.credentials) {
      out(
        `demo project: ${demo.credentials.projectName} (existing data; keys in ${credentialsPath(config.dataDir)})`,
      );
    }
  }
  const collector = config.simulator
    ? await startDemoCollector({
        db: app.db.db,
        baseUrl: `http://127.0.0.1:${url.port}`,
        collectorToken: config.collectorToken,
        dataDir: config.dataDir,
        log: app.log,
        onProgress: out,
      })
    : undefined;
  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, "shutting down");
    const force = setTimeout(() => process.exit(1), 15_000);
    force.unref();
    collector?.stop();
    await app.close();
    process.exit(0);
  };
  process.on("SIGINT", () => void shutdown("SIGINT"));
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
}

main().catch((err: unknown) => {
  process.stderr.write(`svc failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
