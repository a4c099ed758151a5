import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { exchangeCIToken } from "@svc/sdk";
import { testDialects } from "../../../server/testing/dialects.ts";
import { LocalGitHubOidc } from "../../../server/testing/github-oidc.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../../server/testing/harness.ts";
import { exitCodeOf } from "../common.ts";
import { buildProgram } from "../program.ts";

describe("svc ci-trusts (in-process against startTestApp and a local GitHub OIDC issuer)", async () => {
  const [{ dialect }] = await testDialects();
  let t: TestApp;
  let oidc: LocalGitHubOidc;
  let p: SeededProject;
  let saName: string;
  before(async () => {
    oidc = await LocalGitHubOidc.start(() => t.clock.now());
    t = await startTestApp(dialect, { ci: { defaultIssuer: oidc.issuer } });
    p = await t.seedProject("trusty", ["web-1"]);
    saName = (
      await t.clients(p.owner.session).serviceAccounts.createServiceAccount({
        parent: p.projectName,
        displayName: "deployer",
        template: "Metrics scraper",
      })
    ).name;
  });
  after(async () => {
    await t?.close();
    await oidc?.close();
  });

  async function run(args: string[]) {
    const out: string[] = [];
    const err: string[] = [];
    const saved = { token: process.env.SVC_TOKEN, config: process.env.SVC_CONFIG };
    process.env.SVC_TOKEN = p.owner.session;
    process.env.SVC_CONFIG = "/nonexistent/svc-config.json";
    let code = 0;
    try {
      await buildProgram({ stdout: (s) => out.push(s), stderr: (s) => err.push(s) }).parseAsync(
        ["--base-url", t.baseUrl, ...args],
        { from: "user" },
      );
    } catch (e) {
      code = exitCodeOf(e);
      err.push(String(e));
    } finally {
      for (const [k, v] of [
        ["SVC_TOKEN", saved.token],
        ["SVC_CONFIG", saved.config],
      ] as const) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
    return { code, out: out.join(""), err: err.join("") };
  }

  it("sets up, shows, approves, narrows, disables and deletes a trust; exchanges follow", async () => {
    const setup = await run([
      "ci-trusts",
      "setup",
      "--service-account",
      saName,
      "--repository",
      "acme/deploy-tools",
      "--workflow",
      ".github/workflows/deploy.yml",
      "--branch",
      "main",
    ]);
    assert.equal(setup.code, 0, setup.err);
    const pairingCode = setup.out.trim();
    const setupId = /--setup-id (\S+)/.exec(setup.err)?.[1];
    const audience = /--audience (\S+)/.exec(setup.err)?.[1];
    const name = /^trust (\S+):/.exec(setup.err)?.[1];
    assert.ok(pairingCode && setupId && audience && name, setup.err);
    assert.ok(!setup.err.includes(pairingCode), "the pairing code goes to stdout only");

    // The workflow's verification step.
    await t
      .clients()
      .automation.verifyCITrustSetup({ setupId, pairingCode, assertion: await oidc.token(audience) });
    const got = await run(["ci-trusts", "get", name]);
    assert.match(got.out, /state: +IDENTITY_OBSERVED/);
    assert.match(got.out, /observed: +acme\/deploy-tools \(id 700100200/);

    const approved = await run([
      "ci-trusts",
      "approve",
      name,
      "--permission",
      "monitoring.read",
      "--output",
      "json",
    ]);
    assert.equal(approved.code, 0, approved.err);
    assert.equal(JSON.parse(approved.out).state, "APPROVED");
    const list = await run(["ci-trusts", "list", "--project", p.projectName]);
    assert.match(list.out, new RegExp(`${name}\\s+APPROVED\\s+acme/deploy-tools`));
    const { accessToken } = await exchangeCIToken({
      baseUrl: t.baseUrl,
      trustName: name,
      assertion: await oidc.token(audience),
    });
    assert.match(accessToken, /^svct_/);

    const widened = await run(["ci-trusts", "set-permissions", name, "--permission", "monitoring.write"]);
    assert.equal(widened.code, 3, "beyond the account's template: refused as invalid");
    assert.equal((await run(["ci-trusts", "disable", name])).code, 0);
    await assert.rejects(
      exchangeCIToken({ baseUrl: t.baseUrl, trustName: name, assertion: await oidc.token(audience) }),
      /CI_TRUST_DISABLED/,
    );
    assert.equal((await run(["ci-trusts", "delete", name])).code, 0);
    assert.equal((await run(["ci-trusts", "get", name])).code, 5);
  });

  it("refuses a setup with both or neither of --branch and --environment", async () => {
    const base = [
      "ci-trusts",
      "setup",
      "--service-account",
      saName,
      "--repository",
      "a/b",
      "--workflow",
      "w.yml",
    ];
    assert.equal((await run(base)).code, 2);
    assert.equal((await run([...base, "--branch", "main", "--environment", "prod"])).code, 2);
  });
});
