import { randomUUID } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import { createSvcClients } from "@svc/sdk";
import type { Command } from "commander";
import { baseUrlOf, UsageError } from "../common.ts";
import { tokenOf } from "./token.ts";

/** Failures after which the request may or may not have been applied: retry with the same requestId. */
const ambiguous = new Set([
  Code.Unavailable,
  Code.DeadlineExceeded,
  Code.Unknown,
  Code.Internal,
  Code.Aborted,
]);

export function registerKeyCommands(program: Command): void {
  const keys = program.command("keys").description("scoped keys (console session token in SVC_TOKEN)");

  keys
    .command("create")
    .description("create a key; its secret is printed once to stdout")
    .requiredOption("--parent <name>", "projects/<p> (personal key) or projects/<p>/serviceAccounts/<id>")
    .requiredOption("--display-name <name>", "a name to recognise the key by")
    .option("--capability <cap...>", "monitoring.read, monitoring.write", ["monitoring.read"])
    .option("--expire-days <n>", "1..365 (default 90)", "0")
    .option("--request-id <id>", "reuse after an interrupted run: the lost key is revoked and replaced")
    .action(async (opts, cmd: Command) => {
      const clients = createSvcClients({ baseUrl: baseUrlOf(cmd), token: tokenOf() });
      const body = {
        parent: opts.parent as string,
        displayName: opts.displayName as string,
        capabilities: opts.capability as string[],
        expireDays: Number(opts.expireDays),
      };
      if (!Number.isInteger(body.expireDays)) throw new UsageError("--expire-days must be a whole number");
      const requestId = (opts.requestId as string | undefined) ?? randomUUID();
      let res = await createWithRetry(clients, { ...body, requestId });
      if (res.secret === undefined && res.key) {
        // The documented recovery: the earlier attempt created the key but its secret never reached
        // us and cannot be retrieved. Revoke it first, then create a replacement under a new requestId.
        process.stderr.write(
          `key ${res.key.name} was created by an earlier attempt whose answer was lost; revoking it\n`,
        );
        await clients.keys.revokeKey({ name: res.key.name });
        res = await createWithRetry(clients, { ...body, requestId: randomUUID() });
      }
      if (!res.key || res.secret === undefined) throw new Error("the server returned no secret");
      process.stderr.write(
        `created ${res.key.name} (expires ${new Date(Number(res.key.expireTimeUnix) * 1000).toISOString()}); the secret is shown once:\n`,
      );
      process.stdout.write(`${res.secret}\n`);
    });

  keys
    .command("list")
    .description("list keys (never their secrets)")
    .requiredOption("--parent <name>", "projects/<p> or projects/<p>/serviceAccounts/<id>")
    .option("--json", "print JSON")
    .action(async (opts, cmd: Command) => {
      const clients = createSvcClients({ baseUrl: baseUrlOf(cmd), token: tokenOf() });
      const { keys: list } = await clients.keys.listKeys({ parent: opts.parent });
      if (opts.json) {
        process.stdout.write(
          `${JSON.stringify(
            list.map((k) => ({
              ...k,
              createTimeUnix: String(k.createTimeUnix),
              expireTimeUnix: String(k.expireTimeUnix),
              revokeTimeUnix: String(k.revokeTimeUnix),
            })),
            null,
            2,
          )}\n`,
        );
        return;
      }
      for (const k of list) {
        process.stdout.write(
          `${k.name}\t${k.state}\t${k.capabilities.join(",")}\t${k.secretHint}\t${k.displayName}\n`,
        );
      }
    });

  keys
    .command("rotate")
    .description("issue a replacement; older keys of the lineage stop after the overlap")
    .requiredOption("--name <key>", "the key to rotate")
    .option("--overlap <seconds>", "0..86400; 0 stops older keys at once", "0")
    .option("--expire-days <n>", "1..365 (default 90)", "0")
    .action(async (opts, cmd: Command) => {
      const clients = createSvcClients({ baseUrl: baseUrlOf(cmd), token: tokenOf() });
      const res = await clients.keys.rotateKey({
        name: opts.name,
        overlapSeconds: Number(opts.overlap),
        expireDays: Number(opts.expireDays),
        requestId: randomUUID(),
      });
      process.stderr.write(`rotated to ${res.key?.name}; the secret is shown once:\n`);
      process.stdout.write(`${res.secret}\n`);
    });

  keys
    .command("revoke")
    .description("revoke a key at once")
    .requiredOption("--name <key>", "the key to revoke")
    .action(async (opts, cmd: Command) => {
      const clients = createSvcClients({ baseUrl: baseUrlOf(cmd), token: tokenOf() });
      const k = await clients.keys.revokeKey({ name: opts.name });
      process.stdout.write(`${k.name}\t${k.state}\n`);
    });
}

async function createWithRetry(
  clients: ReturnType<typeof createSvcClients>,
  req: { parent: string; displayName: string; capabilities: string[]; expireDays: number; requestId: string },
) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await clients.keys.createKey(req);
    } catch (e) {
      const err = ConnectError.from(e);
      if (attempt >= 3 || !ambiguous.has(err.code)) throw err;
      process.stderr.write(
        `no clear answer (${err.code === Code.Unavailable ? "unavailable" : err.rawMessage}); retrying with the same request id\n`,
      );
      await new Promise((r) => setTimeout(r, attempt * 1000));
    }
  }
}
