import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { AutomationService } from "@svc/sdk/gen/svc/iam/v1/automation_pb";
import type { Browser, Locator, Page } from "playwright-core";
import { runSvc } from "../../packages/cli/src/run-in-process.ts";
import { newCpuRule } from "../../packages/server/testing/alert-rules.ts";
import {
  browserUnavailable,
  buildConsole,
  CONSOLE_DIST,
  launchBrowser,
  openPage,
  signIn,
} from "../../packages/server/testing/browser.ts";
import { testDialects } from "../../packages/server/testing/dialects.ts";
import { defaultRun, LocalGitHubOidc } from "../../packages/server/testing/github-oidc.ts";
import { startTestApp, type TestApp } from "../../packages/server/testing/harness.ts";

const [sqlite] = await testDialects();
const skip = browserUnavailable();

/** The fields of an event as `svc audit list -o json` prints it (the RPC's JSON). */
interface JsonEvent {
  timeUnixMs: string;
  actorKind: string;
  actor: string;
  actorDetail?: Record<string, string>;
  method: string;
  resource: string;
  clientAddress: string;
  userAgent: string;
  outcome: string;
}

async function storeSecret(page: Page): Promise<string> {
  const dialog = page.getByRole("dialog");
  const secret = (await dialog.getByTestId("shown-once").locator("code.secret").textContent()) ?? "";
  assert.ok(secret.length > 20, "a secret is shown");
  await dialog.getByRole("button", { name: "I have stored it" }).click();
  return secret;
}

/**
 * Issue 29, "Done when": a key created, rotated and revoked in the console, a rule saved with a write
 * key and a CI token exchanged each show up once on the Activity page and in `svc audit list` with who,
 * what, where and when.
 */
