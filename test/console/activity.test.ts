import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import type { Browser } from "playwright-core";
import {
  browserUnavailable,
  buildConsole,
  CONSOLE_DIST,
  launchBrowser,
  openPage,
  signIn,
} from "../../packages/server/src/testing/browser.ts";
import { testDialects } from "../../packages/server/src/testing/dialects.ts";
import { startTestApp, type TestApp } from "../../packages/server/src/testing/harness.ts";

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
    await t.clients(w.secret).alerts.saveAlertRule({
      projectName: p.projectName,
      id: randomUUID(),
      requestId: randomUUID(),
      expectedVersion: "0",
      spec: {
        displayName: "cpu",
        metricId: "cpu_utilization_pct",
        operator: "GREATER_THAN",
        threshold: 90,
        sustainedSeconds: 0,
        severity: "WARNING",
        allVms: true,
      },
    });

    const { page, problems } = await openPage(browser);
    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);
    await page.getByRole("link", { name: "Activity" }).click();
    const table = page.getByTestId("activity-table");
    await table.waitFor();
    const rows = (what: string) => table.locator("tbody tr").filter({ hasText: what });
    assert.equal(await rows("RotateKey").count(), 1);
    assert.equal(await rows("RevokeKey").count(), 1);
    assert.equal(await rows("SaveAlertRule").count(), 1);
    assert.ok(await rows("SaveAlertRule").getByText("SERVICE_ACCOUNT_KEY").isVisible());
    assert.ok(await rows("SaveAlertRule").getByText(`key: ${w.key?.name}`).isVisible());
    assert.equal(await rows("CreateKey").count(), 2);
    // A rule's row links to the rule's page.
    assert.equal(await rows("SaveAlertRule").getByRole("link").count(), 1);

    await page.getByLabel("Method").fill("RotateKey");
    // The filtered page replaces the table (a loading state between): wait for the one row it holds.
    await page.waitForFunction(`(() => {
      const rows = document.querySelectorAll('[data-testid="activity-table"] tbody tr');
      return rows.length === 1 && rows[0].textContent.includes("RotateKey");
    })()`);

    // The write key was used once: its row says when and from where; the revoked lineage never.
    await page.getByRole("link", { name: "API keys" }).click();
    const keyRow = page.locator("tr").filter({ hasText: "deploy" }).filter({ hasText: "svcs_" }).first();
    await keyRow.getByText("127.0.0.1").waitFor();
    assert.deepEqual(problems, []);
  });
});
