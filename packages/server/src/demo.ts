import { randomBytes, randomUUID } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { resolveAlertOptions } from "./alerts/options.ts";
import { saveAlertRule } from "./alerts/rules.ts";
import { ruleTemplates } from "./alerts/templates.ts";
import type { Db } from "./db/database.ts";
import { createKey } from "./iam/keys.ts";
import { createServiceAccount } from "./iam/service-accounts.ts";
import { createProject, createUser, setMember } from "./inventory/projects.ts";
import { createVm } from "./inventory/vms.ts";

export const DEMO_PROJECT = "demo";

export interface DemoCredentials {
  baseUrl: string;
  projectName: string;
  readKey: string;
  writeKey: string;
  adminToken: string;
  collectorToken: string;
  consoleEmail: string;
  consolePassword: string;
  [extra: string]: string;
}

const GiB = 1024n ** 3n;

/** The demo fleet: both monitoring levels, two data centers, a stopped VM. */
export const demoVms = [
  {
    vmId: "web-1",
    displayName: "web-1",
    location: "dc-1",
    distribution: "debian-12",
    monitoringLevel: "EXPANDED",
    vcpus: 2,
    memoryBytes: 4n * GiB,
    state: "RUNNING",
  },
  {
    vmId: "web-2",
    displayName: "web-2",
    location: "dc-1",
    distribution: "ubuntu-24.04",
    monitoringLevel: "BASELINE",
    vcpus: 2,
    memoryBytes: 4n * GiB,
    state: "RUNNING",
  },
  {
    vmId: "db-1",
    displayName: "db-1",
    location: "dc-1",
    distribution: "debian-12",
    monitoringLevel: "EXPANDED",
    vcpus: 4,
    memoryBytes: 16n * GiB,
    state: "RUNNING",
  },
  {
    vmId: "batch-1",
    displayName: "batch-1",
    location: "dc-2",
    distribution: "rocky-9",
    monitoringLevel: "BASELINE",
    vcpus: 8,
    memoryBytes: 32n * GiB,
    state: "RUNNING",
  },
  {
    vmId: "old-1",
    displayName: "old-1",
    location: "dc-2",
    distribution: "debian-12",
    monitoringLevel: "BASELINE",
    vcpus: 1,
    memoryBytes: 2n * GiB,
    state: "STOPPED",
  },
] as const;

/** The demo project's alert rules, by template. */
export const DEMO_RULE_TEMPLATES = ["cpu", "unexpected-stop"] as const;

export function credentialsPath(dataDir: string): string {
  return join(dataDir, "demo-credentials.json");
}

/**
 * On an empty control plane, creates the demo project, its owner, VMs, a `Metrics scraper` and an
 * `Alert manager` service account with one key each, and writes them to demo-credentials.json (0600).
 * Returns the credentials and whether they were created now (so the caller prints secrets only once).
 */
export async function ensureDemo(
  db: Db,
  dataDir: string,
  baseUrl: string,
  adminToken: string,
  collectorToken: string,
  nowMs: number,
): Promise<{ created: boolean; credentials?: DemoCredentials }> {
  const path = credentialsPath(dataDir);
  const anyProject = await db.selectFrom("projects").select("id").limit(1).executeTakeFirst();
  if (anyProject) {
    if (!existsSync(path)) return { created: false };
    const credentials = JSON.parse(readFileSync(path, "utf8")) as DemoCredentials;
    if (credentials.baseUrl !== baseUrl || credentials.collectorToken !== collectorToken) {
      credentials.baseUrl = baseUrl;
      credentials.collectorToken = collectorToken;
      writeFileSync(path, `${JSON.stringify(credentials, null, 2)}\n`, { mode: 0o600 });
    }
    return { created: false, credentials };
  }
  const projectName = `projects/${DEMO_PROJECT}`;
  await createProject(db, { projectId: DEMO_PROJECT, displayName: "Demo project" }, nowMs);
  const consoleEmail = "demo@example.com";
  const consolePassword = randomBytes(12).toString("base64url");
  const user = await createUser(
    db,
    { email: consoleEmail, displayName: "Demo owner", password: consolePassword },
    nowMs,
  );
  await setMember(db, { project: projectName, user: user.name, role: "owner" }, nowMs);
  for (const vm of demoVms) await createVm(db, { parent: projectName, ...vm }, nowMs);
  const actor = { userId: user.name.slice("users/".length) };
  const scraper = await createServiceAccount(
    db,
    actor,
    { parent: projectName, displayName: "demo-scraper", template: "Metrics scraper" },
    nowMs,
  );
  const manager = await createServiceAccount(
    db,
    actor,
    { parent: projectName, displayName: "demo-alerts", template: "Alert manager" },
    nowMs,
  );
  const read = await createKey(
    db,
    actor,
    {
      parent: scraper.name,
      displayName: "demo read key",
      capabilities: ["monitoring.read"],
      expireDays: 0,
      requestId: randomUUID(),
    },
    nowMs,
  );
  const write = await createKey(
    db,
    actor,
    {
      parent: manager.name,
      displayName: "demo write key",
      capabilities: ["monitoring.read", "monitoring.write"],
      expireDays: 0,
      requestId: randomUUID(),
    },
    nowMs,
  );
  // Two rules from the templates, so the demo VM that runs hot on schedule (demo-collector.ts) opens an
  // incident within a few minutes of the first start.
  const owner = { kind: "HUMAN_SESSION" as const, userId: actor.userId, sessionId: "" };
  for (const id of DEMO_RULE_TEMPLATES) {
    const template = ruleTemplates.find((t) => t.id === id);
    if (!template) continue;
    await saveAlertRule(
      { db, options: resolveAlertOptions() },
      owner,
      {
        projectName,
        id: randomUUID(),
        requestId: randomUUID(),
        expectedVersion: "0",
        spec: { ...template.spec },
      },
      nowMs,
    );
  }
  const credentials: DemoCredentials = {
    baseUrl,
    projectName,
    readKey: read.secret ?? "",
    writeKey: write.secret ?? "",
    adminToken,
    collectorToken,
    consoleEmail,
    consolePassword,
  };
  writeFileSync(path, `${JSON.stringify(credentials, null, 2)}\n`, { mode: 0o600 });
  return { created: true, credentials };
}
