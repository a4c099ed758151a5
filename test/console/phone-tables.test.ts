import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import type { Browser, Locator, Page } from "playwright-core";
import { fireHotCpu, newCpuRule } from "../../packages/server/testing/alert-rules.ts";
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
const PHONE = { width: 390, height: 844 };

/** The control is drawn inside the window's width: seen without scrolling sideways. */
async function onScreen(what: Locator, name: string): Promise<void> {
  await what.waitFor();
  // Scrolls the window only up or down (never a box sideways, as scrollIntoView would), then asks what
  // is drawn at the control's centre: the control itself unless a box scrolling sideways clips it.
  const r = await what.evaluate(
    // A string, not a function: the test's TypeScript has no DOM types.
    new Function(
      "el",
      `let r = el.getBoundingClientRect();
       window.scrollTo(0, window.scrollY + r.top - 200);
       r = el.getBoundingClientRect();
       const at = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
       return { left: r.left, right: r.right, hit: !!at && (el === at || el.contains(at)) };`,
    ) as (el: unknown) => { left: number; right: number; hit: boolean },
  );
  assert.ok(r.left >= 0 && r.right <= PHONE.width, `${name} at x ${r.left}..${r.right}`);
  assert.ok(r.hit, `${name} is not hidden behind a box scrolling sideways`);
}

/** No table on the page scrolls sideways inside itself, and the page does not either. */
async function noSidewaysScroll(page: Page, where: string): Promise<void> {
  const r = (await page.evaluate(`(() => ({
    page: document.documentElement.scrollWidth - document.documentElement.clientWidth,
    boxes: [...document.querySelectorAll("main table, main .access-table-wrap")]
      .filter((t) => t.scrollWidth > t.clientWidth + 1)
      .map((t) => (t.getAttribute("data-testid") || t.className) + " " + t.scrollWidth + ">" + t.clientWidth),
  }))()`)) as { page: number; boxes: string[] };
  assert.equal(r.page, 0, `${where}: the page scrolls sideways`);
  assert.deepEqual(r.boxes, [], `${where}: a table scrolls sideways`);
}

/**
 * Issue 43, item 5: on a phone (390×844) the tables whose key columns were clipped inside a sideways
 * scroll are cards: a key's Rotate and Revoke, a rule's firing count, a CI trust's state and Open button
 * are on screen. The incident page is compact.
 */
