import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join, resolve, sep } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { AutomationService } from "@svc/sdk/gen/svc/iam/v1/automation_pb";
import { exchangeWorkflow, runSteps, verificationWorkflow } from "../../packages/console/src/ci-workflows.ts";
import { testDialects } from "../../packages/server/testing/dialects.ts";
import { LocalGitHubOidc } from "../../packages/server/testing/github-oidc.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../packages/server/testing/harness.ts";

const root = resolve(fileURLToPath(import.meta.url), "../../..");
const cliDist = join(root, "packages", "cli", "dist");

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** One `run:` step as a GitHub runner runs it: bash, stop at the first failure. */
function bash(script: string, env: Record<string, string>): Promise<Run> {
  return new Promise((res) => {
    execFile(
      "bash",
      ["--noprofile", "--norc", "-eo", "pipefail", "-c", script],
      { env, timeout: 120_000 },
      (err, stdout, stderr) => res({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/**
 * Issue 27, item 10: the CI trust screens' workflows are complete. Their shell steps, run as written
 * against a test server and a local Actions token endpoint, install the CLI the server publishes
 * (checked against its SHA-256), verify the trust, and after approval exchange a token and list VMs.
 */
describe("the CI trust setup's workflows, run step by step against a test server", () => {
  const intended = {
    repository: "acme/deploy-tools",
    workflow: ".github/workflows/deploy.yml",
    branch: "main",
    environment: "",
    event: "push",
  };
  let t: TestApp;
  let oidc: LocalGitHubOidc;
  let p: SeededProject;
  let dir: string;
  let runner: Record<string, string>;

  before(async () => {
    execFileSync(process.execPath, [join(root, "scripts", "build-cli.mjs")]);
    oidc = await LocalGitHubOidc.start(() => t.clock.now());
    t = await startTestApp((await testDialects())[0].dialect, {
      ci: { defaultIssuer: oidc.issuer },
      cliPackageDir: cliDist,
    });
    p = await t.seedProject("acme", ["web-1"]);
    dir = mkdtempSync(join(tmpdir(), "svc-ci-workflow-"));
    mkdirSync(join(dir, "temp"));
    // A clean runner: the CLI is not on PATH until the workflow installs it into the npm prefix.
    runner = {
      // npm run (npm test) puts the workspace's node_modules/.bin, with its svc, on PATH: a runner has none.
      PATH: [join(dir, "prefix", "bin"), ...(process.env.PATH ?? "").split(delimiter)]
        .filter((d) => !d.endsWith(`node_modules${sep}.bin`))
        .join(delimiter),
      HOME: dir,
      RUNNER_TEMP: join(dir, "temp"),
      npm_config_prefix: join(dir, "prefix"),
      npm_config_cache: join(dir, "npm-cache"),
      npm_config_offline: "true",
      npm_config_update_notifier: "false",
      ACTIONS_ID_TOKEN_REQUEST_URL: oidc.requestUrl,
      ACTIONS_ID_TOKEN_REQUEST_TOKEN: oidc.requestToken,
    };
  });
  after(async () => {
    await t?.close();
    await oidc?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("the server publishes the packed CLI with its SHA-256", async () => {
    const sums = await (await fetch(`${t.baseUrl}/v1/cli/packages/SHA256SUMS`)).text();
    const m = /^([0-9a-f]{64}) {2}(svc-cli-[0-9.]+\.tgz)\n$/.exec(sums);
    assert.ok(m, sums);
    const res = await fetch(`${t.baseUrl}/v1/cli/packages/${m[2]}`);
    assert.equal(res.status, 200);
    const bytes = Buffer.from(await res.arrayBuffer());
    assert.equal(createHash("sha256").update(bytes).digest("hex"), m[1]);
    assert.deepEqual(bytes, readFileSync(join(cliDist, m[2])));
    assert.equal((await fetch(`${t.baseUrl}/v1/cli/packages/svc-cli-0.0.0.tgz`)).status, 404);
  });

  it("verification, then the real job: installs the CLI from svc, shows the identity, exchanges a token", async () => {
    const owner = t.clients(p.owner.session);
    const sa = await owner.serviceAccounts.createServiceAccount({
      parent: p.projectName,
      displayName: "ci",
      template: "Metrics scraper",
    });
    const s = await owner.client(AutomationService).startCITrustSetup({ serviceAccount: sa.name, intended });
    const verify = verificationWorkflow(s.setupId, s.audience, s.apiOrigin, intended);
    assert.match(verify, new RegExp(`SVC_BASE_URL: ${s.apiOrigin}\\n`));
    assert.equal(s.apiOrigin, t.baseUrl);
    const steps = runSteps(verify);
    assert.equal(steps.length, 2, verify);
    const [install, show] = steps;
    assert.equal((await bash("command -v svc || true", runner)).stdout, "", "no svc before the install step");

    const installed = await bash(install.script, { ...runner, ...install.env });
    assert.equal(installed.code, 0, installed.stderr);
    assert.match(installed.stdout + installed.stderr, /svc-cli-[0-9.]+\.tgz: OK/);
    assert.equal((await bash("command -v svc", runner)).stdout.trim(), join(dir, "prefix", "bin", "svc"));

    const secret = show.env.SVC_SETUP_CODE;
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a GitHub Actions expression
    assert.equal(secret, "${{ secrets.SVC_SETUP_CODE }}");
    const shown = await bash(show.script, { ...runner, ...show.env, SVC_SETUP_CODE: s.pairingCode });
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, /IDENTITY_OBSERVED/);

    await owner
      .client(AutomationService)
      .approveCITrust({ name: s.trust?.name ?? "", permissions: ["monitoring.read"] });
    const job = runSteps(
      exchangeWorkflow(
        { name: s.trust?.name ?? "", audience: s.audience, intended },
        p.projectName,
        s.apiOrigin,
      ),
    );
    assert.equal(job.length, 2);
    assert.equal(job[0].script, install.script, "the same install step");
    const listed = await bash(job[1].script, { ...runner, ...job[1].env });
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, /projects\/acme\/locations\/[^/]+\/vms\/web-1/);
  });
});
