import { createHash, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import { detachDestination, ruleName, rulesNamingDestination } from "../alerts/rules.ts";
import { noteCreated } from "../call-notes.ts";
import type { Db } from "../db/database.ts";
import type { DestinationTable } from "../db/schema.ts";
import { capabilityDenied, invalidArgument, notFound, permissionDenied, SvcError } from "../errors.ts";
import { checkFreeText, MAX_DISPLAY_NAME } from "../free-text.ts";
import { principalName } from "../iam/actor.ts";
import { notificationRead, rolePermissions } from "../iam/capabilities.ts";
import { bodyHash, findReplay, recordResult } from "../iam/idempotency.ts";
import { requireMember, roleOf } from "../iam/membership.ts";
import { authorizeProject, type Principal, projectOfRequest } from "../iam/principal.ts";
import { parseProjectName } from "../inventory/names.ts";
import type { MailSender } from "./channels/email.ts";
import { renderVerificationEmail } from "./channels/email.ts";
import { checkDestinationUrl } from "./http.ts";
import type { NotifyOptions } from "./options.ts";
import type { Sealer } from "./seal.ts";
import { generateWebhookSecret } from "./signing.ts";

export const destinationKinds = [
  "EMAIL",
  "WEBHOOK",
  "SLACK",
  "TEAMS",
  "DISCORD",
  "PAGERDUTY",
  "OPSGENIE",
] as const;
export type DestinationKind = (typeof destinationKinds)[number];
export const MAX_OVERLAP_SECONDS = 86_400;
const MAX_RECIPIENTS = 50;
const ID = /^[a-z0-9]{8,64}$/;

export interface DestinationsDeps {
  readonly db: Db;
  readonly options: NotifyOptions;
  readonly sealer: Sealer;
  readonly mailer: MailSender;
  /** Public origin, for links in emails. */
  readonly baseUrl: string;
  readonly now: () => number;
  /** Told when a delivery was queued (a test send), so the dispatcher does not wait for its poll. */
  readonly onQueued?: () => void;
}

export function destinationName(projectId: string, id: string): string {
  return `projects/${projectId}/destinations/${id}`;
}

export function parseDestinationName(name: string, field = "name"): { projectId: string; id: string } {
  const m = /^projects\/([^/]+)\/destinations\/([^/]+)$/.exec(name);
  if (!m || !ID.test(m[2]))
    throw invalidArgument(field, name ? "must be projects/<project_id>/destinations/<id>" : "is required");
  return { projectId: parseProjectName(`projects/${m[1]}`, field), id: m[2] };
}

export interface DestinationView {
  name: string;
  displayName: string;
  kind: string;
  paused: boolean;
  recipients: { user: string; email: string; verified: boolean; verifyTimeUnix: bigint }[];
  url: string;
  secrets: { id: string; createTimeUnix: bigint; expireTimeUnix: bigint }[];
  createTimeUnix: bigint;
  updateTimeUnix: bigint;
  creator: string;
  awaitingConfirmation: boolean;
  confirmationRequestedBy: string;
}

const sec = (ms: number | null | undefined) => BigInt(Math.floor((ms ?? 0) / 1000));
const hashCode = (code: string) => createHash("sha256").update(code).digest("hex");

async function view(db: Db, d: DestinationTable, nowMs: number): Promise<DestinationView> {
  const recipients =
    d.kind === "EMAIL"
      ? await db
          .selectFrom("destination_recipients as r")
          .innerJoin("users as u", "u.id", "r.user_id")
          .select(["r.user_id", "u.email", "r.verify_time"])
          .where("r.destination_id", "=", d.id)
          .orderBy("u.email")
          .execute()
      : [];
  const secrets =
    d.kind === "WEBHOOK"
      ? await db
          .selectFrom("destination_secrets")
          .select(["id", "create_time", "expire_time"])
          .where("destination_id", "=", d.id)
          .where((eb) => eb.or([eb("expire_time", "is", null), eb("expire_time", ">", nowMs)]))
          .orderBy("create_time", "desc")
          .execute()
      : [];
  return {
    name: destinationName(d.project_id, d.id),
    displayName: d.display_name,
    kind: d.kind,
    paused: d.paused === 1,
    recipients: recipients.map((r) => ({
      user: `users/${r.user_id}`,
      email: r.email,
      verified: r.verify_time !== null,
      verifyTimeUnix: sec(r.verify_time),
    })),
    url: d.url_display,
    secrets: secrets.map((s) => ({
      id: s.id,
      createTimeUnix: sec(s.create_time),
      expireTimeUnix: sec(s.expire_time),
    })),
    createTimeUnix: sec(d.create_time),
    updateTimeUnix: sec(d.update_time),
    creator: d.creator,
    awaitingConfirmation: d.unconfirmed_by !== "",
    confirmationRequestedBy: d.unconfirmed_by,
  };
}

/**
 * Issue 34: a URL set by a key or CI token waits for a person's confirmation (ConfirmDestination), so a
 * leaked credential cannot start sending incidents somewhere on its own; one set by a person is active
 * at once. Email needs none: its recipients are members who each confirm their own address.
 */
function unconfirmedBy(p: Principal): string {
  return p.kind === "HUMAN_SESSION" ? "" : principalName(p);
}

async function loadDestination(db: Db, projectId: string, id: string): Promise<DestinationTable> {
  const d = await db
    .selectFrom("destinations")
    .selectAll()
    .where("id", "=", id)
    .where("project_id", "=", projectId)
    .where("delete_time", "is", null)
    .executeTakeFirst();
  if (!d) throw notFound(destinationName(projectId, id));
  return d;
}

/** A new signing secret of destination `id`, sealed, current until a rotation expires it. */
async function addSecret(tx: Db, id: string, sealedSecret: string, nowMs: number): Promise<void> {
  await tx
    .insertInto("destination_secrets")
    .values({
      id: randomBytes(6).toString("hex"),
      destination_id: id,
      sealed_secret: sealedSecret,
      create_time: nowMs,
      expire_time: null,
    })
    .execute();
}

function checkDisplayName(s: string): string {
  return checkFreeText("displayName", s, { max: MAX_DISPLAY_NAME, required: true });
}

/** Users of `names` (users/<id>) who are members of the project; the error names the field. */
async function checkRecipients(db: Db, projectId: string, names: readonly string[]): Promise<string[]> {
  if (names.length === 0)
    throw invalidArgument("recipients", "an email destination needs at least one recipient");
  if (names.length > MAX_RECIPIENTS)
    throw invalidArgument("recipients", `must hold at most ${MAX_RECIPIENTS} users`);
  const ids: string[] = [];
  for (const [i, n] of names.entries()) {
    const m = /^users\/([A-Za-z0-9_-]{1,64})$/.exec(n);
    if (!m) throw invalidArgument(`recipients[${i}]`, "must be users/<id>");
    if (ids.includes(m[1])) throw invalidArgument(`recipients[${i}]`, `${n} is listed twice`);
    if (!(await roleOf(db, projectId, m[1])))
      throw invalidArgument(`recipients[${i}]`, `${n} is not a member of the project`);
    ids.push(m[1]);
  }
  return ids;
}

async function checkUrl(
  kind: DestinationKind,
  given: string,
  options: NotifyOptions,
): Promise<{ display: string; url: string }> {
  // Incident-management kinds have a fixed API endpoint; a URL is only needed for their EU region.
  const url = given || (isIncidentApiKind(kind) ? incidentApi[kind].defaultUrl : "");
  if (!url) throw invalidArgument("url", `is required for a ${kind} destination`);
  if (url.length > 2048) throw invalidArgument("url", "must be at most 2048 characters");
  await checkDestinationUrl(url, options.allowHosts);
  const u = new URL(url);
  const hosts: Partial<Record<DestinationKind, RegExp>> = {
    SLACK: /^hooks\.slack\.com$/,
    DISCORD: /^(discord\.com|discordapp\.com)$/,
    PAGERDUTY: incidentApi.PAGERDUTY.hosts,
    OPSGENIE: incidentApi.OPSGENIE.hosts,
  };
  const want = hosts[kind];
  if (want && !want.test(u.hostname) && !options.allowHosts.includes(u.hostname))
    throw invalidArgument(
      "url",
      `must be the provider's incoming-webhook URL (${want.source.replace(/\\/g, "")})`,
    );
  // A webhook or incident API URL is shown as given; a chat URL is a secret in itself, so only its host.
  return { display: kind === "WEBHOOK" || isIncidentApiKind(kind) ? url : `https://${u.host}/…`, url };
}

/** The incident-management kinds: a fixed API and an integration key (sealed), not a secret URL. */
const incidentApi = {
  PAGERDUTY: {
    defaultUrl: "https://events.pagerduty.com/v2/enqueue",
    hosts: /^events\.(eu\.)?pagerduty\.com$/,
    // Events API v2 integration keys are 32 characters.
    key: /^[A-Za-z0-9]{32}$/,
    keyHelp: "the 32-character Events API v2 integration key of a PagerDuty service",
  },
  OPSGENIE: {
    defaultUrl: "https://api.opsgenie.com/v2/alerts",
    hosts: /^api\.(eu\.)?opsgenie\.com$/,
    key: /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i,
    keyHelp: "the API key (a UUID) of an Opsgenie API integration",
  },
} as const;

function isIncidentApiKind(kind: string): kind is keyof typeof incidentApi {
  return kind === "PAGERDUTY" || kind === "OPSGENIE";
}

/** The integration key of a PagerDuty or Opsgenie destination; the error never echoes the key. */
function checkIntegrationKey(kind: DestinationKind, key: string): string {
  if (!isIncidentApiKind(kind)) {
    if (key) throw invalidArgument("integrationKey", "is only for PAGERDUTY and OPSGENIE destinations");
    return "";
  }
  const want = incidentApi[kind];
  if (!key) throw invalidArgument("integrationKey", `is required: ${want.keyHelp}`);
  if (!want.key.test(key))
    throw invalidArgument("integrationKey", `has the wrong shape: expected ${want.keyHelp}`);
  return key;
}

export interface CreateInput {
  projectName: string;
  displayName: string;
  kind: string;
  recipients: string[];
  url: string;
  requestId: string;
  /** PAGERDUTY, OPSGENIE. */
  integrationKey?: string;
}

export async function createDestination(
  deps: DestinationsDeps,
  p: Principal,
  input: CreateInput,
): Promise<{ destination: DestinationView; webhookSecret: string; replayed: boolean }> {
  const { db, options } = deps;
  const nowMs = deps.now();
  const projectId = projectOfRequest(p, input.projectName);
  await authorizeProject(db, p, projectId, "notifications.write");
  if (!/^[0-9a-f-]{36}$/i.test(input.requestId))
    throw invalidArgument("requestId", "is required (a client-generated UUID)");
  const kind = input.kind as DestinationKind;
  if (!(destinationKinds as readonly string[]).includes(kind))
    throw invalidArgument("kind", `must be one of ${destinationKinds.join(", ")}`);
  const displayName = checkDisplayName(input.displayName);
  const scope = `destinations:${projectId}`;
  const integrationKey = input.integrationKey ?? "";
  // The key is part of the body an exact retry repeats, hashed like the rest (never stored in clear).
  const hash = bodyHash({
    projectId,
    displayName,
    kind,
    recipients: input.recipients,
    url: input.url,
    ...(integrationKey ? { integrationKey } : {}),
  });
  const replay = await findReplay<{ id: string }>(db, scope, input.requestId, hash);
  if (replay) {
    noteCreated(destinationName(projectId, replay.id));
    return {
      destination: await view(db, await loadDestination(db, projectId, replay.id), nowMs),
      webhookSecret: "",
      replayed: true,
    };
  }
  let userIds: string[] = [];
  let display = "";
  let url = "";
  const key = checkIntegrationKey(kind, integrationKey);
  if (kind === "EMAIL") {
    if (input.url) throw invalidArgument("url", "is not used by an email destination");
    userIds = await checkRecipients(db, projectId, input.recipients);
  } else {
    if (input.recipients.length > 0) throw invalidArgument("recipients", `are only for EMAIL destinations`);
    ({ display, url } = await checkUrl(kind, input.url, options));
  }
  const count = await db
    .selectFrom("destinations")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where("project_id", "=", projectId)
    .where("delete_time", "is", null)
    .executeTakeFirstOrThrow();
  if (Number(count.n) >= options.maxDestinationsPerProject) {
    throw new SvcError(
      "failed_precondition",
      `the project has ${count.n} destinations, the limit is ${options.maxDestinationsPerProject} (in-app needs none)`,
      {
        reason: "DESTINATION_LIMIT_EXCEEDED",
        metadata: { limit: String(options.maxDestinationsPerProject), count: String(count.n) },
      },
    );
  }
  const id = randomBytes(10).toString("hex");
  const secret = kind === "WEBHOOK" ? generateWebhookSecret() : "";
  const codes = new Map(userIds.map((u) => [u, randomBytes(6).toString("base64url")]));
  noteCreated(destinationName(projectId, id));
  await db.transaction().execute(async (tx) => {
    await recordResult(tx, scope, input.requestId, hash, { id }, nowMs);
    await tx
      .insertInto("destinations")
      .values({
        id,
        project_id: projectId,
        kind,
        display_name: displayName,
        paused: 0,
        url_display: display,
        sealed_url: url ? deps.sealer.seal(url) : "",
        sealed_key: key ? deps.sealer.seal(key) : "",
        create_time: nowMs,
        update_time: nowMs,
        delete_time: null,
        creator: principalName(p),
        unconfirmed_by: kind === "EMAIL" ? "" : unconfirmedBy(p),
      })
      .execute();
    if (secret) {
      await addSecret(tx, id, deps.sealer.seal(secret), nowMs);
    }
    await addUnverifiedRecipients(tx, id, codes, nowMs, options.verificationTtlMs);
  });
  const d = await loadDestination(db, projectId, id);
  await sendVerifications(deps, d, codes);
  return { destination: await view(db, d, nowMs), webhookSecret: secret, replayed: false };
}

/** New recipients wait for their emailed code: only its hash is kept, valid for `ttlMs`. */
async function addUnverifiedRecipients(
  tx: Db,
  destinationId: string,
  codes: ReadonlyMap<string, string>,
  nowMs: number,
  ttlMs: number,
): Promise<void> {
  if (codes.size === 0) return;
  await tx
    .insertInto("destination_recipients")
    .values(
      [...codes].map(([userId, code]) => ({
        destination_id: destinationId,
        user_id: userId,
        code_hash: hashCode(code),
        code_expire_time: nowMs + ttlMs,
        verify_time: null,
        create_time: nowMs,
      })),
    )
    .execute();
}

/** The double opt-in: each new recipient gets a code by email; VerifyDestination completes it. */
async function sendVerifications(
  deps: DestinationsDeps,
  d: DestinationTable,
  codes: Map<string, string>,
): Promise<void> {
  for (const [userId, code] of codes) {
    const u = await deps.db.selectFrom("users").select("email").where("id", "=", userId).executeTakeFirst();
    if (!u) continue;
    const mail = renderVerificationEmail({
      projectName: `projects/${d.project_id}`,
      destinationName: d.display_name,
      code,
      link: `${deps.baseUrl}/projects/${d.project_id}/destinations/${d.id}?verify=1`,
    });
    // A failed send leaves the recipient unverified; updating the recipients sends a new code.
    await deps.mailer.sendMail({ from: deps.options.emailFrom, to: u.email, ...mail }).catch(() => {});
  }
}

export async function getDestination(
  deps: Pick<DestinationsDeps, "db" | "now">,
  p: Principal,
  name: string,
): Promise<DestinationView> {
  const { projectId, id } = parseDestinationName(name);
  await authorizeProject(deps.db, p, projectId, notificationRead);
  return view(deps.db, await loadDestination(deps.db, projectId, id), deps.now());
}

export async function listDestinations(
  deps: Pick<DestinationsDeps, "db" | "now">,
  p: Principal,
  projectName: string,
): Promise<DestinationView[]> {
  const projectId = parseProjectName(projectName);
  await authorizeProject(deps.db, p, projectId, notificationRead);
  const rows = await deps.db
    .selectFrom("destinations")
    .selectAll()
    .where("project_id", "=", projectId)
    .where("delete_time", "is", null)
    .orderBy("create_time")
    .orderBy("id")
    .execute();
  const out: DestinationView[] = [];
  for (const r of rows) out.push(await view(deps.db, r, deps.now()));
  return out;
}

export interface RecipientCandidate {
  user: string;
  displayName: string;
  email: string;
  role: string;
}

/**
 * The project's members, for picking email recipients by name (issue 27, item 11): the same readers as
 * the destinations themselves (people of the project, notifications.write credentials), since a
 * destination already shows its recipients' addresses to them.
 */
export async function listMembers(db: Db, p: Principal, projectName: string): Promise<RecipientCandidate[]> {
  const projectId = projectOfRequest(p, projectName);
  await authorizeProject(db, p, projectId, notificationRead);
  const rows = await db
    .selectFrom("memberships")
    .innerJoin("users", "users.id", "memberships.user_id")
    .select(["users.id", "users.display_name", "users.email", "memberships.role"])
    .where("memberships.project_id", "=", projectId)
    .orderBy("users.display_name")
    .orderBy("users.id")
    .execute();
  return rows.map((r) => ({
    user: `users/${r.id}`,
    displayName: r.display_name,
    email: r.email,
    role: r.role,
  }));
}

export interface UpdateInput {
  name: string;
  displayName?: string;
  paused?: boolean;
  recipients: string[];
  updateRecipients: boolean;
  url?: string;
  integrationKey?: string;
}

export async function updateDestination(
  deps: DestinationsDeps,
  p: Principal,
  input: UpdateInput,
): Promise<DestinationView> {
  const { db, options } = deps;
  const nowMs = deps.now();
  const { projectId, id } = parseDestinationName(input.name);
  await authorizeProject(db, p, projectId, "notifications.write");
  const d = await loadDestination(db, projectId, id);
  const set: Partial<DestinationTable> = { update_time: nowMs };
  if (input.displayName !== undefined) set.display_name = checkDisplayName(input.displayName);
  if (input.paused !== undefined) set.paused = input.paused ? 1 : 0;
  if (input.url !== undefined) {
    if (d.kind === "EMAIL") throw invalidArgument("url", "is not used by an email destination");
    const checked = await checkUrl(d.kind, input.url, options);
    set.url_display = checked.display;
    set.sealed_url = deps.sealer.seal(checked.url);
    // A new URL from a key waits for a person again; a person setting it vouches for it.
    set.unconfirmed_by = unconfirmedBy(p);
  }
  if (input.integrationKey !== undefined) {
    const key = checkIntegrationKey(d.kind, input.integrationKey);
    if (key) {
      set.sealed_key = deps.sealer.seal(key);
      // A new integration key routes alerts to another account: from a key, it waits for a person too.
      set.unconfirmed_by = unconfirmedBy(p);
    }
  }
  const codes = new Map<string, string>();
  if (input.updateRecipients) {
    if (d.kind !== "EMAIL") throw invalidArgument("recipients", "are only for EMAIL destinations");
    const ids = await checkRecipients(db, projectId, input.recipients);
    const existing = new Set(
      (
        await db
          .selectFrom("destination_recipients")
          .select("user_id")
          .where("destination_id", "=", id)
          .execute()
      ).map((r) => r.user_id),
    );
    for (const u of ids) if (!existing.has(u)) codes.set(u, randomBytes(6).toString("base64url"));
    await db.transaction().execute(async (tx) => {
      const removed = [...existing].filter((u) => !ids.includes(u));
      if (removed.length > 0)
        await tx
          .deleteFrom("destination_recipients")
          .where("destination_id", "=", id)
          .where("user_id", "in", removed)
          .execute();
      await addUnverifiedRecipients(tx, id, codes, nowMs, options.verificationTtlMs);
    });
  }
  await db.updateTable("destinations").set(set).where("id", "=", id).execute();
  const updated = await loadDestination(db, projectId, id);
  await sendVerifications(deps, updated, codes);
  return view(db, updated, nowMs);
}

/**
 * Deletes a destination. While alert rules name it the delete is refused (DESTINATION_IN_USE, naming
 * them) unless `detachFromRules`: then each of those rules gets a new revision without it, by this
 * caller, in the same transaction. No rule is ever left naming a destination that does not exist: a
 * concurrent SaveAlertRule re-reads the destinations it names under a row lock (alerts/rules.ts).
 */
export async function deleteDestination(
  deps: DestinationsDeps & { readonly onRulesChanged?: () => void },
  p: Principal,
  input: { name: string; detachFromRules?: boolean },
): Promise<{ name: string; skippedDeliveries: number; detachedRules: string[] }> {
  const { db } = deps;
  const nowMs = deps.now();
  const { name } = input;
  const { projectId, id } = parseDestinationName(name);
  await authorizeProject(db, p, projectId, "notifications.write");
  await loadDestination(db, projectId, id);
  const detached = await db.transaction().execute(async (tx) => {
    // The row lock first: a save that names this destination waits for it, or holds it until it committed.
    const r = await tx
      .updateTable("destinations")
      .set({ delete_time: nowMs, update_time: nowMs })
      .where("id", "=", id)
      .where("delete_time", "is", null)
      .executeTakeFirst();
    if (Number(r.numUpdatedRows) === 0) throw notFound(name);
    const using = await rulesNamingDestination(tx, projectId, name);
    if (using.length === 0) return [];
    const names = using.map((u) => ruleName(projectId, u.ruleId));
    if (!input.detachFromRules) {
      throw new SvcError(
        "failed_precondition",
        `alert rules use ${name}: ${names.join(", ")}; remove it from them first, or delete with detachFromRules to have each rule saved without it`,
        { reason: "DESTINATION_IN_USE", metadata: { rules: names.join(",") } },
      );
    }
    return detachDestination(tx, p, projectId, using, name, nowMs);
  });
  if (detached.length > 0) deps.onRulesChanged?.();
  const pending = await db
    .selectFrom("deliveries")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where("destination_id", "=", id)
    .where("state", "=", "PENDING")
    .executeTakeFirstOrThrow();
  // Pending deliveries are skipped by the dispatcher's recheck (DESTINATION_DELETED), each recorded.
  return { name, skippedDeliveries: Number(pending.n), detachedRules: detached };
}

/** PROJECT_BOUNDARY unless the user is a member, CAPABILITY unless their role grants notifications.write. */
async function requireNotificationsWriter(db: Db, projectId: string, userId: string): Promise<void> {
  const role = await requireMember(db, projectId, userId);
  if (!rolePermissions[role].includes("notifications.write"))
    throw capabilityDenied("notifications.write", `your role ${role} does not grant notifications.write`);
}

/** A person confirms a URL that a key or CI token set (the console shows its host and who set it). */
export async function confirmDestination(
  deps: Pick<DestinationsDeps, "db" | "now">,
  human: { userId: string },
  name: string,
): Promise<DestinationView> {
  const { db } = deps;
  const nowMs = deps.now();
  const { projectId, id } = parseDestinationName(name);
  await requireNotificationsWriter(db, projectId, human.userId);
  const d = await loadDestination(db, projectId, id);
  if (d.unconfirmed_by !== "") {
    await db
      .updateTable("destinations")
      .set({ unconfirmed_by: "", update_time: nowMs })
      .where("id", "=", id)
      .execute();
  }
  return view(db, await loadDestination(db, projectId, id), nowMs);
}

/** Completes the caller's own email verification with the code from the email. */
export async function verifyDestination(
  deps: DestinationsDeps,
  human: { userId: string },
  name: string,
  code: string,
): Promise<DestinationView> {
  const { db } = deps;
  const nowMs = deps.now();
  const { projectId, id } = parseDestinationName(name);
  await requireMember(db, projectId, human.userId);
  const d = await loadDestination(db, projectId, id);
  if (d.kind !== "EMAIL") throw invalidArgument("name", "only email destinations are verified");
  const r = await db
    .selectFrom("destination_recipients")
    .selectAll()
    .where("destination_id", "=", id)
    .where("user_id", "=", human.userId)
    .executeTakeFirst();
  if (!r)
    throw permissionDenied(
      "CAPABILITY",
      "you are not a recipient of this destination; each recipient verifies their own address",
    );
  if (r.verify_time === null) {
    const want = Buffer.from(r.code_hash, "hex");
    const got = Buffer.from(hashCode(code), "hex");
    if (!code || !timingSafeEqual(want, got))
      throw invalidArgument("code", "does not match the code sent to you");
    if (r.code_expire_time <= nowMs)
      throw invalidArgument(
        "code",
        "has expired; ask for a new one by updating the destination's recipients",
      );
    await db
      .updateTable("destination_recipients")
      .set({ verify_time: nowMs })
      .where("destination_id", "=", id)
      .where("user_id", "=", human.userId)
      .execute();
  }
  return view(db, d, nowMs);
}

export async function rotateWebhookSecret(
  deps: DestinationsDeps,
  p: Principal,
  name: string,
  overlapSeconds: number,
): Promise<{ destination: DestinationView; webhookSecret: string }> {
  const { db } = deps;
  const nowMs = deps.now();
  const { projectId, id } = parseDestinationName(name);
  await authorizeProject(db, p, projectId, "notifications.write");
  const d = await loadDestination(db, projectId, id);
  if (d.kind !== "WEBHOOK") throw invalidArgument("name", "only webhook destinations have a signing secret");
  if (!Number.isInteger(overlapSeconds) || overlapSeconds < 0 || overlapSeconds > MAX_OVERLAP_SECONDS)
    throw invalidArgument("overlapSeconds", `must be 0..${MAX_OVERLAP_SECONDS}`);
  const secret = generateWebhookSecret();
  const until = nowMs + overlapSeconds * 1000;
  await db.transaction().execute(async (tx) => {
    // Older secrets keep signing until the overlap ends (0: discarded now); none ever outlives a later one.
    await tx
      .updateTable("destination_secrets")
      .set({ expire_time: until })
      .where("destination_id", "=", id)
      .where((eb) => eb.or([eb("expire_time", "is", null), eb("expire_time", ">", until)]))
      .execute();
    await addSecret(tx, id, deps.sealer.seal(secret), nowMs);
  });
  return { destination: await view(db, d, nowMs), webhookSecret: secret };
}

/** Queues a test notification to the destination now; the dispatcher sends it like any other. */
export async function sendTestNotification(
  deps: DestinationsDeps,
  human: { userId: string },
  name: string,
): Promise<string> {
  const { db, options } = deps;
  const nowMs = deps.now();
  const { projectId, id } = parseDestinationName(name);
  await requireNotificationsWriter(db, projectId, human.userId);
  const d = await loadDestination(db, projectId, id);
  const deliveryId = `dlv_${randomUUID()}`;
  const message = {
    type: "test",
    deliveryId,
    timeUnix: Math.floor(nowMs / 1000),
    project: `projects/${projectId}`,
    summary: `Test notification for ${d.display_name} (projects/${projectId})`,
    link: `${deps.baseUrl}/projects/${projectId}/destinations/${id}`,
  };
  await db
    .insertInto("deliveries")
    .values({
      id: deliveryId,
      project_id: projectId,
      destination_id: id,
      event_id: `test:${randomUUID()}`,
      incident_id: null,
      event_type: "test",
      message: JSON.stringify(message),
      state: "PENDING",
      skip_reason: "",
      create_time: nowMs,
      expire_time: nowMs + options.messageTtlMs,
      next_attempt_time: nowMs,
      attempt_count: 0,
      lease_until: null,
      update_time: nowMs,
    })
    .execute();
  deps.onQueued?.();
  return deliveryId;
}