describe("console in Chromium at 390×844: key columns on screen (issue 43, item 5)", { skip }, () => {
  let t: TestApp;
  let browser: Browser;
  let p: SeededProject;
  let page: Page;
  let problems: string[];
  let base: string;

  before(async () => {
    buildConsole();
    t = await startTestApp(
      sqlite.dialect,
      {
        consoleDir: CONSOLE_DIST,
        notify: { dispatcherAutoStart: false, options: { allowHosts: ["127.0.0.1"] } },
      },
      { wallClock: true },
    );
    browser = await launchBrowser();
    p = await t.seedProject("phone", ["web-1"]);
    ({ page, problems } = await openPage(browser, PHONE));
    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);
    base = `${t.baseUrl}/projects/phone`;
  });
  after(async () => {
    await browser?.close();
    await t?.close();
  });

  it("a key's Rotate and Revoke are visible without scrolling sideways, for a personal and a service-account key", async () => {
    const owner = t.clients(p.owner.session);
    await owner.keys.createKey({
      parent: p.projectName,
      displayName: "laptop",
      capabilities: ["monitoring.read"],
      requestId: randomUUID(),
    });
    const sa = await owner.serviceAccounts.createServiceAccount({
      parent: p.projectName,
      displayName: "scraper",
      template: "Metrics scraper",
    });
    await owner.keys.createKey({
      parent: sa.name,
      displayName: "prometheus",
      capabilities: ["monitoring.read"],
      requestId: randomUUID(),
    });
    await page.goto(`${base}/keys`);
    for (const key of ["laptop", "prometheus"]) {
      await onScreen(page.getByRole("button", { name: new RegExp(`^Rotate ${key} `) }), `Rotate ${key}`);
      await onScreen(page.getByRole("button", { name: new RegExp(`^Revoke ${key} `) }), `Revoke ${key}`);
    }
    await noSidewaysScroll(page, "keys");
    // The cards still work: Rotate opens its dialog.
    await page.getByRole("button", { name: /^Rotate laptop / }).click();
    await page.getByRole("dialog").waitFor();
    await page.keyboard.press("Escape");
    assert.deepEqual(await seriousViolations(page, "keys at 390"), []);
    assert.deepEqual(problems, []);
  });

  it("a rule's firing count and a CI trust's state and Open button are on screen", async () => {
    const owner = t.clients(p.owner.session);
    await owner.alerts.saveAlertRule(newCpuRule(p.projectName));
    await page.goto(`${base}/alerts`);
    const row = page.getByTestId("alert-rule-row").first();
    await onScreen(row.getByTestId("alert-rule-counts").getByText(/firing/), "the rule's firing count");
    await onScreen(row.getByTestId("alert-rule-sync"), "the rule's sync state");
    await noSidewaysScroll(page, "alert rules");

    const sa = (await owner.serviceAccounts.listServiceAccounts({ parent: p.projectName }))
      .serviceAccounts[0];
    await owner.automation.startCITrustSetup({
      serviceAccount: sa.name,
      intended: {
        repository: "acme/app",
        workflow: ".github/workflows/svc-monitoring.yml",
        branch: "main",
        environment: "",
        event: "push",
      },
    });
    await page.goto(`${base}/ci-trusts`);
    const trust = page.getByTestId("trust-table").locator("tbody tr").first();
    await onScreen(trust.getByText("waiting for verification", { exact: true }), "the trust's state");
    await onScreen(trust.getByRole("button", { name: /^Open trust / }), "the trust's Open button");
    await noSidewaysScroll(page, "CI trusts");
    assert.deepEqual(await seriousViolations(page, "ci-trusts at 390"), []);
    assert.deepEqual(problems, []);
  });

  it("the incident page is compact: a skipped delivery is one line, not an empty attempts box", async () => {
    const owner = t.clients(p.owner.session);
    const hooks = [];
    for (const n of [1, 2, 3])
      hooks.push(
        (
          await owner.destinations.createDestination({
            projectName: p.projectName,
            displayName: `hook ${n}`,
            kind: "WEBHOOK",
            url: `https://127.0.0.1:9/hook-${n}`,
            requestId: randomUUID(),
          })
        ).destination?.name ?? "",
      );
    const rule = await owner.alerts.saveAlertRule(
      newCpuRule(p.projectName, { displayName: "Hot", destinationNames: hooks }),
    );
    await owner.silences.createSilence({
      projectName: p.projectName,
      requestId: randomUUID(),
      comment: "deploying",
      ruleNames: [rule.name],
      vmNames: [],
      startTimeUnix: 0n,
      endTimeUnix: BigInt(Math.floor(Date.now() / 1000) + 3600),
    });
    const now = Date.now();
    await fireHotCpu(t, "phone", p.vms[0], now);
    await t.app.dispatcher.runOnce();
    const [incident] = (await owner.incidents.listIncidents({ projectName: p.projectName, rule: rule.name }))
      .incidents;
    const deliveries = (
      await owner.destinations.listDeliveries({ projectName: p.projectName, incident: incident.name })
    ).deliveries;
    assert.deepEqual(
      deliveries.map((d) => d.state),
      ["SKIPPED", "SKIPPED", "SKIPPED"],
      "silenced: skipped, never attempted",
    );

    await page.goto(`${base}/incidents/${incident.name.split("/").pop()}`);
    const timeline = page.getByTestId("timeline");
    await timeline.locator("li.tl-delivery").nth(2).waitFor();
    // Each skipped delivery is its head line and its reason; its attempts table opens on request only.
    assert.equal(await timeline.locator(".attempts-none, [data-testid=attempts]").count(), 0);
    const toggles = timeline.getByRole("button", { name: /attempt/ });
    assert.deepEqual(await toggles.evaluateAll((bs) => bs.map((b) => b.getAttribute("aria-expanded"))), [
      "false",
      "false",
      "false",
    ]);
    await noSidewaysScroll(page, "incident");
    const height = (await page.evaluate("document.documentElement.scrollHeight")) as number;
    assert.ok(height < 2600, `the incident page is ${height} px tall at 390 px`);
    assert.deepEqual(await seriousViolations(page, "incident at 390"), []);
    assert.deepEqual(problems, []);
  });
});
