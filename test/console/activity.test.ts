import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import type { Browser } from "playwright-core";
import { fireHotCpu, newCpuRule } from "../../packages/server/testing/alert-rules.ts";
import {
  browserUnavailable,
  buildConsole,
  CONSOLE_DIST,
  launchBrowser,
  openPage,
  signIn,
  untilInPage,
} from "../../packages/server/testing/browser.ts";
import { testDialects } from "../../packages/server/testing/dialects.ts";
import { startTestApp, type TestApp } from "../../packages/server/testing/harness.ts";

const [sqlite] = await testDialects();
const skip = browserUnavailable();

/** Issue 29: the Activity page shows who did what; the key table shows each key's last use. */
describe("console in Chromium: Activity and keys' last use", { skip }, () => {
  let t: TestApp;
  let browser: Browser;
  before(async () => {
    buildConsole();
    t = await startTestApp(sqlite.dialect, { consoleDir: CONSOLE_DIST }, { wallClock: true });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await t?.close();
  });

  it("lists a key created, rotated and revoked, a rule saved with a write key and the sign-in, once each, and filters by method", async () => {
    const p = await t.seedProject("activity", ["web-1"]);
    const owner = t.clients(p.owner.session);
    const k = await owner.keys.createKey({
      parent: p.projectName,
      displayName: "laptop",
      capabilities: ["monitoring.read"],
      requestId: randomUUID(),
    });
    const r = await owner.keys.rotateKey({ name: k.key?.name, overlapSeconds: 0, requestId: randomUUID() });
    await owner.keys.revokeKey({ name: r.key?.name });
    const sa = await owner.serviceAccounts.createServiceAccount({
      parent: p.projectName,
      displayName: "deploy",
      template: "Alert manager",
    });
    const w = await owner.keys.createKey({
      parent: sa.name,
      displayName: "deploy",
      capabilities: ["monitoring.read", "monitoring.write"],
      requestId: randomUUID(),
    });
    await t.clients(w.secret).alerts.saveAlertRule(newCpuRule(p.projectName));

    const { page, problems } = await openPage(browser);
    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);
    await page.getByRole("link", { name: "Activity" }).click();
    const table = page.getByTestId("activity-table");
    await table.waitFor();
    const rows = (what: string) => table.locator("tbody tr").filter({ hasText: what });
    assert.equal(await rows("RotateKey").count(), 1);
    assert.equal(await rows("RevokeKey").count(), 1);
    assert.equal(await rows("SaveAlertRule").count(), 1);
    // In words (issue 43, item 4): the kind of credential, the key by its name, the method as detail.
    assert.ok(await rows("SaveAlertRule").getByText("with a service-account key").isVisible());
    await rows("SaveAlertRule").getByText(`key: deploy (${w.key?.secretHint})`).waitFor();
    assert.equal(await rows("SaveAlertRule").locator(".person").textContent(), "deploy");
    await rows("SaveAlertRule")
      .getByText(/^Saved alert rule '.+'$/)
      .waitFor();
    await rows("RotateKey")
      .getByText(/^Rotated key 'laptop \(svc[a-z]_[^…]+…\)'$/)
      .waitFor();
    const text = (await table.textContent()) ?? "";
    assert.ok(!text.includes(w.key?.name ?? "-"), "no key by its resource path");
    assert.ok(!text.includes(p.owner.user), "no person by users/<id>");
    assert.equal(await rows("CreateKey").count(), 2);
    // A rule's row links to the rule's page.
    assert.equal(await rows("SaveAlertRule").getByRole("link").count(), 1);

    await page.getByLabel("Method").fill("RotateKey");
    // The filtered page replaces the table (a loading state between): wait for the one row it holds.
    await untilInPage(
      page,
      `(() => {
        const rows = document.querySelectorAll('[data-testid="activity-table"] tbody tr');
        return rows.length === 1 && rows[0].textContent.includes("RotateKey");
      })()`,
    );

    // The write key was used once: its row says when and from where; the revoked lineage never.
    await page.getByRole("link", { name: "API keys" }).click();
    const keyRow = page.locator("tr").filter({ hasText: "deploy" }).filter({ hasText: "svcs_" }).first();
    await keyRow.getByText("127.0.0.1").waitFor();
    assert.deepEqual(problems, []);
  });

  it("shows a rule's own recent events on its page, its save there included, linked to the filtered Activity page; a viewer gets neither the section nor the call", async () => {
    const p = await t.seedProject("rule-activity", ["web-1"]);
    const owner = t.clients(p.owner.session);
    const rule = newCpuRule(p.projectName);
    const { id } = rule;
    await owner.alerts.saveAlertRule(rule);
    // Another rule's save, which the page must not show.
    const other = newCpuRule(p.projectName, { displayName: "cpu 2", threshold: 80 });
    const otherId = other.id;
    await owner.alerts.saveAlertRule(other);
    const ruleName = `${p.projectName}/alertRules/${id}`;

    const { page, problems } = await openPage(browser);
    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);
    await page.goto(`${t.baseUrl}/${p.projectName}/alerts/${id}`);
    const recent = page.getByTestId("recent-activity");
    const saves = recent.locator("tbody tr").filter({ hasText: "SaveAlertRule" });
    await saves.first().waitFor();
    assert.equal(await saves.count(), 1);

    await page.getByTestId("alert-form").locator("input[name=threshold]").fill("85");
    await page.getByRole("button", { name: "Save", exact: true }).click();
    await page.getByTestId("alert-notice").getByText("Saved version 2.").waitFor();
    await untilInPage(
      page,
      `(() => {
        const rows = [...document.querySelectorAll('[data-testid="recent-activity"] tbody tr')];
        return rows.filter((r) => r.textContent.includes("SaveAlertRule")).length === 2;
      })()`,
    );
    // Newest first: the console's save (the browser's user agent), by the signed-in user, with its fields.
    const newest = recent.locator("tbody tr").first();
    assert.match((await newest.textContent()) ?? "", /SaveAlertRule/);
    assert.match((await newest.textContent()) ?? "", /changed .*threshold/);
    await newest.getByText(/^Saved alert rule '/).waitFor();
    assert.match((await newest.textContent()) ?? "", /HeadlessChrome/);
    assert.doesNotMatch((await saves.nth(1).textContent()) ?? "", /HeadlessChrome/);
    assert.equal(await newest.locator(".person").textContent(), "you");
    assert.equal(await newest.locator(".person").getAttribute("title"), `Owner <${p.owner.email}>`);

    await recent.getByRole("link", { name: "All of its activity" }).click();
    await page.waitForURL(
      (u) => u.pathname.endsWith("/activity") && u.searchParams.get("resource") === ruleName,
    );
    assert.equal(await page.getByLabel("Resource").inputValue(), ruleName);
    const table = page.getByTestId("activity-table");
    await untilInPage(
      page,
      `(() => {
        const rows = document.querySelectorAll('[data-testid="activity-table"] tbody tr');
        return rows.length === 2 && [...rows].every((r) => r.dataset.resource.endsWith(${JSON.stringify(id)}));
      })()`,
    );
    assert.equal(await table.locator(`tbody tr[data-resource$="${otherId}"]`).count(), 0);
    assert.deepEqual(problems, []);

    // A viewer may not read the audit log: the rule's page neither shows the section nor asks for it.
    const email = "viewer-activity@example.com";
    const password = `pw-${randomUUID()}`;
    const user = await t.admin.users.createUser({ email, password, displayName: "Viewer" });
    await t.admin.projects.setMember({ project: p.projectName, user: user.name, role: "viewer" });
    const viewer = await openPage(browser);
    const asked: string[] = [];
    viewer.page.on("request", (r) => {
      if (r.url().includes("AuditService")) asked.push(r.url());
    });
    await signIn(viewer.page, t.baseUrl, email, password);
    await viewer.page.goto(`${t.baseUrl}/${p.projectName}/alerts/${id}`);
    await viewer.page.getByTestId("alert-form").waitFor();
    await viewer.page.getByTestId("alert-version").getByText("2").waitFor();
    assert.equal(await viewer.page.getByTestId("recent-activity").count(), 0);
    assert.equal(await viewer.page.getByRole("alert").count(), 0);
    assert.deepEqual(asked, []);
    assert.deepEqual(viewer.problems, []);
  });

  it("names an incident's events by its rule and VM, and copying a person's name gives the full name and email", async () => {
    const p = await t.seedProject("incident-activity", ["web-1"]);
    const owner = t.clients(p.owner.session);
    const now = Date.now();
    const rule = newCpuRule(p.projectName, { displayName: "High CPU", threshold: 90 });
    const saved = await owner.alerts.saveAlertRule(rule);
    await fireHotCpu(t, "incident-activity", p.vms[0], now, 600_000);
    const [incident] = (await owner.incidents.listIncidents({ projectName: p.projectName, rule: saved.name }))
      .incidents;
    assert.ok(incident, "the evaluator opened an incident");
    await owner.incidents.acknowledgeIncident({ name: incident.name });

    const { page, problems } = await openPage(browser);
    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);
    await page.getByRole("link", { name: "Activity" }).click();
    const row = page.getByTestId("activity-table").locator(`tbody tr[data-resource="${incident.name}"]`);
    // In words, the incident's path kept for hover and the filters; the method as the detail line.
    await row.getByText("Acknowledged incident 'High CPU' on web-1", { exact: true }).waitFor();
    await row.getByText("AcknowledgeIncident", { exact: true }).waitFor();
    assert.ok(!((await row.textContent()) ?? "").includes(incident.name), "no incident by its resource path");
    assert.equal(
      await row.getByRole("link", { name: "High CPU on web-1" }).getAttribute("title"),
      incident.name,
    );

    // What a Ctrl+C puts on the clipboard: the copy event's data after the console's handler (document,
    // bubbling) has run, or the selection where it left the browser's own copy.
    const copy = async () => {
      await page.evaluate(`(() => {
        window.__copied = undefined;
        window.addEventListener("copy", (ev) => {
          window.__copied = ev.defaultPrevented ? ev.clipboardData.getData("text/plain") : String(getSelection());
        }, { once: true });
      })()`);
      await page.keyboard.press("Control+C");
      return page.evaluate("window.__copied");
    };
    // The page shows "you"; selecting it and Ctrl+C copy the full name and email.
    const who = row.locator(".person");
    assert.equal(await who.textContent(), "you");
    await who.selectText();
    assert.equal(await copy(), `Owner <${p.owner.email}>`);
    // A selection over the whole row keeps its other text and has the name in full in its place.
    await page.evaluate(`(() => {
      const row = document.querySelector('[data-resource="${incident.name}"]');
      const range = document.createRange();
      range.selectNodeContents(row);
      getSelection().removeAllRanges();
      getSelection().addRange(range);
    })()`);
    const copied = (await copy()) as string;
    assert.match(copied, new RegExp(`Owner <${p.owner.email.replace(/[.+]/g, "\\$&")}>`));
    assert.match(copied, /Acknowledged incident 'High CPU' on web-1/);
    assert.ok(!/\byou\b/.test(copied), `the shown "you" is replaced: ${copied}`);
    // Text without a person is copied as the browser copies it.
    await row.getByText("AcknowledgeIncident", { exact: true }).selectText();
    assert.equal(await copy(), "AcknowledgeIncident");

    // The incident's own page: its acknowledger copies in full too.
    await page.goto(`${t.baseUrl}/${incident.name}`);
    const ack = page.locator(".person").first();
    await ack.waitFor();
    await ack.selectText();
    assert.equal(await copy(), `Owner <${p.owner.email}>`);
    assert.deepEqual(problems, []);
  });
});
