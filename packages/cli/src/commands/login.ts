import { createSvcClients } from "@svc/sdk";
import type { Command } from "commander";
import { baseUrlOf, printStructured, tokenOf, UsageError } from "../common.ts";
import { iso, outOf } from "./alerts.ts";
import type { DestinationIo } from "./destinations.ts";

/** Reads a password without echo on a terminal, else the first line of stdin. */
async function readPassword(io: DestinationIo, err: (s: string) => void): Promise<string> {
  if (io.stdin) return (await io.stdin()).split(/\r?\n/)[0] ?? "";
  const stdin = process.stdin;
  if (!stdin.isTTY) {
    const chunks: Buffer[] = [];
    for await (const c of stdin) chunks.push(typeof c === "string" ? Buffer.from(c) : (c as Buffer));
    return Buffer.concat(chunks).toString("utf8").split(/\r?\n/)[0] ?? "";
  }
  err("password: ");
  stdin.setRawMode(true);
  stdin.resume();
  try {
    let password = "";
    for await (const chunk of stdin) {
      for (const ch of String(chunk)) {
        if (ch === "\r" || ch === "\n") return password;
        if (ch === "\u0003") throw new UsageError("cancelled");
        if (ch === "\u007f" || ch === "\b") password = password.slice(0, -1);
        else password += ch;
      }
    }
    return password;
  } finally {
    stdin.setRawMode(false);
    stdin.pause();
    err("\n");
  }
}

/** `svc auth login|logout|whoami`: console sessions for the commands people run (keys, service accounts, trusts). */
export function registerLoginCommands(program: Command, io: DestinationIo = {}): void {
  const { out, err } = outOf(io);
  const auth = program.commands.find((c) => c.name() === "auth") ?? program.command("auth");

  auth
    .command("login")
    .description("sign in with email and password; prints a 12-hour console session token once to stdout")
    .requiredOption("--email <email>", "your account's email")
    .addHelpText(
      "after",
      `
The password comes from $SVC_PASSWORD, else stdin (typed without echo on a terminal); never an argument.

Example:
  export SVC_TOKEN="$(svc auth login --email demo@example.com)"
  # against the demo: the password is consolePassword in .data/demo-credentials.json`,
    )
    .action(async (opts, cmd: Command) => {
      const password = process.env.SVC_PASSWORD || (await readPassword(io, err));
      if (!password) throw new UsageError("no password: set SVC_PASSWORD or type it on stdin");
      const res = await createSvcClients({
        baseUrl: baseUrlOf(cmd),
        fetch: io.fetch,
        sleep: io.sleep,
      }).sessions.login({
        email: opts.email,
        password,
      });
      err(`signed in as ${res.user} until ${iso(res.expireTimeUnix)}; the session token is shown once:\n`);
      out(`${res.sessionToken}\n`);
    });

  auth
    .command("logout")
    .description("end the console session in SVC_TOKEN")
    .addHelpText("after", "\nExample:\n  svc auth logout && unset SVC_TOKEN")
    .action(async (_opts, cmd: Command) => {
      await createSvcClients({ baseUrl: baseUrlOf(cmd), token: tokenOf(), fetch: io.fetch }).sessions.logout(
        {},
      );
      err("signed out\n");
    });

  auth
    .command("whoami")
    .description("who the credential is, its kind, and its effective grants per project")
    .option("--json", "print JSON")
    .addHelpText("after", "\nExample:\n  svc auth whoami")
    .action(async (opts, cmd: Command) => {
      const w = await createSvcClients({
        baseUrl: baseUrlOf(cmd),
        token: tokenOf(),
        fetch: io.fetch,
      }).sessions.whoAmI({});
      if (opts.json) return printStructured(out, { principal: w.principal, kind: w.kind, grants: w.grants });
      out(`${w.principal}\t${w.kind}\n`);
      for (const g of w.grants) out(`  ${g}\n`);
    });
}
