import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { getIDToken } from "@actions/core";
import { exchangeCIToken } from "@svc/sdk";
import { AutomationService } from "@svc/sdk/gen/svc/iam/v1/automation_pb";
import { decodeJwt } from "jose";
import { testDialects } from "../../../server/testing/dialects.ts";
import { LocalGitHubOidc } from "../../../server/testing/github-oidc.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../../server/testing/harness.ts";

const bin = resolve(fileURLToPath(import.meta.url), "../../../bin/svc.js");

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the CLI as a child process (asynchronously: the server answers from this process). */
function svc(args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((res) => {
    execFile(
      process.execPath,
      [bin, ...args],
      { env: { PATH: process.env.PATH ?? "", ...env }, timeout: 60_000 },
      (err, stdout, stderr) => res({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** What a GitHub runner would show: lines after an ::add-mask:: have the value replaced. */
function runnerView(r: Run): string {
  const masks: string[] = [];
  const out: string[] = [];
  for (const line of `${r.stderr}${r.stdout}`.split("\n")) {
    const m = /^::add-mask::(.+)$/.exec(line);
    if (m) {
      masks.push(m[1]);
      continue;
    }
    out.push(masks.reduce((l, v) => l.split(v).join("***"), line));
  }
  return out.join("\n");
}

describe("svc auth ci (CLI against an in-process server and a local Actions token endpoint)", async () => {
  const [{ dialect }] = await testDialects();
  let t: TestApp;
  let oidc: LocalGitHubOidc;
  let p: SeededProject;
  let dir: string;
  let env: Record<string, string>;
  let audience: string;
  let trustName: string;
  let setupId: string;
  let pairingCode: string;

  before(async () => {
    oidc = await LocalGitHubOidc.start(() => t.clock.now());
    t = await startTestApp(dialect, { ci: { defaultIssuer: oidc.issuer } });
    p = await t.seedProject("acme", ["web-1"]);
    const sa = await t.clients(p.owner.session).serviceAccounts.createServiceAccount({
      parent: p.projectName,
      displayName: "ci",
      template: "Metrics scraper",
    });
    const s = await t
      .clients(p.owner.session)
      .client(AutomationService)
      .startCITrustSetup({
        serviceAccount: sa.name,
        intended: {
          repository: "acme/deploy-tools",
          workflow: ".github/workflows/deploy.yml",
          branch: "main",
          environment: "",
          event: "push",
        },
      });
    ({ audience, setupId, pairingCode } = s);
    trustName = s.trust?.name ?? "";
    dir = mkdtempSync(join(tmpdir(), "svc-cli-"));
    writeFileSync(join(dir, "env"), "");
    writeFileSync(join(dir, "output"), "");
    env = {
      SVC_BASE_URL: t.baseUrl,
      ACTIONS_ID_TOKEN_REQUEST_URL: oidc.requestUrl,
      ACTIONS_ID_TOKEN_REQUEST_TOKEN: oidc.requestToken,
      GITHUB_ENV: join(dir, "env"),
      GITHUB_OUTPUT: join(dir, "output"),
    };
  });
  after(async () => {
    await t?.close();
    await oidc?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("explains `permissions: id-token: write` when the job cannot request identity tokens", async () => {
    const r = await svc(["auth", "ci", "--trust", trustName, "--audience", audience], {
      SVC_BASE_URL: t.baseUrl,
    });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /id-token: write/);
  });

  it("verify: sends the pairing code and the job's identity, and prints the observed identity", async () => {
    const missing = await svc(["auth", "ci", "verify", "--setup-id", setupId, "--audience", audience], env);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /SVC_SETUP_CODE/);
    const r = await svc(["auth", "ci", "verify", "--setup-id", setupId, "--audience", audience], {
      ...env,
      SVC_SETUP_CODE: pairingCode,
    });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr.split("\n")[0], `::add-mask::${pairingCode}`);
    assert.match(r.stdout, /IDENTITY_OBSERVED/);
    assert.match(r.stdout, /acme\/deploy-tools \(id 700100200\)/);
    // The audience reached the token endpoint intact (URL-encoded, api-version kept).
    assert.equal(oidc.audiences.at(-1), audience);
    await t
      .clients(p.owner.session)
      .client(AutomationService)
      .approveCITrust({ name: trustName, permissions: ["monitoring.read"] });
  });

  it("@actions/core getIDToken gets the same token shape from the endpoint, and it exchanges", async () => {
    const saved = { ...process.env };
    process.env.ACTIONS_ID_TOKEN_REQUEST_URL = oidc.requestUrl;
    process.env.ACTIONS_ID_TOKEN_REQUEST_TOKEN = oidc.requestToken;
    let idToken: string;
    try {
      // getIDToken also announces ::add-mask::<token> on stdout, as in a real job.
      idToken = await getIDToken(audience);
    } finally {
      process.env = saved;
    }
    assert.equal(oidc.audiences.at(-1), audience);
    assert.equal(decodeJwt(idToken).aud, audience);
    const r = await exchangeCIToken({ baseUrl: t.baseUrl, trustName, assertion: idToken });
    assert.equal(r.projectName, p.projectName);
  });

  it("prints the token once, masked first, and never writes it to GITHUB_ENV, GITHUB_OUTPUT or a file", async () => {
    const r = await svc(["auth", "ci", "--trust", trustName, "--audience", audience], env);
    assert.equal(r.code, 0, r.stderr);
    const token = r.stdout.trim();
    assert.match(token, /^svct_/);
    assert.equal(r.stderr.split("\n")[0], `::add-mask::${token}`);
    assert.equal(r.stderr.split(token).length, 2, "the token appears in stderr only in the mask command");
    assert.ok(!runnerView(r).includes(token));
    assert.equal(readFileSync(join(dir, "env"), "utf8"), "");
    assert.equal(readFileSync(join(dir, "output"), "utf8"), "");
    const vms = await t
      .clients(token)
      .monitoring.listVMMonitoring({ projectName: p.projectName, pageSize: 50, inventoryOnly: true });
    assert.deepEqual(
      vms.vms.map((v) => v.displayName),
      ["web-1"],
    );
  });

  it("runs a command with SVC_TOKEN in its environment, without printing the token", async () => {
    const script = `
      const r = await fetch(process.env.SVC_BASE_URL + "/svc.monitoring.v1.MonitoringService/ListVMMonitoring", {
        method: "POST",
        headers: { "content-type": "application/json", "connect-protocol-version": "1", authorization: "Bearer " + process.env.SVC_TOKEN },
        body: JSON.stringify({ projectName: "${p.projectName}", pageSize: 50, inventoryOnly: true }),
      });
      console.log("status", r.status, (await r.json()).vms.length);`;
    const r = await svc(
      [
        "auth",
        "ci",
        "--trust",
        trustName,
        "--audience",
        audience,
        "--",
        process.execPath,
        "--input-type=module",
        "-e",
        script,
      ],
      env,
    );
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /status 200 1/);
    const mask = /^::add-mask::(svct_\S+)$/m.exec(r.stderr);
    assert.ok(mask, "the token is masked");
    assert.ok(!r.stdout.includes(mask[1]));
    assert.ok(!runnerView(r).includes(mask[1]));
  });

  it("reports a denial without echoing the identity token", async () => {
    oidc.run = { ...oidc.run, ref: "refs/heads/feature" };
    try {
      const r = await svc(["auth", "ci", "--trust", trustName, "--audience", audience], env);
      assert.equal(r.code, 4, "a denial exits 4");
      assert.match(r.stderr, /CI_CLAIM_MISMATCH/);
      assert.match(r.stderr, /refs\/heads\/main/);
      assert.doesNotMatch(`${r.stdout}${r.stderr}`, /eyJ/);
    } finally {
      oidc.run = { ...oidc.run, ref: "refs/heads/main" };
    }
  });
});
