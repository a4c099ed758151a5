import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { ConnectError } from "@connectrpc/connect";
import type { SvcClients } from "@svc/sdk";
import {
  type CreateDestinationRequest,
  type CreateDestinationResponse,
  CreateDestinationResponseSchema,
  DeleteDestinationResponseSchema,
  type Destination,
  DestinationSchema,
  RotateWebhookSecretResponseSchema,
  type UpdateDestinationRequest,
} from "@svc/sdk/gen/svc/monitoring/v1/destinations_pb";
import type { Command } from "commander";
import { printLines, projectOption, UsageError } from "../common.ts";
import {
  addGetCommand,
  type CliIo,
  clientsOf,
  human,
  isAmbiguous,
  iso,
  jsonOf,
  outOf,
  parseSeconds,
  printJson,
} from "./alerts.ts";

/** CliIo plus standard input, read whole (for `--url-file -`); tests hand in a string instead. */
export interface DestinationIo extends CliIo {
  readonly stdin?: () => Promise<string>;
}

export const destinationKinds = [
  "EMAIL",
  "WEBHOOK",
  "SLACK",
  "TEAMS",
  "DISCORD",
  "PAGERDUTY",
  "OPSGENIE",
] as const;
/** Incident tools: a fixed API (the URL is optional) and an integration key, a secret. */
const keyKinds = new Set(["PAGERDUTY", "OPSGENIE"]);
/** Kinds whose URL is itself a secret (whoever has it can post to the channel). */
const chatKinds = new Set(["SLACK", "TEAMS", "DISCORD"]);
export const MAX_OVERLAP_SECONDS = 86_400;

export function parseKind(s: string): string {
  const kind = s.trim().toUpperCase();
  if (!(destinationKinds as readonly string[]).includes(kind))
    throw new UsageError(`--kind must be one of ${destinationKinds.join(", ")}`);
  return kind;
}

/**
 * The URL read from a file, stdin or --url: trimmed, one line, https. The URL may be a secret, so no
 * message here repeats it.
 */
export function cleanUrl(text: string, from: string): string {
  const url = text.trim();
  if (!url) throw new UsageError(`${from}: no URL`);
  if (/\s/.test(url)) throw new UsageError(`${from}: expected one URL on one line`);
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new UsageError(`${from}: not a valid URL`);
  }
  if (u.protocol !== "https:") throw new UsageError(`${from}: the URL must use https`);
  return url;
}

