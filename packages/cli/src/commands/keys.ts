import { randomUUID } from "node:crypto";
import type { JsonValue } from "@bufbuild/protobuf";
import {
  createKeyWithRecovery,
  type IssuedKey,
  isAmbiguous,
  type KeyRecoveryOptions,
  recoverLostKey,
  rotateKeyWithRecovery,
} from "@svc/sdk";
import { KeySchema } from "@svc/sdk/gen/svc/iam/v1/key_pb";
import type { Command } from "commander";
import { printTable, projectOption, UsageError } from "../common.ts";
import { type CliIo, clientsOf, iso, jsonOf, outOf, printJson } from "./alerts.ts";

const REQUEST_ID = /^[0-9A-Za-z][0-9A-Za-z._:-]{7,127}$/;

function requestIdOf(opts: { requestId?: string }, flag = "--request-id"): string {
  const id = opts.requestId ?? randomUUID();
  if (!REQUEST_ID.test(id)) throw new UsageError(`${flag} must be 8..128 letters, digits or ._:- (a UUID)`);
  return id;
}

function expireDaysOf(s: string): number {
  const n = Number(s);
  if (!Number.isInteger(n) || n < 0 || n > 365) throw new UsageError("--expire-days must be 1..365 (0 = 90)");
  return n;
}

/** The retry and recovery notes a user needs to finish by hand if this run is cut short. */
function recoveryHooks(err: (s: string) => void, io: CliIo): KeyRecoveryOptions {
  return {
    sleep: io.sleep,
    onRetry: ({ requestId, error }) =>
      err(`no clear answer (${error.rawMessage}); retrying with the same request id ${requestId}\n`),
    onRecover: ({ lostKey, lostRequestId }) =>
      err(
        `${lostKey?.name ?? "a key"} was issued by an earlier attempt (request id ${lostRequestId}) whose answer ` +
          `was lost; its secret cannot be shown again, so svc revokes it and issues a replacement\n`,
      ),
  };
}

/** After the last retry of an ambiguous failure: how to finish by hand, then the error. */
function unclear(err: (s: string) => void, requestId: string) {
  return (e: unknown): never => {
    if (isAmbiguous(e))
      err(
        `no clear answer after 3 attempts: a key may or may not have been issued. Run the same command again with --request-id ${requestId} (never a new id) to get a working key\n`,
      );
    throw e;
  };
}

function printIssued(cmd: Command, io: CliIo, verb: string, r: IssuedKey): void {
  const { out, err } = outOf(io);
  if (cmd.opts().json) {
    const value: Record<string, JsonValue> = {
      key: jsonOf(KeySchema, r.key),
      secret: r.secret,
      requestId: r.requestId,
    };
    if (r.revokedKey) value.revokedKey = jsonOf(KeySchema, r.revokedKey);
    printJson(out, value);
    return;
  }
  if (r.revokedKey) err(`revoked ${r.revokedKey.name} (its secret was lost)\n`);
  err(`${verb} ${r.key.name} (expires ${iso(r.key.expireTimeUnix)}); the secret is shown once:\n`);
  out(`${r.secret}\n`);
}

/** How `create` and `list` name the key's parent: `--parent` (svc keys) or an argument (svc service-accounts keys). */
export interface KeyCommandsOptions {
  /** Turns the `<service-account>` argument into the parent's full name. */
  readonly accountArgument?: (arg: string, cmd: Command) => string;
}

/** The parent for create and list: the argument (service-accounts keys) or --parent. */
function parentOf(cmd: Command, o: KeyCommandsOptions): string {
  if (o.accountArgument) return o.accountArgument(cmd.processedArgs[0] as string, cmd);
  return cmd.opts().parent as string;
}

