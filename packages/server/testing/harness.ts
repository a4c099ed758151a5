import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSvcClients, type SvcClients } from "@svc/sdk";
import pino, { type Logger } from "pino";
import { type App, createApp } from "../src/app.ts";
import { type Config, loadConfig } from "../src/config.ts";
import { freePort } from "../src/net/free-port.ts";
import type { TestDialect } from "./dialects.ts";

export const ADMIN_TOKEN = "test-operator-token-0123456789";

/** A settable clock: tests move time instead of sleeping. */
export class TestClock {
  ms: number;
  constructor(start = Date.UTC(2026, 10, 1)) {
    this.ms = start;
  }
  now = (): number => this.ms;
  advance(ms: number): void {
    this.ms += ms;
  }
}

export interface TestApp {
  /** The running app (a new one after restart()). */
  readonly app: App;
  /**
   * Closes the app and opens a new one on the same data directory and database (state must survive),
   * after `downMs` with nothing listening (an outage).
   */
  restart(downMs?: number): Promise<void>;
  readonly baseUrl: string;
  readonly clock: TestClock;
  readonly admin: SvcClients["admin"];
  clients(token?: string, opts?: { useBinaryFormat?: boolean }): SvcClients;
  /** A project with one owner (logged in) and the given VMs. */
  seedProject(projectId: string, vmIds?: string[]): Promise<SeededProject>;
  close(): Promise<void>;
}

export interface SeededProject {
  readonly projectName: string;
  readonly owner: { user: string; email: string; password: string; session: string };
  readonly vms: string[];
}

/** Starts the whole server in-process on 127.0.0.1:<free port> with a fresh data dir and database. */
export async function startTestApp(
  dialect: TestDialect,
  overrides: Partial<Config> = {},
  opts: { logger?: Logger; wallClock?: boolean } = {},
): Promise<TestApp> {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-test-"));
  const database = await dialect.create();
  const clock = new TestClock();
  // Browser tests follow the wall clock: the page computes its time ranges from the browser's Date.now().
  if (opts.wallClock) clock.now = () => Date.now();
  const config = loadConfig(
    {},
    {
      dataDir,
      port: await freePort("127.0.0.1"),
      adminToken: ADMIN_TOKEN,
      databaseUrl: database.databaseUrl,
      demo: false,
      evaluatorAutoStart: false,
      notify: { dispatcherAutoStart: false, options: {} },
      // No guest agent package unless a test builds one (testing/agent-package.ts) and passes it.
      agentPackageDir: join(dataDir, "no-agent-package"),
      ...overrides,
    },
  );
  const logger = opts.logger ?? pino({ level: process.env.TEST_LOG_LEVEL ?? "silent" });
  let app = await createApp(config, { now: clock.now, logger });
  const address = await app.server.listen({ host: "127.0.0.1", port: config.port });
  const baseUrl = address.replace("localhost", "127.0.0.1");
  const port = Number(new URL(baseUrl).port);
  const clients = (token?: string, opts: { useBinaryFormat?: boolean } = {}) =>
    createSvcClients({ baseUrl, token, maxRetries: 0, ...opts });
  const admin = clients(ADMIN_TOKEN).admin;
  let userSeq = 0;
  return {
    get app() {
      return app;
    },
    async restart(downMs = 0) {
      await app.close();
      if (downMs > 0) await new Promise((r) => setTimeout(r, downMs));
      app = await createApp(config, { now: clock.now, logger });
      await app.server.listen({ host: "127.0.0.1", port });
      // Let clients notice their keep-alive sockets to the old server closed before they reuse one.
      await new Promise((r) => setTimeout(r, 100));
    },
    baseUrl,
    clock,
    admin,
    clients,
    async seedProject(projectId, vmIds = ["vm-1", "vm-2"]) {
      const projectName = `projects/${projectId}`;
      await admin.projects.createProject({ projectId, displayName: projectId });
      const email = `owner${++userSeq}-${projectId}@example.com`;
      const password = `pw-${randomUUID()}`;
      const user = await admin.users.createUser({ email, password, displayName: "Owner" });
      await admin.projects.setMember({ project: projectName, user: user.name, role: "owner" });
      const { sessionToken } = await clients().sessions.login({ email, password });
      const vms: string[] = [];
      for (const vmId of vmIds) {
        const vm = await admin.vms.createVM({
          parent: projectName,
          vmId,
          location: "dc-1",
          distribution: "debian-12",
          vcpus: 2,
          memoryBytes: 4n << 30n,
        });
        vms.push(vm.name);
      }
      return { projectName, owner: { user: user.name, email, password, session: sessionToken }, vms };
    },
    async close() {
      await app.close();
      await database.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
