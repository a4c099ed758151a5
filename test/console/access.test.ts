import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import type { SvcClients } from "@svc/sdk";
import { ErrorInfoSchema } from "@svc/sdk/gen/google/rpc/error_details_pb";
import { AutomationService } from "@svc/sdk/gen/svc/iam/v1/automation_pb";
import type { Browser, Page } from "playwright-core";
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
import { type SeededProject, startTestApp, type TestApp } from "../../packages/server/testing/harness.ts";

const [sqlite] = await testDialects();
const skip = browserUnavailable();

/** The call fails with this code and ErrorInfo reason. */
async function refused(p: Promise<unknown>, code: Code, reason: string): Promise<void> {
  try {
    await p;
  } catch (e) {
    const err = ConnectError.from(e);
    assert.equal(Code[err.code], Code[code], err.message);
    assert.equal(err.findDetails(ErrorInfoSchema)[0]?.reason, reason, err.message);
    return;
  }
  assert.fail(`expected ${Code[code]} ${reason}`);
}

const listVms = (c: SvcClients, projectName: string) =>
  c.monitoring.listVMMonitoring({ projectName, pageSize: 50, inventoryOnly: true });

/** Everything the page holds where a secret could linger. */
async function pageText(page: Page): Promise<string> {
  return (await page.evaluate(`JSON.stringify({
    html: document.documentElement.outerHTML,
    local: JSON.stringify(window.localStorage),
    session: JSON.stringify(window.sessionStorage),
    url: window.location.href,
  })`)) as string;
}

async function secretShown(page: Page): Promise<string> {
  const code = page.getByRole("dialog").getByTestId("shown-once").locator("code.secret");
  const secret = (await code.textContent()) ?? "";
  assert.ok(secret.length > 20, "a secret is shown");
  return secret;
}

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(tmpdir(), `svc-console-${name}.png`), fullPage: true });
}

