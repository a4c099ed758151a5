import { randomBytes, randomUUID, X509Certificate } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer, type Server } from "node:https";
import { join } from "node:path";
import { readRawBody, verifyWebhook, WebhookVerificationError } from "@svc/sdk";
import { resolveAlertOptions } from "./alerts/options.ts";
import { saveAlertRule } from "./alerts/rules.ts";
import { ruleTemplates } from "./alerts/templates.ts";
import { insertAuditEvent } from "./audit/events.ts";
import type { Db } from "./db/database.ts";
import { createKey } from "./iam/keys.ts";
import { createServiceAccount } from "./iam/service-accounts.ts";
import { createUser, setMember } from "./iam/users.ts";
import { DEMO_PROJECT } from "./ingest/demo-collector.ts";
import { createProject } from "./inventory/projects.ts";
import { createVm } from "./inventory/vms.ts";
import { writeSelfSignedCertificate } from "./net/self-signed.ts";
import { createDestination, type DestinationsDeps, updateDestination } from "./notify/destinations.ts";

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
 * With `notify`, it also creates the email, webhook and chat destinations that the CPU rule notifies.
 * Returns the credentials and whether they were created now (so the caller prints secrets only once).
 */
export async function ensureDemo(
  db: Db,
  dataDir: string,
  baseUrl: string,
  adminToken: string,
  collectorToken: string,
  nowMs: number,
  notify?: DemoNotify,
): Promise<{ created: boolean; credentials?: DemoCredentials }> {
  const path = credentialsPath(dataDir);
  const anyProject = await db.selectFrom("projects").select("id").limit(1).executeTakeFirst();
  if (anyProject) {
    if (notify) await reconnectDemoDestinations(dataDir, notify);
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
  // What the set-up creates, recorded in the project's audit log once done (issue 43, item 6): Activity
  // then starts with the demo's accounts, keys, destinations and rules, not with "nothing recorded".
  const made: { method: string; resource: string }[] = [];
  await createProject(db, { projectId: DEMO_PROJECT, displayName: "Demo project" }, nowMs);
  made.push({ method: "svc.admin.v1.ProjectService/CreateProject", resource: projectName });
  const consoleEmail = "demo@example.com";
  const consolePassword = randomBytes(12).toString("base64url");
  const user = await createUser(
    db,
    { email: consoleEmail, displayName: "Demo owner", password: consolePassword },
    nowMs,
  );
  made.push({ method: "svc.admin.v1.UserService/CreateUser", resource: user.name });
  await setMember(db, { project: projectName, user: user.name, role: "owner" }, nowMs);
  made.push({ method: "svc.admin.v1.ProjectService/SetMember", resource: projectName });
  for (const vm of demoVms) {
    const v = await createVm(db, { parent: projectName, ...vm }, nowMs);
    made.push({ method: "svc.admin.v1.VMService/CreateVM", resource: v.name });
  }
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
  for (const sa of [scraper, manager])
    made.push({ method: "svc.iam.v1.ServiceAccountService/CreateServiceAccount", resource: sa.name });
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
  for (const k of [read, write])
    made.push({ method: "svc.iam.v1.KeyService/CreateKey", resource: k.key.name });
  // Two rules from the templates, so the demo VM that runs hot on schedule (demo-collector.ts) opens an
  // incident within a few minutes of the first start. The CPU rule notifies the demo's destinations.
  const owner = { kind: "HUMAN_SESSION" as const, userId: actor.userId, sessionId: "" };
  const destinationNames = notify ? await createDemoDestinations(db, dataDir, notify, actor.userId) : [];
  for (const d of destinationNames)
    made.push({ method: "svc.monitoring.v1.DestinationService/CreateDestination", resource: d });
  for (const id of DEMO_RULE_TEMPLATES) {
    const template = ruleTemplates.find((t) => t.id === id);
    if (!template) continue;
    const rule = await saveAlertRule(
      { db, options: resolveAlertOptions() },
      owner,
      {
        projectName,
        id: randomUUID(),
        requestId: randomUUID(),
        expectedVersion: "0",
        spec: { ...template.spec, ...(id === "cpu" ? { destinationNames } : {}) },
      },
      nowMs,
    );
    made.push({ method: "svc.monitoring.v1.AlertService/SaveAlertRule", resource: rule.name });
  }
  // The server did it, on the operator's authority (svc's own start), not the demo owner.
  for (const [i, m] of made.entries())
    await insertAuditEvent(db, {
      // A millisecond apart, in the order they were made: Activity lists them newest first, in order.
      time: nowMs + i,
      // A user exists outside every project; the rest is the demo project's.
      projectId: m.resource.startsWith("users/") ? "" : DEMO_PROJECT,
      actor: { kind: "OPERATOR", name: "operator", detail: { via: "demo set-up (npm start)" } },
      method: m.method,
      resource: m.resource,
      requestId: "",
      outcome: "ok",
      clientAddress: "",
      userAgent: "svc demo set-up",
      changedFields: [],
    });
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

// ---- the demo's notifications ---------------------------------------------------------------------

/** What the demo needs to create (or re-point) its destinations. */
export interface DemoNotify {
  /** destinations.ts's dependencies, built from the app's configuration (same sealing key). */
  readonly deps: DestinationsDeps;
  /** The loopback receivers; undefined without openssl (the demo then has its email destination only). */
  readonly receivers?: DemoReceivers;
  /** Prints a line (what went wrong re-pointing a destination on a later start). */
  readonly note: (line: string) => void;
}

/** The demo's in-process loopback receivers, served over HTTPS with a certificate kept in the data dir. */
export interface DemoReceivers {
  /** The receivers' self-signed certificate (PEM): the dispatcher must trust it (config.notify.ca). */
  readonly cert: string;
  /** The signed-webhook receiver: verifies each delivery with the SDK's verifyWebhook. */
  readonly webhookUrl: string;
  /** A Slack-style incoming-webhook endpoint: logs the message's `text`. */
  readonly chatUrl: string;
  /** A PagerDuty-shaped Events API v2 endpoint: logs each event and keeps each dedup_key's state. */
  readonly pagerDutyUrl: string;
  /** The webhook destination's secret, once it exists; until then every delivery is refused. */
  setWebhookSecret(secret: string): void;
  close(): Promise<void>;
}

/** Ports, destination names and the webhook secret of the demo's notifications (0600, in the data dir). */
interface DemoNotifyState {
  webhookPort?: number;
  chatPort?: number;
  pagerDutyPort?: number;
  ownerUserId?: string;
  webhookSecret?: string;
  /** The URLs the destinations were last given (a later start re-points them when a port changed). */
  webhookUrl?: string;
  chatUrl?: string;
  pagerDutyUrl?: string;
  destinations?: { email?: string; webhook?: string; chat?: string; pagerDuty?: string };
}

const notifyStatePath = (dataDir: string) => join(dataDir, "demo-notify.json");

function readNotifyState(dataDir: string): DemoNotifyState {
  const path = notifyStatePath(dataDir);
  return existsSync(path) ? (JSON.parse(readFileSync(path, "utf8")) as DemoNotifyState) : {};
}

function writeNotifyState(dataDir: string, patch: DemoNotifyState): DemoNotifyState {
  const state = { ...readNotifyState(dataDir), ...patch };
  writeFileSync(notifyStatePath(dataDir), `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  return state;
}

/**
 * The receivers' certificate: demo-tls/{cert,key}.pem in the data dir, made with openssl on first use
 * (node:crypto can sign but not build an X.509 certificate) and remade when it is about to expire.
 * Undefined when openssl is missing.
 */
function demoCertificate(dataDir: string): { key: string; cert: string } | undefined {
  const dir = join(dataDir, "demo-tls");
  const keyPath = join(dir, "key.pem");
  const certPath = join(dir, "cert.pem");
  if (existsSync(keyPath) && existsSync(certPath)) {
    const cert = readFileSync(certPath, "utf8");
    if (Date.parse(new X509Certificate(cert).validTo) > Date.now() + 86_400_000)
      return { key: readFileSync(keyPath, "utf8"), cert };
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  try {
    writeSelfSignedCertificate(keyPath, certPath, {
      subject: "svc demo receivers",
      altNames: "IP:127.0.0.1",
      days: 3650,
    });
  } catch {
    return undefined;
  }
  return { key: readFileSync(keyPath, "utf8"), cert: readFileSync(certPath, "utf8") };
}

/** Listens on 127.0.0.1:`port` when it is free, else on any free port; resolves the port. */
function listenLoopback(server: Server, port: number | undefined): Promise<number> {
  const at = (p: number) =>
    new Promise<number>((resolve, reject) => {
      server.once("error", reject);
      server.listen(p, "127.0.0.1", () => {
        server.off("error", reject);
        const a = server.address();
        resolve(typeof a === "object" && a ? a.port : p);
      });
    });
  return port ? at(port).catch(() => at(0)) : at(0);
}

/**
 * Starts the demo's receivers before the app (whose dispatcher must trust their certificate), on the
 * ports of the previous start when they are free. `out` prints one line per delivery received.
 * Undefined, with a printed note, when no certificate can be made.
 */
export async function startDemoReceivers(
  dataDir: string,
  out: (line: string) => void,
): Promise<DemoReceivers | undefined> {
  const tls = demoCertificate(dataDir);
  if (!tls) {
    out("demo notifications: openssl not found, so the demo has no webhook or chat destination (email only)");
    return undefined;
  }
  const secrets: string[] = [];
  const seen = new Set<string>();
  const answer = (res: ServerResponse, status: number, body = "") =>
    res.writeHead(status, body ? { "content-type": "text/plain" } : {}).end(body);
  const webhook = createServer(tls, (req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      try {
        const body = await readRawBody(req);
        if (secrets.length === 0) return answer(res, 503, "the demo destination is not ready");
        const v = verifyWebhook(body, req.headers, secrets);
        const p = v.payload as { type?: string; summary?: string };
        const repeat = seen.has(v.deliveryId) ? " (a retry of a delivery already received)" : "";
        seen.add(v.deliveryId);
        out(`demo webhook receiver: verified ${p.type} "${p.summary}" ${v.deliveryId}${repeat}`);
        answer(res, 204);
      } catch (e) {
        const why = e instanceof Error ? e.message : String(e);
        out(`demo webhook receiver: refused a request: ${why}`);
        answer(res, e instanceof WebhookVerificationError ? 400 : 500, why);
      }
    })();
  });
  const chat = createServer(tls, (req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      try {
        const m = JSON.parse((await readRawBody(req)).toString("utf8")) as { text?: unknown };
        if (typeof m.text !== "string") return answer(res, 400, "no_text");
        // Slack renders the three mrkdwn escapes; so does this line.
        const text = m.text.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
        out(`demo chat receiver (Slack-style): ${text}`);
        answer(res, 200, "ok"); // what Slack answers
      } catch {
        answer(res, 400, "invalid_payload");
      }
    })();
  });
  // Answers as PagerDuty's Events API v2 does: 202 with the dedup_key, 400 with errors.
  const incidents = new Map<string, string>();
  const pagerDuty = createServer(tls, (req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      const json = (status: number, o: unknown) =>
        res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(o));
      try {
        const e = JSON.parse((await readRawBody(req)).toString("utf8")) as Record<string, unknown>;
        const action = String(e.event_action);
        const key = typeof e.dedup_key === "string" ? e.dedup_key : "";
        const errors = [
          e.routing_key === DEMO_PAGERDUTY_KEY ? "" : "'routing_key' is invalid",
          ["trigger", "acknowledge", "resolve"].includes(action) ? "" : "'event_action' is invalid",
          key ? "" : "'dedup_key' is missing",
          action === "trigger" && !(e.payload as { summary?: unknown } | undefined)?.summary
            ? "'payload.summary' is missing"
            : "",
        ].filter(Boolean);
        if (errors.length > 0)
          return json(400, { status: "invalid event", message: "Event object is invalid", errors });
        const was = incidents.get(key);
        const next =
          action === "trigger" ? "triggered" : action === "acknowledge" ? "acknowledged" : "resolved";
        incidents.set(key, was === undefined && action !== "trigger" ? "unknown" : next);
        const summary = (e.payload as { summary?: string } | undefined)?.summary;
        out(
          `demo PagerDuty receiver: ${action} ${key} → ${incidents.get(key)}${summary ? ` "${summary}"` : ""}`,
        );
        json(202, { status: "success", message: "Event processed", dedup_key: key });
      } catch {
        json(400, {
          status: "invalid event",
          message: "Event object is invalid",
          errors: ["Body is not JSON"],
        });
      }
    })();
  });
  const state = readNotifyState(dataDir);
  const webhookPort = await listenLoopback(webhook, state.webhookPort);
  const chatPort = await listenLoopback(chat, state.chatPort);
  const pagerDutyPort = await listenLoopback(pagerDuty, state.pagerDutyPort);
  writeNotifyState(dataDir, { webhookPort, chatPort, pagerDutyPort });
  const close = (s: Server) =>
    new Promise<void>((r) => {
      s.closeAllConnections();
      s.close(() => r());
    });
  return {
    cert: tls.cert,
    webhookUrl: `https://127.0.0.1:${webhookPort}/svc-webhook`,
    chatUrl: `https://127.0.0.1:${chatPort}/services/demo`,
    pagerDutyUrl: `https://127.0.0.1:${pagerDutyPort}/v2/enqueue`,
    setWebhookSecret(secret) {
      secrets.splice(0, secrets.length, secret);
    },
    close: async () => {
      await Promise.all([close(webhook), close(chat), close(pagerDuty)]);
    },
  };
}

/** The routing key of the demo's PagerDuty destination (its loopback receiver accepts only this one). */
const DEMO_PAGERDUTY_KEY = "svcdemo0pagerduty0routing0key000";

/** Creates the demo's email, webhook, chat and PagerDuty destinations; returns their names for the CPU rule. */
async function createDemoDestinations(
  db: Db,
  dataDir: string,
  notify: DemoNotify,
  ownerUserId: string,
): Promise<string[]> {
  const owner = { kind: "HUMAN_SESSION" as const, userId: ownerUserId, sessionId: "" };
  const create = (
    displayName: string,
    kind: string,
    url: string,
    recipients: string[] = [],
    integrationKey = "",
  ) =>
    createDestination(notify.deps, owner, {
      projectName: `projects/${DEMO_PROJECT}`,
      displayName,
      kind,
      recipients,
      url,
      requestId: randomUUID(),
      integrationKey,
    });
  const email = await create("Demo owner's email", "EMAIL", "", [`users/${ownerUserId}`]);
  // This stands in for the opt-in click: the owner would confirm the code from the verification email
  // (in the demo's mailbox, main.ts) with VerifyDestination. The demo is created in-process, so its
  // owner's address is marked verified.
  await db
    .updateTable("destination_recipients")
    .set({ verify_time: notify.deps.now() })
    .where("destination_id", "=", email.destination.name.slice(email.destination.name.lastIndexOf("/") + 1))
    .where("user_id", "=", ownerUserId)
    .execute();
  const destinations: DemoNotifyState["destinations"] = { email: email.destination.name };
  const r = notify.receivers;
  let webhookSecret: string | undefined;
  if (r) {
    const hook = await create("Demo webhook receiver (loopback)", "WEBHOOK", r.webhookUrl);
    webhookSecret = hook.webhookSecret;
    r.setWebhookSecret(webhookSecret);
    destinations.webhook = hook.destination.name;
    destinations.chat = (
      await create("Demo Slack-style chat (loopback)", "SLACK", r.chatUrl)
    ).destination.name;
    destinations.pagerDuty = (
      await create("Demo PagerDuty (loopback)", "PAGERDUTY", r.pagerDutyUrl, [], DEMO_PAGERDUTY_KEY)
    ).destination.name;
  }
  writeNotifyState(dataDir, {
    ownerUserId,
    destinations,
    ...(r
      ? { webhookSecret, webhookUrl: r.webhookUrl, chatUrl: r.chatUrl, pagerDutyUrl: r.pagerDutyUrl }
      : {}),
  });
  return [destinations.webhook, destinations.email, destinations.chat, destinations.pagerDuty].filter(
    (n): n is string => !!n,
  );
}

/**
 * The start-up line that says what the demo notifies and where its deliveries show; undefined without any.
 * `mailboxDir`: where the demo's SMTP catcher keeps what it receives (unset: SVC_SMTP_URL is configured).
 */
export function demoNotifyLine(dataDir: string, mailboxDir: string | undefined): string | undefined {
  const d = readNotifyState(dataDir).destinations;
  if (!d) return undefined;
  const loopback = [
    d.webhook ? "a signed webhook" : "",
    d.chat ? "a Slack-style chat endpoint" : "",
    d.pagerDuty ? "a PagerDuty-shaped Events API endpoint" : "",
  ]
    .filter(Boolean)
    .join(", ");
  const parts = [
    loopback ? `${loopback} (receivers on 127.0.0.1 that print each delivery here)` : "",
    d.email
      ? `the owner's email (${mailboxDir ? `through the demo's SMTP catcher on 127.0.0.1, into ${mailboxDir}` : "through SVC_SMTP_URL"})`
      : "",
  ].filter(Boolean);
  return (
    `demo notifications: the CPU rule notifies ${parts.join(" and ")}; ` +
    "its deliveries: the console's Destinations page, or DestinationService/ListDeliveries in a console session (docs/notifications.md)"
  );
}

/** A later start: hands the stored secret to the receiver and re-points destinations whose port changed. */
async function reconnectDemoDestinations(dataDir: string, notify: DemoNotify): Promise<void> {
  const state = readNotifyState(dataDir);
  const r = notify.receivers;
  if (!r || !state.ownerUserId || !state.destinations) return;
  if (state.webhookSecret) r.setWebhookSecret(state.webhookSecret);
  const owner = { kind: "HUMAN_SESSION" as const, userId: state.ownerUserId, sessionId: "" };
  const moves = [
    [state.destinations.webhook, state.webhookUrl, r.webhookUrl, "webhookUrl"],
    [state.destinations.chat, state.chatUrl, r.chatUrl, "chatUrl"],
    [state.destinations.pagerDuty, state.pagerDutyUrl, r.pagerDutyUrl, "pagerDutyUrl"],
  ] as const;
  for (const [name, was, now, key] of moves) {
    if (!name || was === now) continue;
    await updateDestination(notify.deps, owner, { name, url: now, recipients: [], updateRecipients: false })
      .then(() => writeNotifyState(dataDir, { [key]: now }))
      .catch((e: unknown) =>
        notify.note(`demo notifications: could not re-point ${name}: ${e instanceof Error ? e.message : e}`),
      );
  }
}