/** --overlap: seconds or a duration, 0..24h. */
export function parseOverlap(s: string): number {
  const seconds = parseSeconds(s, "--overlap");
  if (seconds > MAX_OVERLAP_SECONDS)
    throw new UsageError(`--overlap must be 0..24h (${MAX_OVERLAP_SECONDS} seconds), not ${human(seconds)}`);
  return seconds;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(typeof c === "string" ? Buffer.from(c) : (c as Buffer));
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * The URL from --url-file (a path, or - for stdin) or --url; undefined when neither is given. `--url`
 * with a chat kind (or an unknown kind, on update) warns: the URL is a secret and now sits in the shell
 * history and the process list.
 */
export async function urlOf(
  opts: { url?: string; urlFile?: string },
  kind: string | undefined,
  io: DestinationIo,
): Promise<string | undefined> {
  const { err } = outOf(io);
  if (opts.url !== undefined && opts.urlFile !== undefined)
    throw new UsageError("give either --url or --url-file, not both");
  if (opts.urlFile === "-") {
    if (!io.stdin && process.stdin.isTTY) err("paste the URL, then press Enter and Ctrl-D\n");
    return cleanUrl(await (io.stdin ?? readStdin)(), "--url-file -");
  }
  if (opts.urlFile !== undefined) {
    let text: string;
    try {
      text = readFileSync(opts.urlFile, "utf8");
    } catch (e) {
      throw new UsageError(`--url-file: ${e instanceof Error ? e.message : String(e)}`);
    }
    return cleanUrl(text, `--url-file ${opts.urlFile}`);
  }
  if (opts.url === undefined) return undefined;
  const url = cleanUrl(opts.url, "--url");
  if (kind === undefined || chatKinds.has(kind)) {
    const what = kind === undefined ? "a Slack, Teams or Discord webhook URL" : `a ${kind} webhook URL`;
    err(
      `warning: ${what} is a secret (anyone holding it can post to the channel) and --url leaves it in your ` +
        `shell history and the process list; prefer --url-file <path> or --url-file - (stdin)\n`,
    );
  }
  return url;
}

/**
 * The integration key from --integration-key-file (a path, or - for stdin): trimmed, one line. A key is a
 * secret, so it is never a flag's value and no message repeats it. Undefined without the flag.
 */
export async function integrationKeyOf(
  opts: { integrationKeyFile?: string },
  io: DestinationIo,
): Promise<string | undefined> {
  const from = opts.integrationKeyFile;
  if (from === undefined) return undefined;
  let text: string;
  if (from === "-") {
    if (!io.stdin && process.stdin.isTTY) outOf(io).err("paste the key, then press Enter and Ctrl-D\n");
    text = await (io.stdin ?? readStdin)();
  } else {
    try {
      text = readFileSync(from, "utf8");
    } catch (e) {
      throw new UsageError(`--integration-key-file: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  const key = text.trim();
  if (!key) throw new UsageError(`--integration-key-file ${from}: no key`);
  if (/\s/.test(key)) throw new UsageError(`--integration-key-file ${from}: expected one key on one line`);
  return key;
}

/** What `create` sends: the integration key only for the kinds that have one. */
export type CreateRequest = Pick<
  CreateDestinationRequest,
  "projectName" | "kind" | "displayName" | "recipients" | "url" | "requestId"
> &
  Partial<Pick<CreateDestinationRequest, "integrationKey">>;

/** What `create` sends, from the flags; checks what the command line itself can get wrong. */
export function createRequestOf(
  opts: { project?: string; kind: string; displayName: string; recipient?: string[] },
  url: string | undefined,
  requestId: string,
  integrationKey?: string,
): CreateRequest {
  const kind = parseKind(opts.kind);
  const recipients = opts.recipient ?? [];
  if (keyKinds.has(kind)) {
    if (recipients.length > 0) throw new UsageError("--recipient is only for EMAIL destinations");
    if (integrationKey === undefined)
      throw new UsageError(
        `a ${kind} destination needs its integration key: --integration-key-file <path> or --integration-key-file - (stdin)`,
      );
  } else if (integrationKey !== undefined) {
    throw new UsageError("--integration-key-file is only for PAGERDUTY and OPSGENIE destinations");
  } else if (kind === "EMAIL") {
    if (url !== undefined) throw new UsageError("an EMAIL destination has no URL: drop --url / --url-file");
    if (recipients.length === 0)
      throw new UsageError("an EMAIL destination needs --recipient users/<id> (repeatable)");
  } else {
    if (recipients.length > 0) throw new UsageError("--recipient is only for EMAIL destinations");
    if (url === undefined)
      throw new UsageError(
        kind === "WEBHOOK"
          ? "a WEBHOOK destination needs its HTTPS endpoint: --url <https url> or --url-file <path>"
          : `a ${kind} destination needs its incoming-webhook URL: --url-file <path> or --url-file - (stdin)`,
      );
  }
  return {
    projectName: opts.project ?? "",
    kind,
    displayName: opts.displayName,
    recipients: [...recipients],
    url: url ?? "",
    requestId,
    ...(integrationKey !== undefined ? { integrationKey } : {}),
  };
}

/** What `update` sends, from the flags; something must change. */
export function updateRequestOf(
  name: string,
  opts: {
    displayName?: string;
    pause?: boolean;
    resume?: boolean;
    recipient?: string[];
    replaceRecipients?: boolean;
  },
  url: string | undefined,
  integrationKey?: string,
): Pick<
  UpdateDestinationRequest,
  "name" | "displayName" | "paused" | "recipients" | "updateRecipients" | "url" | "integrationKey"
> {
  if (opts.pause && opts.resume) throw new UsageError("give either --pause or --resume, not both");
  if (opts.recipient !== undefined && !opts.replaceRecipients)
    throw new UsageError(
      "--recipient replaces the whole recipient list: add --replace-recipients (and list every recipient to keep)",
    );
  if (opts.replaceRecipients && opts.recipient === undefined)
    throw new UsageError("--replace-recipients needs the new list: --recipient users/<id> (repeatable)");
  const req = {
    name,
    displayName: opts.displayName,
    paused: opts.pause ? true : opts.resume ? false : undefined,
    recipients: [...(opts.recipient ?? [])],
    updateRecipients: Boolean(opts.replaceRecipients),
    url,
    ...(integrationKey !== undefined ? { integrationKey } : {}),
  };
  if (
    req.displayName === undefined &&
    req.paused === undefined &&
    !req.updateRecipients &&
    req.url === undefined &&
    integrationKey === undefined
  )
    throw new UsageError(
      "nothing to change: give --display-name, --pause, --resume, --recipient with --replace-recipients, or --url-file",
    );
  return req;
}

const CREATE_ATTEMPTS = 3;
const CREATE_TIMEOUT_MS = 30_000;

/** CreateDestination, retried as it is (the same requestId) after an ambiguous failure. */
export async function createWithRetry(
  clients: SvcClients,
  req: CreateRequest,
  io: CliIo = {},
): Promise<CreateDestinationResponse> {
  const { err: log } = outOf(io);
  const sleep = io.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  for (let attempt = 1; ; attempt++) {
    try {
      return await clients.destinations.createDestination(req, { timeoutMs: CREATE_TIMEOUT_MS });
    } catch (e) {
      const err = ConnectError.from(e);
      if (!isAmbiguous(err)) throw err;
      if (attempt >= CREATE_ATTEMPTS) {
        log(
          `no clear answer after ${attempt} attempts: the destination may or may not have been created. To retry ` +
            `exactly this request, run the same command with --request-id ${req.requestId}\n`,
        );
        throw err;
      }
      log(`no clear answer (${err.rawMessage}); retrying with the same request id ${req.requestId}\n`);
      await sleep(attempt * 1000);
    }
  }
}

/** Where it sends: the webhook URL, a chat URL's host, or the email recipients. */
function targetOf(d: Destination): string {
  if (d.kind !== "EMAIL") return d.url || "-";
  const verified = d.recipients.filter((r) => r.verified).length;
  return `${d.recipients.length} recipients (${verified} verified)`;
}

export function destinationLine(d: Destination): string {
  const state = d.awaitingConfirmation ? "UNCONFIRMED" : d.paused ? "PAUSED" : "ACTIVE";
  return [d.name, d.kind, state, targetOf(d), d.displayName].join("\t");
}

export function printDestination(out: (s: string) => void, d: Destination): void {
  const rows: [string, string][] = [
    ["name", d.name],
    ["display name", d.displayName],
    ["kind", d.kind],
    [
      "state",
      d.awaitingConfirmation
        ? `UNCONFIRMED (set by ${d.confirmationRequestedBy}: nothing is sent until a person confirms it in the console)`
        : d.paused
          ? "PAUSED (deliveries due meanwhile are skipped)"
          : "ACTIVE",
    ],
  ];
  if (d.kind !== "EMAIL")
    rows.push([
      "url",
      d.kind === "WEBHOOK" ? d.url : `${d.url} (the URL is a secret; only its host is shown)`,
    ]);
  rows.push(
    ["created", d.creator ? `${iso(d.createTimeUnix)} by ${d.creator}` : iso(d.createTimeUnix)],
    ["updated", iso(d.updateTimeUnix)],
  );
  for (const [k, v] of rows) out(`${k.padEnd(12)} ${v}\n`);
  if (d.kind === "EMAIL") {
    out("recipients:\n");
    for (const r of d.recipients)
      out(
        `  ${r.user}\t${r.email}\t${r.verified ? `verified ${iso(r.verifyTimeUnix)}` : "NOT VERIFIED (waiting for the code from the email)"}\n`,
      );
  }
  if (d.kind === "WEBHOOK") {
    out("secrets:\n");
    for (const s of d.secrets)
      out(
        `  ${s.id}\tcreated ${iso(s.createTimeUnix)}\t${s.expireTimeUnix === 0n ? "current" : `signs until ${iso(s.expireTimeUnix)}`}\n`,
      );
  }
}

function collect(value: string, prev: string[] | undefined): string[] {
  return [...(prev ?? []), value];
}

const secretNote = "store it now, it is not shown again";

/**
 * `svc destinations`: where incident notifications go. Verifying an email recipient and sending a test
 * notification are done by people in the console (keys and CI tokens are refused), so there are no
 * commands for them.
 */
export function registerDestinationCommands(program: Command, io: DestinationIo = {}): void {
  const { out, err } = outOf(io);
  const destinations = program
    .command("destinations")
    .description(
      "notification destinations (monitoring.read to read, monitoring.write to change; SVC_TOKEN)",
    );

  destinations
    .command("list")
    .description("the project's destinations")
    .addOption(projectOption())
    .option("--json", "print JSON")
    .action(async (opts, cmd: Command) => {
      const clients = clientsOf(cmd, io);
      const res = await clients.destinations.listDestinations({ projectName: opts.project });
      if (opts.json)
        return printJson(
          out,
          res.destinations.map((d) => jsonOf(DestinationSchema, d)),
        );
      printLines(out, res.destinations.map(destinationLine), !io.stdout);
    });

  addGetCommand(destinations, io, {
    description: "one destination: recipients and their verification, or URL and secret ids",
    nameHelp: "projects/<project_id>/destinations/<id>",
    schema: DestinationSchema,
    read: (clients, name) => clients.destinations.getDestination({ name }),
    print: printDestination,
  });

  destinations
    .command("create")
    .description("create a destination; a WEBHOOK's signing secret is printed once")
    .addOption(
      projectOption("projects/<project_id> (may be left out with a key bound to one project)", false),
    )
    .requiredOption("--kind <kind>", destinationKinds.join(", "))
    .requiredOption("--display-name <name>", "a name to recognise it by")
    .option("--recipient <user>", "EMAIL: users/<id> of a project member (repeatable)", collect)
    .option(
      "--url-file <path>",
      "WEBHOOK / chat: a file holding the URL, or - to read it from stdin (keeps a chat URL out of shell history)",
    )
    .option(
      "--url <url>",
      "WEBHOOK: the HTTPS endpoint (for chat URLs, which are secrets, prefer --url-file); PAGERDUTY / OPSGENIE: optional (the EU API)",
    )
    .option(
      "--integration-key-file <path>",
      "PAGERDUTY: the Events API v2 routing key; OPSGENIE: the API key; a file holding it, or - for stdin",
    )
    .option("--request-id <uuid>", "reuse to retry an interrupted create by hand (default: a new one)")
    .option("--json", "print JSON (it holds the webhook secret)")
    .action(async (opts, cmd: Command) => {
      const kind = parseKind(opts.kind);
      const url = await urlOf(opts, kind, io);
      const requestId: string = opts.requestId ?? randomUUID();
      const req = createRequestOf({ ...opts, kind }, url, requestId, await integrationKeyOf(opts, io));
      const clients = clientsOf(cmd, io);
      err(`creating ${kind} destination "${req.displayName}", request id ${requestId}\n`);
      const res = await createWithRetry(clients, req, io);
      const d = res.destination;
      if (!d) throw new Error("the server returned no destination");
      if (res.replayed) {
        err("an earlier attempt of this request was applied; this is its answer\n");
        if (d.kind === "WEBHOOK")
          err(
            "its webhook secret went to that attempt only and is not shown again; for a new one run " +
              `svc destinations rotate-secret ${d.name} --overlap 0\n`,
          );
      }
      if (opts.json) {
        if (res.webhookSecret) err(`the JSON holds the webhook secret: ${secretNote}\n`);
        return printJson(out, jsonOf(CreateDestinationResponseSchema, res));
      }
      out(`${destinationLine(d)}\n`);
      if (d.kind === "EMAIL")
        err("each recipient was sent a verification code; they confirm it in the console\n");
      if (res.webhookSecret) {
        err(`the webhook signing secret follows on stdout: ${secretNote}\n`);
        out(`${res.webhookSecret}\n`);
      }
    });

  destinations
    .command("update")
    .description("change the display name, pause or resume, replace the recipients, or change the URL")
    .argument("<name>", "projects/<project_id>/destinations/<id>")
    .option("--display-name <name>", "a new display name")
    .option("--pause", "receive nothing; deliveries due meanwhile are skipped (DESTINATION_PAUSED)")
    .option("--resume", "receive notifications again")
    .option("--recipient <user>", "EMAIL: users/<id> (repeatable; with --replace-recipients)", collect)
    .option("--replace-recipients", "the --recipient list replaces the current one; new ones get a code")
    .option("--url-file <path>", "WEBHOOK / chat: a file holding the new URL, or - for stdin")
    .option("--url <url>", "WEBHOOK: the new endpoint (for chat URLs prefer --url-file)")
    .option(
      "--integration-key-file <path>",
      "PAGERDUTY / OPSGENIE: a file holding the new key, or - for stdin",
    )
    .option("--json", "print JSON")
    .action(async (name: string, opts, cmd: Command) => {
      const url = await urlOf(opts, undefined, io);
      const req = updateRequestOf(name, opts, url, await integrationKeyOf(opts, io));
      const clients = clientsOf(cmd, io);
      const d = await clients.destinations.updateDestination(req);
      if (opts.json) return printJson(out, jsonOf(DestinationSchema, d));
      out(`${destinationLine(d)}\n`);
    });

  destinations
    .command("delete")
    .description(
      "delete a destination; its pending deliveries are skipped (DESTINATION_DELETED); refused while alert rules name it (DESTINATION_IN_USE) unless --detach-from-rules",
    )
    .argument("<name>", "projects/<project_id>/destinations/<id>")
    .option("--detach-from-rules", "save each alert rule that names it again without it (a new version each)")
    .option("--json", "print JSON")
    .action(async (name: string, opts, cmd: Command) => {
      const clients = clientsOf(cmd, io);
      const res = await clients.destinations.deleteDestination({
        name,
        detachFromRules: Boolean(opts.detachFromRules),
      });
      if (opts.json) return printJson(out, jsonOf(DeleteDestinationResponseSchema, res));
      out(`deleted ${res.name}; ${res.skippedDeliveries} pending deliveries will be skipped\n`);
      for (const r of res.detachedRules) out(`removed from ${r} (a new version)\n`);
    });

  destinations
    .command("rotate-secret")
    .description("a new webhook signing secret, printed once; older ones sign until the overlap ends")
    .argument("<name>", "projects/<project_id>/destinations/<id> (a WEBHOOK)")
    .requiredOption(
      "--overlap <duration>",
      "how long older secrets keep signing: seconds or 30m, 6h, 24h (0..24h; 0 = discarded now)",
    )
    .option("--json", "print JSON (it holds the new secret)")
    .action(async (name: string, opts, cmd: Command) => {
      const overlapSeconds = parseOverlap(opts.overlap);
      const clients = clientsOf(cmd, io);
      const res = await clients.destinations.rotateWebhookSecret({ name, overlapSeconds });
      if (opts.json) {
        err(`the JSON holds the new webhook secret: ${secretNote}\n`);
        return printJson(out, jsonOf(RotateWebhookSecretResponseSchema, res));
      }
      err(
        `rotated ${name}; ${
          overlapSeconds === 0
            ? "older secrets were discarded"
            : `older secrets keep signing for ${human(overlapSeconds)}`
        }. The new secret follows on stdout: ${secretNote}\n`,
      );
      out(`${res.webhookSecret}\n`);
    });
}