describe("console in Chromium: service accounts, keys and CI trusts", { skip }, () => {
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

  it("creates a service account and a key shown once, rotates, revokes, disables and enables", async () => {
    const p: SeededProject = await t.seedProject("access", ["web-1"]);
    const owner = t.clients(p.owner.session);
    const { page, problems } = await openPage(browser);
    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);

    // A service account from the Metrics scraper template.
    await page.getByRole("link", { name: "Service accounts" }).click();
    await page.getByRole("button", { name: "Create service account" }).click();
    const create = page.getByRole("dialog", { name: "Create service account" });
    await create.getByRole("button", { name: "Create" }).click();
    await create.getByText("A name is required").waitFor();
    await create.getByLabel("Name").fill("prom-scraper");
    await create.getByRole("radio", { name: /Metrics scraper/ }).check();
    await create.getByRole("button", { name: "Create" }).click();
    await page.getByTestId("sa-table").getByText("prom-scraper").waitFor();
    const [sa] = (await owner.serviceAccounts.listServiceAccounts({ parent: p.projectName })).serviceAccounts;
    assert.equal(sa.template, "Metrics scraper");
    assert.deepEqual(sa.permissions, ["monitoring.read"]);

    // Its keys open below the list; a key from the template, its secret read once from the page.
    const saKeys = page.getByTestId(`keys-${sa.name.replaceAll("/", "-")}`);
    await saKeys.getByRole("button", { name: "Create key" }).click();
    const dialog = page.getByRole("dialog", { name: "Create key" });
    await dialog.getByLabel("Name").fill("grafana");
    assert.equal(await dialog.getByRole("radio", { name: /Alert manager/ }).isDisabled(), true);
    await shot(page, "key-create-form");
    await dialog.getByRole("button", { name: "Create key" }).click();
    const secret = await secretShown(page);
    assert.match(secret, /^svcs_/);
    await shot(page, "key-created");
    const vms = await listVms(t.clients(secret), p.projectName);
    assert.equal(vms.vms.length, 1, "the secret shown works");
    // The secret cannot be shown again, so neither Escape (twice) nor a click outside closes its dialog; it
    // has no × either: it closes only through "I have stored it".
    assert.equal(await dialog.getByRole("button", { name: "Close" }).count(), 0);
    await page.keyboard.press("Escape");
    await dialog.getByTestId("store-first").waitFor();
    await page.keyboard.press("Escape");
    await page.mouse.click(5, 5);
    assert.ok(await dialog.isVisible());
    assert.equal(await secretShown(page), secret);
    await dialog.getByRole("button", { name: "I have stored it" }).click();
    await saKeys.getByText("grafana").waitFor();
    assert.ok(!(await pageText(page)).includes(secret), "gone once dismissed");
    await page.reload();
    await page.getByRole("heading", { name: "Service accounts" }).waitFor();
    await page.getByTestId("sa-table").getByText("prom-scraper").waitFor();
    assert.ok(!(await pageText(page)).includes(secret), "not in the page after a reload");

    // The API keys page lists it with its state; rotate with overlap 0.
    await page.getByRole("link", { name: "API keys" }).click();
    const keysCard = page.getByTestId(`keys-${sa.name.replaceAll("/", "-")}`);
    await keysCard.getByRole("cell", { name: /^grafana svcs_/ }).waitFor();
    assert.equal(await keysCard.locator("tbody tr").first().getByText("active").count(), 1);
    assert.ok(!(await pageText(page)).includes(secret), "never shown again");
    await shot(page, "keys");
    await keysCard.getByRole("button", { name: "Rotate grafana" }).click();
    const rotate = page.getByRole("dialog", { name: "Rotate grafana" });
    await rotate.getByLabel("Overlap (hours)").fill("0");
    await rotate.getByText("Immediate rotation").waitFor();
    await shot(page, "key-rotate-form");
    await rotate.getByRole("button", { name: "Rotate key" }).click();
    const rotated = await secretShown(page);
    assert.notEqual(rotated, secret);
    await refused(listVms(t.clients(secret), p.projectName), Code.Unauthenticated, "CREDENTIAL_REVOKED");
    assert.equal((await listVms(t.clients(rotated), p.projectName)).vms.length, 1);
    await rotate.getByRole("button", { name: "I have stored it" }).click();

    // Revoke, with confirmation.
    await keysCard.getByRole("button", { name: "Revoke grafana" }).click();
    const revoke = page.getByRole("dialog", { name: "Revoke grafana" });
    await revoke.getByRole("button", { name: "Revoke now" }).click();
    await keysCard.getByText("No active keys").waitFor();
    await refused(listVms(t.clients(rotated), p.projectName), Code.Unauthenticated, "CREDENTIAL_REVOKED");
    await keysCard.getByLabel(/Show revoked and expired \(2\)/).check();
    assert.equal(await keysCard.getByText("revoked", { exact: true }).count(), 2);

    // A fresh key, then the account disabled: the key is refused at once; enabled again: it works.
    await keysCard.getByRole("button", { name: "Create key" }).click();
    const again = page.getByRole("dialog", { name: "Create key" });
    await again.getByLabel("Name").fill("prometheus");
    await again.getByRole("button", { name: "Create key" }).click();
    const third = await secretShown(page);
    await again.getByRole("button", { name: "I have stored it" }).click();
    await page.getByRole("link", { name: "Service accounts" }).click();
    await page.getByRole("button", { name: "Disable prom-scraper" }).click();
    const disable = page.getByRole("dialog", { name: "Disable prom-scraper" });
    await disable.getByText("stops working at once").waitFor();
    await disable.getByRole("button", { name: "Disable now" }).click();
    await page.getByTestId("sa-table").getByText("disabled").waitFor();
    await refused(listVms(t.clients(third), p.projectName), Code.PermissionDenied, "IDENTITY_DISABLED");
    await shot(page, "service-accounts");
    await page.getByRole("button", { name: "Enable prom-scraper" }).click();
    await page
      .getByRole("dialog", { name: "Enable prom-scraper" })
      .getByRole("button", { name: "Enable" })
      .click();
    await page.getByTestId("sa-table").getByText("active").waitFor();
    assert.equal((await listVms(t.clients(third), p.projectName)).vms.length, 1);
    assert.deepEqual(problems, []);
  });

  it("after a rotation, shows when the old key stops and which key replaces it, and the revoke dialog names the key", async () => {
    const p: SeededProject = await t.seedProject("rotation", []);
    const owner = t.clients(p.owner.session);
    const first = await owner.keys.createKey({
      parent: p.projectName,
      displayName: "deploy",
      capabilities: ["monitoring.read"],
      requestId: randomUUID(),
    });
    const second = await owner.keys.rotateKey({
      name: first.key?.name ?? "",
      overlapSeconds: 3600,
      requestId: randomUUID(),
    });
    const oldHint = first.key?.secretHint ?? "";
    const newHint = second.key?.secretHint ?? "";
    const { page, problems } = await openPage(browser);
    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);
    await page.goto(`${t.baseUrl}/projects/rotation/keys`);
    const rows = page.locator("table.access-table tbody tr");
    await rows.nth(1).waitFor();
    // A row is found by its own secret hint (the other row names it too, as replacement or replaced).
    const rowOf = (hint: string) =>
      rows.filter({
        has: page.getByTitle("the non-secret start of the secret").getByText(`${hint}`, { exact: true }),
      });
    const oldRow = rowOf(oldHint);
    const newRow = rowOf(newHint);
    // The old key: stopping at the overlap's end (not "active, expires in 90 days"), replaced by the new one.
    const stops = oldRow.getByTestId("key-stops");
    assert.match((await stops.textContent()) ?? "", new RegExp(`stops at .*replaced by ${newHint}`));
    const at = await stops.locator("time").getAttribute("datetime");
    assert.equal(Date.parse(at ?? ""), Number(second.key?.createTimeUnix ?? 0n) * 1000 + 3600_000);
    assert.equal(await oldRow.getByText("stopping", { exact: true }).count(), 1);
    assert.equal(await oldRow.getByText("active", { exact: true }).count(), 0);
    // The new key is marked as the replacement.
    assert.match(
      (await newRow.getByTestId("key-replacement").textContent()) ?? "",
      new RegExp(`replaces ${oldHint}`),
    );
    // Each revoke button and dialog names its exact key; revoking the new one warns that nothing would work.
    await page.getByRole("button", { name: `Revoke deploy (${newHint})` }).click();
    const dialog = page.getByRole("dialog", { name: `Revoke deploy (${newHint})` });
    const which = (await dialog.getByTestId("revoke-which").textContent()) ?? "";
    assert.match(which, new RegExp(`the key starting ${newHint}`));
    assert.match(which, /the new key of a rotation/);
    await dialog.getByRole("button", { name: "Cancel" }).click();
    await page.getByRole("button", { name: `Revoke deploy (${oldHint})` }).click();
    const oldDialog = page.getByRole("dialog", { name: `Revoke deploy (${oldHint})` });
    assert.match(
      (await oldDialog.getByTestId("revoke-which").textContent()) ?? "",
      new RegExp(`the key starting ${oldHint}.*replaced by ${newHint}`),
    );
    await oldDialog.getByRole("button", { name: "Revoke now" }).click();
    await oldRow.waitFor({ state: "detached" });
    assert.equal(
      (await owner.keys.listKeys({ parent: p.projectName })).keys.find((k) => k.name === second.key?.name)
        ?.state,
      "ACTIVE",
      "the replacement keeps working",
    );
    assert.deepEqual(problems, []);
    await page.context().close();
  });

  it("retries a create whose answer was lost with the same requestId, then recovers the lost secret", async () => {
    const p = await t.seedProject("lost", ["web-1"]);
    const owner = t.clients(p.owner.session);
    const { page, problems } = await openPage(browser);
    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);
    await page.getByRole("link", { name: "API keys" }).click();
    const requestIds: string[] = [];
    page.on("request", (r) => {
      if (r.url().endsWith("/svc.iam.v1.KeyService/CreateKey"))
        requestIds.push((JSON.parse(r.postData() ?? "{}") as { requestId: string }).requestId);
    });
    // The first CreateKey reaches svc, but its answer is dropped on the way back.
    let dropped = false;
    await page.route("**/svc.iam.v1.KeyService/CreateKey", async (route) => {
      if (dropped) return route.continue();
      dropped = true;
      await route.fetch();
      await route.abort("connectionreset");
    });
    const personal = page.getByTestId(`keys-${p.projectName.replaceAll("/", "-")}`);
    await personal.getByRole("button", { name: "Create key" }).click();
    const dialog = page.getByRole("dialog", { name: "Create key" });
    await dialog.getByLabel("Name").fill("laptop");
    await dialog.getByRole("button", { name: "Create key" }).click();
    await dialog.getByRole("button", { name: "Retry the same request" }).click();
    await dialog.getByTestId("key-lost").waitFor();
    assert.equal(requestIds.length, 2);
    assert.equal(requestIds[0], requestIds[1], "the retry is the exact same request");
    await dialog.getByRole("button", { name: "Recover: revoke and replace" }).click();
    const secret = await secretShown(page);
    assert.match(secret, /^svcp_/);
    const keys = (await owner.keys.listKeys({ parent: p.projectName })).keys;
    assert.deepEqual(
      keys.map((k) => [k.displayName, k.state]),
      [
        ["laptop", "REVOKED"],
        ["laptop", "ACTIVE"],
      ],
    );
    assert.equal((await listVms(t.clients(secret), p.projectName)).vms.length, 1);
    assert.deepEqual(problems, []);
  });

  it("starts a CI trust setup, shows what the workflow needs, approves the observed identity, edits, disables, deletes", async () => {
    const p = await t.seedProject("acme", ["web-1"]);
    const owner = t.clients(p.owner.session);
    const anon = t.clients().client(AutomationService);
    const sa = await owner.serviceAccounts.createServiceAccount({
      parent: p.projectName,
      displayName: "deployer",
      template: "Alert manager",
    });
    const { page, problems } = await openPage(browser);
    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);
    await page.getByRole("link", { name: "CI trusts" }).click();
    await page.getByRole("button", { name: "New CI trust" }).click();
    const form = page.getByRole("dialog", { name: "New CI trust" });
    await form.getByLabel("Repository").fill(defaultRun.repository);
    await form.getByLabel("Workflow file").fill(defaultRun.workflow_path);
    await form.getByLabel("Branch", { exact: true }).fill("main");
    await form.getByLabel("Event").selectOption("push");
    await shot(page, "ci-start-form");
    await form.getByRole("button", { name: "Start setup" }).click();

    const detail = page.getByTestId("trust-detail");
    const code = (await detail.getByTestId("shown-once").locator("code.secret").textContent()) ?? "";
    assert.match(code, /^svcsetup_/);
    const [trust] = (await owner.automation.listCITrusts({ parent: p.projectName })).trusts;
    assert.equal(trust.state, "VERIFICATION_PENDING");
    assert.equal(trust.serviceAccount, sa.name);
    assert.equal(await detail.getByTestId("setup-id").textContent(), trust.setupId);
    assert.equal(await detail.getByTestId("setup-audience").textContent(), trust.audience);
    assert.equal(await detail.getByTestId("setup-api-origin").textContent(), t.baseUrl);
    const snippet = (await detail.getByTestId("setup-snippet").textContent()) ?? "";
    assert.match(snippet, /^permissions:\n {2}id-token: write/m);
    assert.ok(
      snippet.includes(`run: svc auth ci verify --setup-id ${trust.setupId} --audience "${trust.audience}"`),
      snippet,
    );
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a GitHub Actions expression
    assert.ok(snippet.includes("SVC_SETUP_CODE: ${{ secrets.SVC_SETUP_CODE }}"), snippet);
    assert.match(snippet, /push:\n {4}branches: \[main\]/);
    // Complete: installs the CLI from this server, whose real origin it names (issue 27, item 10).
    assert.ok(snippet.includes(`SVC_BASE_URL: ${t.baseUrl}\n`), snippet);
    assert.match(snippet, /\/v1\/cli\/packages\/SHA256SUMS/);
    assert.match(snippet, /sha256sum --check/);
    assert.ok(!snippet.includes(code), "the pairing code is a secret, not in the workflow");
    await shot(page, "ci-setup");

    // The workflow's verification step, with the code and audience the page showed.
    await anon.verifyCITrustSetup({
      setupId: trust.setupId,
      pairingCode: code,
      assertion: await oidc.token(trust.audience),
    });
    // The page notices by itself (polling) and shows the observed identity.
    const observed = detail.getByTestId("observed-identity");
    await observed.waitFor();
    const seen = (await observed.textContent()) ?? "";
    for (const s of [
      "acme/deploy-tools",
      defaultRun.repository_id,
      defaultRun.repository_owner_id,
      `${defaultRun.repository}/${defaultRun.workflow_path}@refs/heads/main`,
      "refs/heads/main",
      "push",
    ])
      assert.ok(seen.includes(s), `${s} in ${seen}`);
    await shot(page, "ci-observed");

    // Approve a subset: monitoring.read of the account's read + write.
    const read = detail.getByRole("checkbox", { name: /monitoring\.read/ });
    const write = detail.getByRole("checkbox", { name: /monitoring\.write/ });
    assert.equal(await read.isChecked(), true);
    assert.equal(await write.isChecked(), false);
    await detail.getByRole("button", { name: "Approve this identity" }).click();
    await detail.getByText("approved", { exact: true }).first().waitFor();
    let got = await owner.automation.getCITrust({ name: trust.name });
    assert.equal(got.state, "APPROVED");
    assert.deepEqual(got.permissions, ["monitoring.read"]);
    assert.ok(!(await pageText(page)).includes(code), "the pairing code is gone once verified");
    const token = await anon.exchangeCIToken({
      trustName: trust.name,
      assertion: await oidc.token(trust.audience),
    });
    assert.equal((await listVms(t.clients(token.accessToken), p.projectName)).vms.length, 1);
    await shot(page, "ci-approved");

    // Edit permissions: outstanding tokens stop.
    await detail.getByRole("button", { name: "Edit permissions" }).click();
    const edit = page.getByRole("dialog", { name: "Edit permissions" });
    await edit.getByText("invalidates every outstanding token").waitFor();
    await edit.getByRole("checkbox", { name: /monitoring\.write/ }).check();
    await edit.getByRole("button", { name: "Save permissions" }).click();
    await detail.getByTestId("trust-permissions").getByText("monitoring.write").waitFor();
    got = await owner.automation.getCITrust({ name: trust.name });
    assert.deepEqual(got.permissions, ["monitoring.read", "monitoring.write"]);
    await refused(
      listVms(t.clients(token.accessToken), p.projectName),
      Code.Unauthenticated,
      "CREDENTIAL_REVOKED",
    );

    // Disable, then delete, each confirmed.
    await detail.getByRole("button", { name: "Disable" }).click();
    await page
      .getByRole("dialog", { name: "Disable the CI trust" })
      .getByRole("button", { name: "Disable now" })
      .click();
    await page.getByTestId("trust-table").getByText("disabled").waitFor();
    assert.equal((await owner.automation.getCITrust({ name: trust.name })).state, "DISABLED");

    // Verify again (the way back from disabled, or after a rename): a new code and setup ID, same trust.
    await detail.getByRole("button", { name: "Verify again" }).click();
    const againForm = page.getByRole("dialog", { name: "Verify the trust again" });
    assert.equal(await againForm.getByLabel("Repository").inputValue(), defaultRun.repository);
    await againForm.getByRole("button", { name: "Start verification again" }).click();
    const newCode = (await detail.getByTestId("shown-once").locator("code.secret").textContent()) ?? "";
    assert.match(newCode, /^svcsetup_/);
    assert.notEqual(newCode, code);
    const pending = await owner.automation.getCITrust({ name: trust.name });
    assert.equal(pending.state, "VERIFICATION_PENDING");
    assert.equal(await detail.getByTestId("setup-id").textContent(), pending.setupId);
    assert.notEqual(pending.setupId, trust.setupId);
    await detail.getByRole("button", { name: "Delete" }).click();
    await page
      .getByRole("dialog", { name: "Delete the CI trust" })
      .getByRole("button", { name: "Delete" })
      .click();
    await page.getByText("No CI trusts yet").waitFor();
    assert.deepEqual((await owner.automation.listCITrusts({ parent: p.projectName })).trusts, []);
    assert.deepEqual(problems, []);
  });

  it("shows a viewer the lists without the buttons that change them", async () => {
    const p = await t.seedProject("viewed", ["web-1"]);
    const owner = t.clients(p.owner.session);
    await owner.serviceAccounts.createServiceAccount({
      parent: p.projectName,
      displayName: "scraper",
      template: "Metrics scraper",
    });
    const email = "viewer-viewed@example.com";
    const password = "viewer-password-123";
    const user = await t.admin.users.createUser({ email, password, displayName: "Viewer" });
    await t.admin.projects.setMember({ project: p.projectName, user: user.name, role: "viewer" });
    const { page, problems } = await openPage(browser);
    await signIn(page, t.baseUrl, email, password);
    await page.getByRole("link", { name: "Service accounts" }).click();
    await page.getByTestId("sa-table").getByText("scraper", { exact: true }).waitFor();
    assert.equal(await page.getByRole("button", { name: "Create service account" }).count(), 0);
    assert.equal(await page.getByRole("button", { name: /^Disable/ }).count(), 0);
    await page.getByRole("link", { name: "CI trusts" }).click();
    await page.getByText("No CI trusts yet").waitFor();
    assert.equal(await page.getByRole("button", { name: "New CI trust" }).count(), 0);
    assert.deepEqual(problems, []);
  });
});