describe("audit log, end to end: the console, a write key and a CI exchange, read on the Activity page and with svc audit list", {
  skip,
}, () => {
  let t: TestApp;
  let browser: Browser;
  let oidc: LocalGitHubOidc;
  before(async () => {
    buildConsole();
    oidc = await LocalGitHubOidc.start();
    t = await startTestApp(
      sqlite.dialect,
      {
        consoleDir: CONSOLE_DIST,
        ci: { defaultIssuer: oidc.issuer, perTrustBurst: 1e6, perSourceBurst: 1e6 },
      },
      { wallClock: true },
    );
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await t?.close();
    await oidc?.close();
  });

  it("records each change once with who, what, where and when", async () => {
    const started = Date.now();
    const p = await t.seedProject("done-when", ["web-1"]);
    const owner = t.clients(p.owner.session);
    const { page, problems } = await openPage(browser);
    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);

    // 1. A personal key created, rotated and revoked in the console.
    await page.getByRole("link", { name: "API keys" }).click();
    const personal = page.getByTestId(`keys-${p.projectName.replaceAll("/", "-")}`);
    await personal.getByRole("button", { name: "Create key" }).click();
    const create = page.getByRole("dialog", { name: "Create key" });
    await create.getByLabel("Name").fill("laptop");
    await create.getByRole("button", { name: "Create key" }).click();
    const created = await storeSecret(page);
    await personal.getByRole("button", { name: "Rotate laptop" }).click();
    const rotate = page.getByRole("dialog", { name: "Rotate laptop" });
    await rotate.getByLabel("Overlap (hours)").fill("0");
    await rotate.getByRole("button", { name: "Rotate key" }).click();
    const rotated = await storeSecret(page);
    assert.notEqual(rotated, created);
    await personal.getByRole("button", { name: "Revoke laptop" }).click();
    await page
      .getByRole("dialog", { name: "Revoke laptop" })
      .getByRole("button", { name: "Revoke now" })
      .click();
    await personal.getByText("No active keys").waitFor();
    // Each key of the rotation, found by the start of its secret (svc keeps the start, never the secret).
    const keys = (await owner.keys.listKeys({ parent: p.projectName })).keys;
    const keyOf = (secret: string) =>
      keys.find((k) => secret.startsWith(k.secretHint.replace(/…$/, "")))?.name ?? "";
    const firstKey = keyOf(created);
    const secondKey = keyOf(rotated);
    assert.ok(firstKey && secondKey && firstKey !== secondKey, "two keys");

    // 2. A rule saved with a service account's write key.
    const sa = await owner.serviceAccounts.createServiceAccount({
      parent: p.projectName,
      displayName: "deployer",
      template: "Alert manager",
    });
    const w = await owner.keys.createKey({
      parent: sa.name,
      displayName: "deploy",
      capabilities: ["monitoring.read", "monitoring.write"],
      requestId: randomUUID(),
    });
    const rule = newCpuRule(p.projectName);
    const ruleId = rule.id;
    await t.clients(w.secret).alerts.saveAlertRule(rule);

    // 3. A CI token exchanged by the workflow of an approved trust (the local GitHub OIDC issuer).
    const anon = t.clients().client(AutomationService);
    const setup = await owner.automation.startCITrustSetup({
      serviceAccount: sa.name,
      intended: {
        repository: defaultRun.repository,
        workflow: defaultRun.workflow_path,
        branch: "main",
        environment: "",
        event: "push",
      },
    });
    const verified = await anon.verifyCITrustSetup({
      setupId: setup.setupId,
      pairingCode: setup.pairingCode,
      assertion: await oidc.token(setup.audience),
    });
    await owner.automation.approveCITrust({ name: verified.trustName, permissions: ["monitoring.read"] });
    const token = await anon.exchangeCIToken({
      trustName: verified.trustName,
      assertion: await oidc.token(setup.audience),
    });
    assert.match(token.accessToken, /^svct_/);
    const finished = Date.now();

    // Each change, as it must be listed: method, resource, actor kind and actor.
    const user = p.owner.user;
    const saAccount = sa.name;
    const want = [
      // A create names what it created: the key.
      { method: "svc.iam.v1.KeyService/CreateKey", resource: firstKey, kind: "USER", actor: user },
      { method: "svc.iam.v1.KeyService/RotateKey", resource: firstKey, kind: "USER", actor: user },
      { method: "svc.iam.v1.KeyService/RevokeKey", resource: secondKey, kind: "USER", actor: user },
      {
        method: "svc.monitoring.v1.AlertService/SaveAlertRule",
        resource: `${p.projectName}/alertRules/${ruleId}`,
        kind: "SERVICE_ACCOUNT_KEY",
        actor: saAccount,
      },
      {
        method: "svc.iam.v1.AutomationService/ExchangeCIToken",
        resource: verified.trustName,
        kind: "CI_TOKEN",
        actor: saAccount,
      },
    ];

    // The CLI: `svc audit list --output json`, as the project's owner.
    const dir = mkdtempSync(join(tmpdir(), "svc-audit-done-"));
    const listed = await runSvc(["audit", "list", "--project", p.projectName, "--output", "json"], {
      SVC_BASE_URL: t.baseUrl,
      SVC_TOKEN: p.owner.session,
      SVC_CONFIG: join(dir, "none.json"),
    });
    assert.equal(listed.code, 0, listed.err);
    const events = (JSON.parse(listed.out) as { events: JsonEvent[] }).events;
    for (const w of want) {
      const same = events.filter((e) => e.method === w.method && e.resource === w.resource);
      assert.equal(same.length, 1, `${w.method} on ${w.resource}: once in svc audit list`);
      const [e] = same;
      assert.equal(e.actorKind, w.kind, w.method);
      assert.equal(e.actor, w.actor, w.method);
      assert.equal(e.outcome, "ok", w.method);
      assert.equal(e.clientAddress, "127.0.0.1", w.method);
      const at = Number(e.timeUnixMs);
      assert.ok(at >= started && at <= finished, `${w.method}: time ${at} within the run`);
    }
    // The console's calls carry the browser's user agent; the CI exchange names its workflow.
    for (const m of ["CreateKey", "RotateKey", "RevokeKey"]) {
      const e = events.find((x) => x.method.endsWith(`/${m}`) && !x.resource.startsWith(`${sa.name}/`));
      assert.match(e?.userAgent ?? "", /HeadlessChrome/, m);
    }
    const exchange = events.find((e) => e.method.endsWith("/ExchangeCIToken"));
    assert.equal(exchange?.actorDetail?.repository, defaultRun.repository);
    assert.equal(
      exchange?.actorDetail?.workflow,
      `${defaultRun.repository}/${defaultRun.workflow_path}@${defaultRun.ref}`,
    );
    assert.equal(exchange?.actorDetail?.trust, verified.trustName);
    // No secret issued in the scenario is in what the CLI printed.
    for (const s of [created, rotated, w.secret ?? "", token.accessToken, setup.pairingCode])
      assert.ok(!listed.out.includes(s), "no secret in the audit log");

    // The Activity page: one row each, with who, what, the resource, where from and when.
    await page.getByRole("link", { name: "Activity" }).click();
    const table = page.getByTestId("activity-table");
    await table.waitFor();
    const rowOf = (w: (typeof want)[number]): Locator =>
      table.locator(
        `tbody tr[data-method="${w.method.slice(w.method.indexOf("/") + 1)}"][data-resource="${w.resource}"]`,
      );
    for (const w of want) {
      const row = rowOf(w);
      assert.equal(await row.count(), 1, `${w.method} on ${w.resource}: one row on the Activity page`);
      const text = (await row.textContent()) ?? "";
      // Who by name (the id is kept for hover and filters), the credential's kind in words (issue 43, item 4).
      assert.equal(await row.getAttribute("data-actor"), w.actor);
      const kind = {
        USER: "signed in",
        SERVICE_ACCOUNT_KEY: "with a service-account key",
        CI_TOKEN: "with a CI token",
      }[w.kind];
      for (const part of [kind ?? w.kind, "127.0.0.1", "ok"])
        assert.ok(text.includes(part), `${part} in ${text}`);
      const when = Date.parse((await row.locator("time").getAttribute("datetime")) ?? "");
      // The page shows the time to the second.
      assert.ok(when >= started - 1000 && when <= finished, `${w.method}: shown time within the run`);
    }
    assert.ok(
      ((await rowOf(want[4]).textContent()) ?? "").includes(`repository: ${defaultRun.repository}`),
      "the exchange's row names the repository",
    );
    assert.deepEqual(problems, []);
  });
});
