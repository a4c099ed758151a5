import { rootCertificates } from "node:tls";
import { createApp } from "./app.ts";
import { type Config, loadConfig } from "./config.ts";
import { credentialsPath, demoNotifyLine, ensureDemo, startDemoReceivers } from "./demo.ts";
import { startDemoCollector } from "./ingest/demo-collector.ts";
import { resolveNotifyOptions } from "./notify/options.ts";
import { createSealer } from "./notify/seal.ts";

/**
 * The demo's notify settings: its dispatcher trusts the loopback receivers' certificate and may reach
 * 127.0.0.1. Only with the demo; otherwise the allowlist stays as configured (empty by default).
 */
function withDemoNotify(config: Config, cert: string): Config {
  return Object.freeze({
    ...config,
    notify: {
      ...config.notify,
      // A `ca` replaces Node's bundled roots, so they stay beside the demo's certificate.
      ca: `${config.notify.ca ?? rootCertificates.join("\n")}\n${cert}`,
      options: {
        ...config.notify.options,
        allowHosts: [...(config.notify.options.allowHosts ?? []), "127.0.0.1"],
      },
    },
  });
}

/** `npm start`: every role in one process on HOST:PORT, with the demo project on an empty data directory. */
async function main(): Promise<void> {
  const out = (line: string) => process.stdout.write(`${line}\n`);
  const loaded = loadConfig();
  // The demo's receivers listen before the app starts, whose dispatcher must trust their certificate.
  const receivers = loaded.demo ? await startDemoReceivers(loaded.dataDir, out) : undefined;
  const config = receivers ? withDemoNotify(loaded, receivers.cert) : loaded;
  const app = await createApp(config);
  const address = await app.server.listen({ host: config.host, port: config.port });
  const url = new URL(address);
  const baseUrl =
    config.baseUrl ?? `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${url.port}`;
  out(`svc listening on ${baseUrl}`);
  if (config.demo) {
    const demo = await ensureDemo(
      app.db.db,
      config.dataDir,
      baseUrl,
      config.adminToken,
      config.collectorToken,
      Date.now(),
      {
        deps: {
          db: app.db.db,
          options: resolveNotifyOptions(config.notify.options),
          sealer: createSealer(config.secretKey),
          // No verification email: the demo marks its owner's address verified itself (demo.ts).
          mailer: { sendMail: async () => ({}) },
          baseUrl,
          now: Date.now,
        },
        receivers,
        note: out,
      },
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
    const notifyLine = demoNotifyLine(config.dataDir, config.notify.smtpUrl !== undefined);
    if (notifyLine) out(notifyLine);
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
    await receivers?.close();
    process.exit(0);
  };
  process.on("SIGINT", () => void shutdown("SIGINT"));
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
}

main().catch((err: unknown) => {
  process.stderr.write(`svc failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
