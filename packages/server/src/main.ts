import { rootCertificates } from "node:tls";
import { createApp } from "./app.ts";
import { type Config, loadConfig } from "./config.ts";
import { freePort } from "./net/free-port.ts";
import { createSmtpSender } from "./notify/channels/email.ts";
import { resolveNotifyOptions } from "./notify/options.ts";
import { createSealer } from "./notify/seal.ts";
import { workersPerTenant } from "./promql/index.ts";

/**
 * The demo's notify settings: its dispatcher trusts the loopback receivers' certificate and may reach
 * 127.0.0.1, and its emails go to the demo's mailbox when no SVC_SMTP_URL is set. Only with the demo;
 * otherwise the allowlist stays as configured (empty by default).
 */
function withDemoNotify(config: Config, demo: { cert?: string; smtpUrl?: string }): Config {
  return Object.freeze({
    ...config,
    notify: {
      ...config.notify,
      smtpUrl: config.notify.smtpUrl ?? demo.smtpUrl,
      ...(demo.cert
        ? {
            // A `ca` replaces Node's bundled roots, so they stay beside the demo's certificate.
            ca: `${config.notify.ca ?? rootCertificates.join("\n")}\n${demo.cert}`,
            options: {
              ...config.notify.options,
              allowHosts: [...(config.notify.options.allowHosts ?? []), "127.0.0.1"],
            },
          }
        : {}),
    },
  });
}

/**
 * The demo's modules (the project, its receivers, the SMTP catcher, the simulated collector) load only
 * when it runs: a production start compiles none of them.
 */
async function loadDemoKit() {
  const [demo, collector, mailbox] = await Promise.all([
    import("./demo.ts"),
    import("./ingest/demo-collector.ts"),
    import("./notify/demo-mailbox.ts"),
  ]);
  return { ...demo, ...collector, ...mailbox };
}

/** `npm start`: every role in one process on HOST:PORT, with the demo project on an empty data directory. */
async function main(): Promise<void> {
  const out = (line: string) => process.stdout.write(`${line}\n`);
  const configured = loadConfig();
  const loaded =
    configured.port === 0
      ? Object.freeze({ ...configured, port: await freePort(configured.host) })
      : configured;
  const kit = loaded.demo || loaded.simulator ? await loadDemoKit() : undefined;
  // The demo's receivers listen before the app starts, whose dispatcher must trust their certificate.
  const receivers = loaded.demo && kit ? await kit.startDemoReceivers(loaded.dataDir, out) : undefined;
  // Without SVC_SMTP_URL, the demo's emails go through real SMTP to a catcher that keeps them on disk.
  const mailbox =
    loaded.demo && kit && !loaded.notify.smtpUrl
      ? await kit.startDemoMailbox(loaded.dataDir, out)
      : undefined;
  const config = loaded.demo
    ? withDemoNotify(loaded, { cert: receivers?.cert, smtpUrl: mailbox?.smtpUrl })
    : loaded;
  const app = await createApp(config);
  const address = await app.server.listen({ host: config.host, port: config.port });
  const url = new URL(address);
  const baseUrl =
    config.baseUrl ?? `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${url.port}`;
  out(`svc listening on ${baseUrl}`);
  // The query workers one tenant can use start once the service is past ready (app.afterReady: its
  // first /readyz 200, else a second after listening), not with the first query: a dashboard's first
  // panels would otherwise wait for them and, on a busy machine, could be refused with 429 after the
  // project's 2 s wait for a query slot. Until then a query or a body queues for the worker it starts.
  // The pool's last worker (kept free of any one tenant's queries) starts when a second tenant's query
  // first needs it (~30 ms from the bundle).
  app.afterReady(() => {
    const pool = app.queryPool;
    void pool
      ?.warm(workersPerTenant(pool.stats().size))
      .catch((err: unknown) => out(`query workers did not start: ${String(err)}`));
    // Likewise the ingest decode workers, before the first collector's body would wait for them.
    void app.decodePool
      ?.ready()
      .catch((err: unknown) => out(`ingest decode workers did not start: ${String(err)}`));
  });
  out(`console: ${baseUrl}/`);
  if (config.demo && kit) {
    const { credentialsPath } = kit;
    const demo = await kit.ensureDemo(
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
          // The verification email goes to the demo's mailbox (none to a configured SMTP server: the
          // owner's address is example.com's); either way the demo marks the address verified (demo.ts).
          mailer: mailbox ? createSmtpSender(mailbox.smtpUrl) : { sendMail: async () => ({}) },
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
      out(`console login: ${demo.credentials.consoleEmail} / ${demo.credentials.consolePassword}`);
    }
    const notifyLine = kit.demoNotifyLine(config.dataDir, mailbox?.dir);
    if (notifyLine) out(notifyLine);
  }
  // The real collector first: with the demo it registers the host's domains as VMs, which the
  // simulated collector must then leave alone.
  const host = config.libvirt
    ? await (await import("./ingest/host-collector.ts")).startHostCollector({
        db: app.db.db,
        baseUrl: `http://127.0.0.1:${url.port}`,
        collectorToken: config.collectorToken,
        dataDir: config.dataDir,
        log: app.log,
        libvirtUri: config.libvirt.uri,
        libvirtSocket: config.libvirt.socket,
        demo: config.demo,
        onProgress: out,
      })
    : undefined;
  const collector =
    config.simulator && kit
      ? await kit.startDemoCollector({
          excludeVmIds: host?.vmIds,
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
    await host?.collector.stop();
    await app.close();
    await receivers?.close();
    await mailbox?.close();
    process.exit(0);
  };
  process.on("SIGINT", () => void shutdown("SIGINT"));
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
}

main().catch((err: unknown) => {
  process.stderr.write(`svc failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
