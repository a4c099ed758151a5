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
} from "../../packages/server/testing/browser.ts";
import { testDialects } from "../../packages/server/testing/dialects.ts";
import { startTestApp, type TestApp } from "../../packages/server/testing/harness.ts";

const [sqlite] = await testDialects();
const skip = browserUnavailable();

/** Issue 34: a webhook a key created waits for a person, who confirms it on the destination's page. */
describe("console in Chromium: confirming a destination a key created", { skip }, () => {
  let t: TestApp;
  let browser: Browser;
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
  });
  after(async () => {
    await browser?.close();
    await t?.close();
  });

  it("shows the host and the key that set it, and a person's confirmation makes it active", async () => {
    const p = await t.seedProject("confirm", ["web-a"]);
    const owner = t.clients(p.owner.session);
    const sa = await owner.serviceAccounts.createServiceAccount({
      parent: p.projectName,
      displayName: "routes",
      template: "Notification manager",
    });
    const key = await owner.keys.createKey({
      parent: sa.name,
      displayName: "routes",
      capabilities: ["monitoring.read", "notifications.write"],
      requestId: randomUUID(),
    });
    const created = await t.clients(key.secret).destinations.createDestination({
      displayName: "pipeline hook",
      kind: "WEBHOOK",
      url: "https://127.0.0.1:9/hook",
      requestId: randomUUID(),
    });
    const d = created.destination;
    assert.equal(d?.awaitingConfirmation, true);

    const { page, problems } = await openPage(browser);
    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);
    await page.goto(`${t.baseUrl}/projects/confirm/destinations/${d?.name.split("/").at(-1)}`);
    const banner = page.getByTestId("confirm-destination");
    await banner.waitFor();
    const text = (await banner.textContent()) ?? "";
    assert.match(text, /127\.0\.0\.1:9/);
    // The key by its name and hint, its resource name on hover (issue 43, item 4).
    await banner.getByText(`key routes (${key.key?.secretHint})`).waitFor();
    assert.equal(await banner.locator(".person").first().getAttribute("title"), key.key?.name);
    await page.getByRole("button", { name: "Confirm sending to 127.0.0.1:9" }).click();
    await banner.waitFor({ state: "detached" });
    assert.equal((await owner.destinations.getDestination({ name: d?.name })).awaitingConfirmation, false);
    assert.deepEqual(problems, []);
  });
});
