import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import type { Browser, Page } from "playwright-core";
import { fireHotCpu } from "../../packages/server/testing/alert-rules.ts";
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

/**
 * Issue 43, item 3: silencing where on-call needs it. "Silence…" on an incident and on a VM opens the
 * form with its matchers filled in; the end is a preset (1 h, 4 h, tomorrow 09:00) or a time in the
 * named time zone; refusals are said in words; the incident list says until when an incident is silenced.
 */
describe("console in Chromium: silencing from an incident and a VM (issue 43, item 3)", { skip }, () => {
  let t: TestApp;
  let browser: Browser;
  let p: SeededProject;
  let page: Page;
  let problems: string[];
  let base: string;

  before(async () => {
    buildConsole();
    t = await startTestApp(sqlite.dialect, { consoleDir: CONSOLE_DIST }, { wallClock: true });
    browser = await launchBrowser();
    p = await t.seedProject("oncall", ["web-1"]);
    ({ page, problems } = await openPage(browser));
    // The same page in a browser set to Berlin: the form's zone, and "tomorrow 09:00", are Berlin's.
    const berlin = await browser.newContext({
      viewport: { width: 1280, height: 860 },
      timezoneId: "Europe/Berlin",
    });
    const berlinPage = await berlin.newPage();
    berlinPage.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
    berlinPage.on("console", (m) => {
      if (m.type() === "error" && /Content Security Policy|Refused to/i.test(m.text()))
        problems.push(`CSP: ${m.text()}`);
    });
    await page.context().close();
    page = berlinPage;
    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);
    base = `${t.baseUrl}/projects/oncall`;
  });
  after(async () => {
    await browser?.close();
    await t?.close();
  });

  it("the silence form names its time zone, offers presets, and says in words what is missing or refused", async () => {
    await page.goto(`${base}/silences`);
    const form = page.getByTestId("silence-form");
    assert.equal(await page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone"), "Europe/Berlin");
    assert.match((await form.textContent()) ?? "", /Times in Europe\/Berlin \(UTC\+0[12]:00\)/);
    await form.getByRole("combobox", { name: /^VM/ }).selectOption(p.vms[0]);
    // No end, no comment: said next to each field, never as the API's field name and reason.
    await form.getByRole("button", { name: "Create silence" }).click();
    await form.getByText("Choose when the silence ends").waitFor();
    await form.getByText("Say why the notifications are muted").waitFor();
    let text = (await form.textContent()) ?? "";
    assert.doesNotMatch(text, /endTimeUnix|INVALID_FIELD|Unix seconds/);
    assert.equal(
      (await t.clients(p.owner.session).silences.listSilences({ projectName: p.projectName })).silences
        .length,
      0,
    );
    // A refusal only the server makes (a start over 365 days ahead) is in words too, by the field's label.
    const ahead = (await page.evaluate(`(() => {
      const f = (ms) => { const d = new Date(ms); const p = (n) => String(n).padStart(2, "0");
        return d.getFullYear() + "-" + p(d.getMonth() + 1) + "-" + p(d.getDate()) + "T" + p(d.getHours()) + ":" + p(d.getMinutes()); };
      return [f(Date.now() + 400 * 86400000), f(Date.now() + 401 * 86400000)];
    })()`)) as string[];
    await form.getByLabel("Starts").fill(ahead[0]);
    await form.getByLabel(/^Ends/).fill(ahead[1]);
    await form.getByLabel("Comment").fill("far ahead");
    await form.getByRole("button", { name: "Create silence" }).click();
    await form.getByText("Starts must be at most 365 days ahead").waitFor();
    text = (await form.textContent()) ?? "";
    assert.doesNotMatch(text, /startTimeUnix|INVALID_FIELD/);
    assert.deepEqual(await seriousViolations(page, "silences"), []);
    assert.deepEqual(problems, []);
  });

  it("Silence… on an incident fills in its rule and VM, 4 hours ends 4 hours from now, and the incident list says until when", async () => {
    const owner = t.clients(p.owner.session);
    const rule = await owner.alerts.saveAlertRule({
      projectName: p.projectName,
      id: randomUUID(),
      requestId: randomUUID(),
      expectedVersion: "0",
      spec: {
        displayName: "Hot CPU",
        metricId: "cpu_utilization_pct",
        operator: "GREATER_THAN",
        threshold: 90,
        sustainedSeconds: 0,
        severity: "WARNING",
        allVms: true,
        repeatIntervalSeconds: 0,
        destinationNames: [],
      },
    });
    const now = Date.now();
    await fireHotCpu(t, "oncall", p.vms[0], now);
    const [incident] = (await owner.incidents.listIncidents({ projectName: p.projectName })).incidents;
    const incidentId = incident.name.split("/").pop() ?? "";

    await page.goto(`${base}/incidents/${incidentId}`);
    await page.getByTestId("silenced").getByText("no", { exact: true }).waitFor();
    // The incident reads by the metric's name, not its id (issue 43, item 4).
    assert.match((await page.getByTestId("incident-summary").textContent()) ?? "", /CPU utilization > 90 %/);
    await page.getByRole("button", { name: "Silence…" }).click();
    const dialog = page.getByRole("dialog", { name: /^Silence Hot CPU/ });
    const form = dialog.getByTestId("silence-dialog-form");
    const matchers = form.getByTestId("silence-matchers");
    await matchers.getByText("Hot CPU").waitFor();
    assert.equal(await matchers.locator("dd").nth(1).textContent(), "web-1");
    await form.getByRole("button", { name: "4 hours" }).click();
    assert.equal(await form.getByRole("button", { name: "4 hours" }).getAttribute("aria-pressed"), "true");
    await form.getByLabel("Comment").fill("deploying");
    assert.deepEqual(await seriousViolations(page, "incident, Silence dialog", "dialog[open]"), []);
    const clicked = Date.now();
    await form.getByRole("button", { name: "Create silence" }).click();
    await dialog.waitFor({ state: "hidden" });
    const [silence] = (await owner.silences.listSilences({ projectName: p.projectName, state: "ACTIVE" }))
      .silences;
    assert.deepEqual(
      [silence.ruleNames, silence.vmNames, silence.comment],
      [[rule.name], [p.vms[0]], "deploying"],
    );
    const end = Number(silence.endTimeUnix) * 1000;
    // The preset is minute-precise (a datetime-local value): 4 h from when it was clicked, within a minute.
    assert.ok(Math.abs(end - (clicked + 4 * 3600_000)) < 90_000, `ends ${new Date(end).toISOString()}`);
    // The page names the silence by its window and comment, and who made it.
    await page
      .getByTestId("silenced")
      .getByText(/until .* · deploying/)
      .waitFor();
    assert.match((await page.getByTestId("silenced").textContent()) ?? "", /by you/);

    await page.goto(`${base}/incidents`);
    const marker = page.locator(`[data-incident="${incidentId}"]`).getByTestId("incident-silenced");
    await marker.getByText(/until/).waitFor();
    assert.match((await marker.textContent()) ?? "", /silenced\s+until /);
    assert.deepEqual(problems, []);
  });

  it("Silence… on a VM fills in the VM and every rule; until tomorrow 09:00 ends then, in the browser's time zone", async () => {
    const owner = t.clients(p.owner.session);
    for (const s of (await owner.silences.listSilences({ projectName: p.projectName, state: "ACTIVE" }))
      .silences)
      await owner.silences.expireSilence({ name: s.name });
    await page.goto(`${base}/vms/dc-1/web-1`);
    await page.getByRole("button", { name: "Silence…" }).click();
    const dialog = page.getByRole("dialog", { name: "Silence web-1" });
    const form = dialog.getByTestId("silence-dialog-form");
    const matchers = form.getByTestId("silence-matchers");
    await matchers.getByText("web-1").waitFor();
    assert.equal(await matchers.locator("dd").first().textContent(), "every rule");
    await form.getByRole("button", { name: "Until tomorrow 09:00" }).click();
    await form.getByTestId("silence-ends").waitFor();
    await form.getByLabel("Comment").fill("maintenance");
    await form.getByRole("button", { name: "Create silence" }).click();
    await dialog.waitFor({ state: "hidden" });
    const [silence] = (await owner.silences.listSilences({ projectName: p.projectName, state: "ACTIVE" }))
      .silences;
    assert.deepEqual([silence.ruleNames, silence.vmNames], [[], [p.vms[0]]]);
    const expected = (await page.evaluate(
      "(() => { const d = new Date(); d.setDate(d.getDate() + 1); d.setHours(9, 0, 0, 0); return d.getTime(); })()",
    )) as number;
    assert.equal(Number(silence.endTimeUnix) * 1000, expected);
    assert.deepEqual(problems, []);
  });
});
