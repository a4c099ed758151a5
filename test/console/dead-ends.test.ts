import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Browser } from "playwright-core";
import { seriousViolations } from "../../packages/server/testing/axe.ts";
import {
  browserUnavailable,
  buildConsole,
  CONSOLE_DIST,
  launchBrowser,
  openPage,
  signIn,
} from "../../packages/server/testing/browser.ts";
import { testDialects } from "../../packages/server/testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../packages/server/testing/harness.ts";

const [sqlite] = await testDialects();
const skip = browserUnavailable();

const ROUTING_KEY = "R0ut1ngKeyR0ut1ngKeyR0ut1ngKey12";
const OPSGENIE_KEY = "2b3c4d5e-6f70-4812-9a3b-4c5d6e7f8091";

/**
 * Issue 43, item 8: what the console listed but could not do, or did misleadingly. PagerDuty and Opsgenie
 * destinations are created from the console; the metric picker names a unit once; the CI workflow is a
 * file of its own and warns that a loopback origin is unreachable from GitHub; the open trust's button
 * is announced as closing it.
 */
describe("console in Chromium: dead ends (issue 43, item 8)", { skip }, () => {
  let t: TestApp;
  let browser: Browser;
  let p: SeededProject;
  before(async () => {
    buildConsole();
    t = await startTestApp(
      sqlite.dialect,
      {
        consoleDir: CONSOLE_DIST,
        // The provider endpoints are given as loopback addresses: no test reaches PagerDuty or Opsgenie.
        notify: { dispatcherAutoStart: false, options: { allowHosts: ["127.0.0.1"] } },
      },
      { wallClock: true },
    );
    browser = await launchBrowser();
    p = await t.seedProject("ends", ["web-1"]);
  });
  after(async () => {
    await browser?.close();
    await t?.close();
  });

  it("creates PagerDuty and Opsgenie destinations from the console; a malformed key is refused in words, and no key is shown", async () => {
    const owner = t.clients(p.owner.session);
    const { page, problems } = await openPage(browser);
    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);
    await page.goto(`${t.baseUrl}/projects/ends/destinations`);
    const made: { kind: string; label: string; key: string; url: string; keyLabel: string }[] = [
      {
        kind: "PAGERDUTY",
        label: "PagerDuty",
        key: ROUTING_KEY,
        url: "https://127.0.0.1:9/v2/enqueue",
        keyLabel: "Integration key",
      },
      {
        kind: "OPSGENIE",
        label: "Opsgenie",
        key: OPSGENIE_KEY,
        url: "https://127.0.0.1:9/v2/alerts",
        keyLabel: "API key",
      },
    ];
    for (const d of made) {
      await page.getByRole("button", { name: "New destination" }).click();
      const dialog = page.getByRole("dialog", { name: "New destination" });
      await dialog.locator(".segmented label", { hasText: new RegExp(`^${d.label}$`) }).click();
      await dialog.getByLabel("Name", { exact: true }).fill(`On-call ${d.label}`);
      await dialog.getByLabel(new RegExp(`^${d.keyLabel}`)).fill("not-a-key");
      await dialog.getByRole("button", { name: "Create destination" }).click();
      await dialog.locator(".field-error").first().waitFor();
      assert.match((await dialog.locator(".field-error").first().textContent()) ?? "", /key is /);
      assert.deepEqual(
        await seriousViolations(page, `new ${d.label} destination`, "dialog[open]"),
        [],
        "the form passes axe",
      );
      await dialog.getByLabel(new RegExp(`^${d.keyLabel}`)).fill(d.key);
      await dialog.getByLabel(/^API endpoint/).fill(d.url);
      await dialog.getByRole("button", { name: "Create destination" }).click();
      await page.waitForURL(/\/destinations\/[a-z0-9]+$/);
      await page.getByTestId("destination-details").getByText(d.url).waitFor();
      const html = await page.content();
      assert.ok(!html.includes(d.key), "the key is never shown");
      await page.goto(`${t.baseUrl}/projects/ends/destinations`);
    }
    const list = (await owner.destinations.listDestinations({ projectName: p.projectName })).destinations;
    assert.deepEqual(
      list.map((d) => [d.kind, d.displayName, d.url]).sort(),
      made.map((d) => [d.kind, `On-call ${d.label}`, d.url]).sort(),
    );
    assert.deepEqual(problems, []);
  });

  it("the metric picker names each unit once", async () => {
    const { page, problems } = await openPage(browser);
    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);
    await page.goto(`${t.baseUrl}/projects/ends/alerts/new`);
    await page.locator('select[name="metricId"] option').first().waitFor({ state: "attached" });
    const options = await page.locator('select[name="metricId"] option').allTextContents();
    assert.ok(options.includes("Guest memory used (bytes)"), options.join(" | "));
    assert.ok(options.includes("CPU utilization (%)"), options.join(" | "));
    for (const o of options) assert.doesNotMatch(o, /\((\S+)\) \(\1\)/, `"${o}" names its unit twice`);
    assert.deepEqual(problems, []);
  });

  it("the CI workflow is a file of its own, warns that a loopback origin is unreachable from GitHub, and the open trust's button says Close", async () => {
    const owner = t.clients(p.owner.session);
    await owner.serviceAccounts.createServiceAccount({
      parent: p.projectName,
      displayName: "deployer",
      template: "Alert manager",
    });
    const { page, problems } = await openPage(browser);
    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);
    await page.goto(`${t.baseUrl}/projects/ends/ci-trusts`);
    await page.getByRole("button", { name: "New CI trust" }).click();
    const form = page.getByRole("dialog", { name: "New CI trust" });
    assert.equal(
      await form.getByLabel("Workflow file").inputValue(),
      ".github/workflows/svc-monitoring.yml",
      "the suggested file replaces no deploy workflow",
    );
    await form.getByLabel("Repository").fill("acme/deploy-tools");
    await form.getByLabel("Branch", { exact: true }).fill("main");
    await form.getByRole("button", { name: "Start setup" }).click();

    const detail = page.getByTestId("trust-detail");
    const snippet = (await detail.getByTestId("setup-snippet").textContent()) ?? "";
    assert.match(
      snippet,
      /^# \.github\/workflows\/svc-monitoring\.yml: a whole workflow\. Commit it as a new file/,
    );
    assert.ok(snippet.includes(`SVC_BASE_URL: ${t.baseUrl}\n`), snippet);
    // The test server listens on 127.0.0.1: the page says GitHub's runners cannot reach it.
    const warning = detail.getByTestId("origin-warning");
    await warning.waitFor();
    assert.match(
      (await warning.textContent()) ?? "",
      /is a loopback address .*GitHub's hosted runners cannot reach it/,
    );

    const [trust] = (await owner.automation.listCITrusts({ parent: p.projectName })).trusts;
    const id = trust.name.split("/").pop();
    const table = page.getByTestId("trust-table");
    // The setup opened the trust: its button closes it, and says so to a screen reader.
    const close = table.getByRole("button", { name: `Close trust ${id}` });
    await close.waitFor();
    assert.equal(await close.getAttribute("aria-expanded"), "true");
    assert.equal(await table.getByRole("button", { name: `Open trust ${id}` }).count(), 0);
    await close.click();
    await detail.waitFor({ state: "detached" });
    const open = table.getByRole("button", { name: `Open trust ${id}` });
    assert.equal(await open.getAttribute("aria-expanded"), "false");
    await open.click();
    await detail.waitFor();
    assert.deepEqual(await seriousViolations(page, "ci-trusts"), []);
    assert.deepEqual(problems, []);
  });
});
