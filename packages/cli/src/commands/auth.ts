import { spawn } from "node:child_process";
import { getCIToken, IdTokenUnavailableError, verifyCITrustSetup } from "@svc/sdk";
import type { Command } from "commander";
import { baseUrlOf, UsageError } from "../common.ts";

/**
 * Registers the workflow command as a GitHub Actions workflow command on stderr: the runner reads
 * workflow commands from both streams, and stderr stays out of `$(svc auth ci …)` captures. From this
 * line on the runner replaces the value with *** in every log line.
 */
function mask(value: string): void {
  process.stderr.write(`::add-mask::${value}\n`);
}

/** `svc auth …`: credentials. */
export function registerAuthCommands(program: Command): void {
  const auth = program.command("auth").description("obtain svc credentials");
  const ci = auth
    .command("ci")
    .description(
      "exchange this GitHub Actions job's OIDC identity for a 15-minute svc token (needs `permissions: id-token: write`)",
    )
    .option("--trust <name>", "full trust name, projects/<p>/ciTrusts/<id>")
    .option("--audience <aud>", "the trust's audience, shown with the connection")
    .argument(
      "[command...]",
      "run this command with SVC_TOKEN and SVC_BASE_URL set instead of printing the token",
    )
    .addHelpText(
      "after",
      `
The token is masked with ::add-mask:: before anything else is printed. Without a command it is
printed once to stdout for capture inside one step:  SVC_TOKEN="$(svc auth ci --trust … --audience …)"
It is never written to GITHUB_ENV, GITHUB_OUTPUT or a file.`,
    )
    .action(async (command: string[], opts: { trust?: string; audience?: string }, cmd: Command) => {
      if (!opts.trust) throw new UsageError("--trust is required (projects/<p>/ciTrusts/<id>)");
      if (!opts.audience) throw new UsageError("--audience is required (shown with the trust connection)");
      const baseUrl = baseUrlOf(cmd);
      const token = await withIdTokenHint(() =>
        getCIToken({ baseUrl, trustName: opts.trust as string, audience: opts.audience as string }),
      );
      mask(token.accessToken);
      if (command.length === 0) {
        process.stdout.write(`${token.accessToken}\n`);
        return;
      }
      process.exitCode = await run(command, {
        ...process.env,
        SVC_TOKEN: token.accessToken,
        SVC_BASE_URL: baseUrl,
      });
    });

  ci.command("verify")
    .description(
      "temporary verification step: send the pairing code (SVC_SETUP_CODE) and this job's identity",
    )
    .requiredOption("--setup-id <id>", "setup ID shown by the console")
    .requiredOption("--audience <aud>", "audience shown by the console")
    .action(async (opts: { setupId: string; audience: string }, cmd: Command) => {
      const pairingCode = process.env.SVC_SETUP_CODE;
      if (!pairingCode) {
        throw new UsageError(
          "SVC_SETUP_CODE is not set: store the pairing code as the repository secret SVC_SETUP_CODE and map it into the step's env",
        );
      }
      mask(pairingCode);
      const r = await withIdTokenHint(() =>
        verifyCITrustSetup({
          baseUrl: baseUrlOf(cmd),
          setupId: opts.setupId,
          pairingCode,
          audience: opts.audience,
        }),
      );
      const o = r.observed;
      const lines = [
        `verified: ${r.trustName} is ${r.state}`,
        `  repository   ${o.repository} (id ${o.repositoryId})`,
        `  owner        ${o.repositoryOwner} (id ${o.repositoryOwnerId})`,
        `  workflow     ${o.workflowRef}`,
        `  ref          ${o.ref}`,
        `  event        ${o.event}`,
        `  environment  ${o.environment || "(none)"}`,
      ];
      if (o.jobWorkflowRef && o.jobWorkflowRef !== o.workflowRef)
        lines.push(`  reusable     ${o.jobWorkflowRef}`);
      lines.push(
        "Review and approve it in the console, then remove this step and the SVC_SETUP_CODE secret.",
        "(Removing the secret revokes nothing: disable or delete the trust to stop access.)",
      );
      process.stdout.write(`${lines.join("\n")}\n`);
    });
}

async function withIdTokenHint<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (err) {
    if (err instanceof IdTokenUnavailableError) throw new UsageError(err.message);
    throw err;
  }
}

function run(command: string[], env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(command[0], command.slice(1), { stdio: "inherit", env });
    child.on("error", reject);
    child.on("exit", (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
}