/** `svc keys …` (parent by --parent), also mounted as `svc service-accounts keys …` (parent as argument). */
export function registerKeyCommands(program: Command, io: CliIo = {}, o: KeyCommandsOptions = {}): void {
  const { out, err } = outOf(io);
  const prefix = o.accountArgument ? "svc service-accounts keys" : "svc keys";
  const parentExample = o.accountArgument
    ? "<service-account>"
    : "--parent projects/demo/serviceAccounts/abc";
  const keys = o.accountArgument
    ? program
    : program
        .command("keys")
        .description("scoped keys: create, list, rotate, revoke, recover (a console session in SVC_TOKEN)");
  const withParent = (c: Command): Command =>
    o.accountArgument
      ? c
          .argument("<service-account>", "projects/<p>/serviceAccounts/<id>, or the id with --project")
          .addOption(projectOption("projects/<project_id> when <service-account> is a bare id", false))
      : c.requiredOption(
          "--parent <name>",
          "projects/<p> (personal key) or projects/<p>/serviceAccounts/<id>",
        );

  withParent(keys.command("create").description("create a key; its secret is printed once to stdout"))
    .requiredOption("--display-name <name>", "a name to recognise the key by")
    .option(
      "--capability <cap...>",
      "named explicitly, each held by the parent's identity: monitoring.read (queries, inventory, previews), monitoring.write (saving alert rules), notifications.write (creating, changing and deleting destinations), silences.write (creating, editing and expiring silences; a key's: at most 24 h), audit.read (the audit log)",
      ["monitoring.read"],
    )
    .option("--expire-days <n>", "1..365 (0 = the default of 90)", "0")
    .option(
      "--request-id <id>",
      "the id printed by an interrupted run: its key is revoked and replaced (default: a new UUID)",
    )
    .option("--json", "print {key, secret, requestId} as JSON")
    .addHelpText(
      "after",
      `
Examples:
  ${prefix} create ${parentExample} --display-name ci > key.txt
  ${prefix} create ${parentExample} --display-name ci --capability monitoring.read monitoring.write
  # a key that manages notification destinations (its webhooks wait for a person's confirmation)
  ${prefix} create ${parentExample} --display-name routes --capability monitoring.read notifications.write
  # the run was interrupted after "request id R": run it again with the same id
  ${prefix} create ${parentExample} --display-name ci --request-id R > key.txt`,
    )
    .action(async (...args: unknown[]) => {
      const cmd = args.at(-1) as Command;
      const opts = cmd.opts();
      const parent = parentOf(cmd, o);
      const requestId = requestIdOf(opts);
      const expireDays = expireDaysOf(opts.expireDays);
      const clients = clientsOf(cmd, io);
      err(
        `request id ${requestId} (if this run is interrupted, run it again with --request-id ${requestId})\n`,
      );
      const r = await createKeyWithRecovery(
        clients.keys,
        { parent, displayName: opts.displayName, capabilities: opts.capability, expireDays },
        { ...recoveryHooks(err, io), requestId },
      ).catch(unclear(err, requestId));
      printIssued(cmd, io, "created", r);
    });

  withParent(keys.command("list").description("list keys (never their secrets)"))
    .option("--json", "print JSON")
    .addHelpText("after", `\nExample:\n  ${prefix} list ${parentExample} --output yaml`)
    .action(async (...args: unknown[]) => {
      const cmd = args.at(-1) as Command;
      const { keys: list } = await clientsOf(cmd, io).keys.listKeys({ parent: parentOf(cmd, o) });
      if (cmd.opts().json)
        return printJson(
          out,
          list.map((k) => jsonOf(KeySchema, k)),
        );
      printTable(
        out,
        ["NAME", "STATE", "CAPABILITIES", "HINT", "EXPIRES", "DISPLAY NAME"],
        list.map((k) => [
          k.name,
          k.state,
          k.capabilities.join(","),
          k.secretHint,
          iso(k.expireTimeUnix),
          k.displayName,
        ]),
      );
    });

  keys
    .command("rotate")
    .description("issue a replacement; older keys of the lineage stop after the overlap")
    .requiredOption("--name <key>", "the key to rotate")
    .option("--overlap <seconds>", "0..86400; 0 stops older keys at once", "0")
    .option("--expire-days <n>", "1..365 (0 = the default of 90)", "0")
    .option(
      "--request-id <id>",
      "the id printed by an interrupted run: its new key is revoked and replaced (default: a new UUID)",
    )
    .option("--json", "print {key, secret, requestId} as JSON")
    .addHelpText(
      "after",
      `
Examples:
  ${prefix} rotate --name projects/demo/serviceAccounts/abc/keys/k1 --overlap 3600 > new-key.txt
  ${prefix} rotate --name projects/demo/serviceAccounts/abc/keys/k1 --request-id R   # after an interrupted run`,
    )
    .action(async (opts, cmd: Command) => {
      const overlapSeconds = Number(opts.overlap);
      if (!Number.isInteger(overlapSeconds) || overlapSeconds < 0 || overlapSeconds > 86_400)
        throw new UsageError("--overlap must be 0..86400 seconds");
      const requestId = requestIdOf(opts);
      const expireDays = expireDaysOf(opts.expireDays);
      const clients = clientsOf(cmd, io);
      err(
        `request id ${requestId} (if this run is interrupted, run it again with --request-id ${requestId})\n`,
      );
      const r = await rotateKeyWithRecovery(
        clients.keys,
        { name: opts.name, overlapSeconds, expireDays },
        { ...recoveryHooks(err, io), requestId },
      ).catch(unclear(err, requestId));
      printIssued(cmd, io, "rotated to", r);
    });

  keys
    .command("recover")
    .description(
      "revoke the key an earlier create, rotate or recover issued (its answer was lost) and issue its replacement, in one step",
    )
    .requiredOption("--lost-request-id <id>", "the request id of the run whose answer was lost")
    .option(
      "--request-id <id>",
      "this recovery's own id, to retry an interrupted recovery (default: a new UUID)",
    )
    .option("--json", "print {key, secret, requestId, revokedKey} as JSON")
    .addHelpText(
      "after",
      `
Usually not needed: "svc keys create|rotate --request-id R" recovers by itself. Example:
  ${prefix} recover --lost-request-id 0b6f3c1e-5d0e-4c53-a1a4-1f0c2d9e7b10 > key.txt`,
    )
    .action(async (opts, cmd: Command) => {
      const lost = requestIdOf({ requestId: opts.lostRequestId }, "--lost-request-id");
      const requestId = requestIdOf(opts);
      const clients = clientsOf(cmd, io);
      err(
        `recovery request id ${requestId} (if this run is interrupted, run it again with --request-id ${requestId})\n`,
      );
      const r = await recoverLostKey(clients.keys, lost, { ...recoveryHooks(err, io), requestId }).catch(
        unclear(err, requestId),
      );
      printIssued(cmd, io, "issued", r);
    });

  keys
    .command("revoke")
    .description("revoke a key at once")
    .requiredOption("--name <key>", "the key to revoke")
    .option("--json", "print the key as JSON")
    .addHelpText("after", `\nExample:\n  ${prefix} revoke --name projects/demo/serviceAccounts/abc/keys/k1`)
    .action(async (opts, cmd: Command) => {
      const k = await clientsOf(cmd, io).keys.revokeKey({ name: opts.name });
      if (opts.json) return printJson(out, jsonOf(KeySchema, k));
      out(`${k.name}\t${k.state}\n`);
    });
}
