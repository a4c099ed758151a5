import {
  type CITrust,
  CITrustSchema,
  StartCITrustSetupResponseSchema,
} from "@svc/sdk/gen/svc/iam/v1/automation_pb";
import type { Command } from "commander";
import { printTable, projectOption, UsageError } from "../common.ts";
import { type CliIo, clientsOf, iso, jsonOf, outOf, printJson } from "./alerts.ts";

const events = ["push", "workflow_dispatch", "schedule"];

function row(t: CITrust): string[] {
  const who = t.observed?.repository || t.intended?.repository || "";
  const where = t.intended?.environment ? `env ${t.intended.environment}` : (t.intended?.branch ?? "");
  return [t.name, t.state, who, t.intended?.workflow ?? "", where, t.permissions.join(",") || "-"];
}
const header = ["NAME", "STATE", "REPOSITORY", "WORKFLOW", "BRANCH/ENV", "PERMISSIONS"];

function printTrust(out: (s: string) => void, t: CITrust): void {
  out(`name:         ${t.name}\n`);
  out(`state:        ${t.state}\n`);
  out(`account:      ${t.serviceAccount}\n`);
  out(`audience:     ${t.audience}\n`);
  out(`issuer:       ${t.issuer}\n`);
  const i = t.intended;
  if (i)
    out(
      `intended:     ${i.repository} ${i.workflow} ${i.environment ? `environment ${i.environment}` : `branch ${i.branch}`} on ${i.event}\n`,
    );
  const o = t.observed;
  if (o)
    out(
      `observed:     ${o.repository} (id ${o.repositoryId}, owner ${o.repositoryOwner} ${o.repositoryOwnerId}) ${o.workflowRef} on ${o.event}${o.environment ? ` environment ${o.environment}` : ""}\n`,
    );
  out(`permissions:  ${t.permissions.join(", ") || "-"}\n`);
  if (Number(t.setupExpireTimeUnix))
    out(`verify until: ${iso(t.setupExpireTimeUnix)} (setup id ${t.setupId})\n`);
  if (t.approver) out(`approved:     ${iso(t.approveTimeUnix)} by ${t.approver}\n`);
}

