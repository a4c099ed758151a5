import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import type { Browser, Page } from "playwright-core";
import { fireHotCpu } from "../../packages/server/testing/alert-rules.ts";
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
 * The silences page: create a silence for a rule, see it muting that rule's incident on the incident's
 * page (also in an acknowledgement's answer), the incident list and the VM list, expire it.
 */
describe("console in Chromium: silences", { skip }, () => {
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
    p = await t.seedProject("quiet", ["web-1"]);
    ({ page, problems } = await openPage(browser));
    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);
    base = `${t.baseUrl}/projects/quiet`;
  });
  after(async () => {
    await browser?.close();
    await t?.close();
  });

  it("creates a silence for a rule, the rule's incident says it is silenced on its page, the incident list and the VM list, and expiring it ends that", async () => {
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
    await fireHotCpu(t, "quiet", p.vms[0], now);
    const [incident] = (await owner.incidents.listIncidents({ projectName: p.projectName })).incidents;

    await page.goto(`${base}/silences`);
    const form = page.getByTestId("silence-form");
    await form.getByLabel("Rule").selectOption(rule.name);
    const end = new Date(Date.now() + 2 * 3600_000);
    const local = new Date(end.getTime() - end.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
    await form.getByLabel("Ends").fill(local);
    await form.getByLabel("Comment").fill("deploying");
    await form.getByRole("button", { name: "Create silence" }).click();
    const row = page.getByTestId("silences").locator("tbody tr").first();
    await row.getByText("active", { exact: true }).waitFor();
    await row.getByText("Hot CPU").waitFor();
    const [silence] = (await owner.silences.listSilences({ projectName: p.projectName })).silences;
    assert.deepEqual(
      [silence.ruleNames, silence.comment, silence.creator],
      [[rule.name], "deploying", p.owner.user],
    );

    const incidentId = incident.name.split("/").pop() ?? "";
    await page.goto(`${base}/incidents/${incidentId}`);
    // Named by its window and comment, not its resource name (issue 43, item 4).
    await page
      .getByTestId("silenced")
      .getByText(/until .* · deploying/)
      .waitFor();
    assert.ok(!((await page.getByTestId("silenced").textContent()) ?? "").includes(silence.name));
    // The incident an acknowledgement answers is still silenced: the page says so at once, not after a refetch.
    await page.getByRole("button", { name: "Acknowledge" }).click();
    await page.getByRole("button", { name: "Acknowledged" }).waitFor();
    assert.match((await page.getByTestId("silenced").textContent()) ?? "", /· deploying/);
    // The incident list marks it, and the VM list counts it, from the same answer (silencedBy).
    await page.goto(`${base}/incidents`);
    await page.locator(`[data-incident="${incidentId}"]`).getByTestId("incident-silenced").waitFor();
    await page.goto(`${base}/vms`);
    await page.getByTestId("vm-incidents").getByText("1 silenced").waitFor();

    await page.goto(`${base}/silences`);
    await page.getByRole("button", { name: "Expire now" }).click();
    await page.getByTestId("silences").getByText("expired", { exact: true }).waitFor();
    assert.equal((await owner.silences.getSilence({ name: silence.name })).state, "EXPIRED");
    await page.goto(`${base}/incidents/${incident.name.split("/").pop()}`);
    await page.getByTestId("silenced").getByText("no", { exact: true }).waitFor();
    await page.goto(`${base}/incidents`);
    await page.locator(`[data-incident="${incidentId}"]`).waitFor();
    assert.equal(await page.getByTestId("incident-silenced").count(), 0, "no marker once it expired");
    assert.deepEqual(problems, []);
  });
});
