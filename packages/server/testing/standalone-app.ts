import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { type App, createApp } from "../src/app.ts";
import { loadConfig } from "../src/config.ts";
import { freePort } from "../src/net/free-port.ts";

export const STANDALONE_ADMIN_TOKEN = "test-operator-token-0123456789";

/**
 * The whole app on SQLite in a temporary directory, not yet listening, with no demo and the evaluator
 * and dispatcher left to the test: for tests of the process's own server (start-up, readiness,
 * shutdown). `remove` deletes its directory.
 */
export async function createStandaloneApp(): Promise<{
  app: App;
  port: number;
  base: string;
  dataDir: string;
  remove: () => void;
}> {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-test-"));
  const port = await freePort("127.0.0.1");
  const config = loadConfig(
    {},
    {
      dataDir,
      port,
      adminToken: STANDALONE_ADMIN_TOKEN,
      databaseUrl: `sqlite:${join(dataDir, "svc.db")}`,
      demo: false,
      evaluatorAutoStart: false,
      notify: { dispatcherAutoStart: false, options: {} },
      agentPackageDir: join(dataDir, "no-agent-package"),
    },
  );
  const app = await createApp(config, { logger: pino({ level: "silent" }) });
  return {
    app,
    port,
    base: `http://127.0.0.1:${port}`,
    dataDir,
    remove: () => rmSync(dataDir, { recursive: true, force: true }),
  };
}