/** `svc ci-trusts`: GitHub Actions trust connections, managed by the project's owners (a console session). */
export function registerCiTrustCommands(program: Command, io: CliIo = {}): void {
  const { out, err } = outOf(io);
  const trusts = program
    .command("ci-trusts")
    .description(
      "CI trust connections for keyless GitHub Actions access (owners; a console session in SVC_TOKEN)",
    );
  const print = (cmd: Command, t: CITrust) => {
    if (cmd.opts().json) return printJson(out, jsonOf(CITrustSchema, t));
    printTrust(out, t);
  };

  trusts
    .command("list")
    .description("the project's trust connections")
    .addOption(projectOption())
    .option("--json", "print JSON")
    .addHelpText("after", "\nExample:\n  svc ci-trusts list --project projects/demo")
    .action(async (opts, cmd: Command) => {
      const { trusts: list } = await clientsOf(cmd, io).automation.listCITrusts({ parent: opts.project });
      if (opts.json)
        return printJson(
          out,
          list.map((t) => jsonOf(CITrustSchema, t)),
        );
      printTable(out, header, list.map(row));
    });

  trusts
    .command("setup")
    .description(
      "start the 30-minute verification of a new trust (or --trust to verify one again); prints the pairing code once",
    )
    .requiredOption("--service-account <name>", "projects/<p>/serviceAccounts/<id> the workflow acts as")
    .requiredOption("--repository <owner/repo>", "the GitHub repository, e.g. acme/deploy-tools")
    .requiredOption("--workflow <path>", "the workflow file, e.g. .github/workflows/deploy.yml")
    .option("--branch <name>", "the branch the run must be on (or --environment)")
    .option("--environment <name>", "the job's environment (instead of --branch)")
    .option("--event <event>", events.join(", "), "push")
    .option("--trust <name>", "verify this existing trust again (it stops granting access until approved)")
    .option("--json", "print the whole answer as JSON (it holds the pairing code)")
    .addHelpText(
      "after",
      `
The pairing code goes to stdout once: store it as the repository secret SVC_SETUP_CODE, run the
workflow's verification step (svc auth ci verify) within 30 minutes, then approve the trust.

Example:
  svc ci-trusts setup --service-account projects/demo/serviceAccounts/<id> \\
    --repository acme/deploy-tools --workflow .github/workflows/deploy.yml --branch main > code.txt
  gh secret set SVC_SETUP_CODE < code.txt && rm code.txt`,
    )
    .action(async (opts, cmd: Command) => {
      if (Boolean(opts.branch) === Boolean(opts.environment))
        throw new UsageError("give exactly one of --branch or --environment");
      if (!events.includes(opts.event)) throw new UsageError(`--event must be one of ${events.join(", ")}`);
      const res = await clientsOf(cmd, io).automation.startCITrustSetup({
        serviceAccount: opts.serviceAccount,
        intended: {
          repository: opts.repository,
          workflow: opts.workflow,
          branch: opts.branch ?? "",
          environment: opts.environment ?? "",
          event: opts.event,
        },
        trust: opts.trust ?? "",
      });
      if (opts.json) return printJson(out, jsonOf(StartCITrustSetupResponseSchema, res));
      err(
        `trust ${res.trust?.name}: store the pairing code below as the secret SVC_SETUP_CODE and run the workflow's ` +
          `verification step before ${iso(res.expireTimeUnix)}:\n` +
          `  svc auth ci verify --setup-id ${res.setupId} --audience ${res.audience}   (SVC_BASE_URL=${res.apiOrigin})\n` +
          `then: svc ci-trusts get ${res.trust?.name}  and  svc ci-trusts approve ${res.trust?.name} --permission monitoring.read\n`,
      );
      out(`${res.pairingCode}\n`);
    });

  trusts
    .command("approve")
    .description(
      "approve the identity the verification run showed, with a subset of the account's permissions",
    )
    .argument("<name>", "projects/<p>/ciTrusts/<id>")
    .requiredOption("--permission <cap...>", "monitoring.read, monitoring.write")
    .option("--json", "print JSON")
    .addHelpText(
      "after",
      "\nCheck the observed identity first (svc ci-trusts get <name>).\n\nExample:\n  svc ci-trusts approve projects/demo/ciTrusts/<id> --permission monitoring.read",
    )
    .action(async (name: string, opts, cmd: Command) => {
      print(cmd, await clientsOf(cmd, io).automation.approveCITrust({ name, permissions: opts.permission }));
    });

  trusts
    .command("set-permissions")
    .description("replace the approved permissions; outstanding tokens of the trust stop working")
    .argument("<name>", "projects/<p>/ciTrusts/<id>")
    .requiredOption("--permission <cap...>", "monitoring.read, monitoring.write")
    .option("--json", "print JSON")
    .addHelpText(
      "after",
      "\nExample:\n  svc ci-trusts set-permissions projects/demo/ciTrusts/<id> --permission monitoring.read monitoring.write",
    )
    .action(async (name: string, opts, cmd: Command) => {
      print(
        cmd,
        await clientsOf(cmd, io).automation.updateCITrustPermissions({ name, permissions: opts.permission }),
      );
    });

  for (const [verb, what] of [
    ["get", "one trust: intended and observed identity, permissions, state"],
    ["disable", "stop exchanges and every outstanding token of the trust at once"],
  ] as const) {
    trusts
      .command(verb)
      .description(what)
      .argument("<name>", "projects/<p>/ciTrusts/<id>")
      .option("--json", "print JSON")
      .addHelpText("after", `\nExample:\n  svc ci-trusts ${verb} projects/demo/ciTrusts/<id>`)
      .action(async (name: string, _opts, cmd: Command) => {
        const c = clientsOf(cmd, io).automation;
        print(cmd, verb === "get" ? await c.getCITrust({ name }) : await c.disableCITrust({ name }));
      });
  }

  trusts
    .command("delete")
    .description("delete the trust; its tokens stop at once")
    .argument("<name>", "projects/<p>/ciTrusts/<id>")
    .addHelpText("after", "\nExample:\n  svc ci-trusts delete projects/demo/ciTrusts/<id>")
    .action(async (name: string, _opts, cmd: Command) => {
      await clientsOf(cmd, io).automation.deleteCITrust({ name });
      err(`deleted ${name}\n`);
    });
}
