import assert from "node:assert/strict";
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

/** Issue 27, item 11: an email destination's recipients are picked by name from the project's members. */
describe("console in Chromium: email recipients by name", { skip }, () => {
  let t: TestApp;
  let browser: Browser;
  before(async () => {
    buildConsole();
    t = await startTestApp(
      sqlite.dialect,
      { consoleDir: CONSOLE_DIST, notify: { dispatcherAutoStart: false, options: {} } },
      { wallClock: true },
    );
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await t?.close();
  });

  it("lists a member no destination names yet by display name and email, and creates the destination for them", async () => {
    const p = await t.seedProject("members", ["web-a"]);
    const grace = await t.admin.users.createUser({
      email: "grace@example.com",
      password: "correct horse battery staple",
      displayName: "Grace Hopper",
    });
    await t.admin.projects.setMember({ project: p.projectName, user: grace.name, role: "editor" });

    const { page, problems } = await openPage(browser);
    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);
    await page.goto(`${t.baseUrl}/projects/members/destinations`);
    await page.getByRole("button", { name: "New destination" }).click();
    const dialog = page.getByRole("dialog", { name: "New destination" });
    await dialog.locator(".segmented label", { hasText: /^Email$/ }).click();
    const pick = dialog.getByRole("checkbox", { name: /Grace Hopper/ });
    await pick.waitFor();
    assert.match((await pick.locator("xpath=..").textContent()) ?? "", /grace@example\.com/);
    assert.equal(await dialog.getByPlaceholder(/users\/<id>/).count(), 0, "no users/<id> typing any more");
    await pick.check();
    await dialog.getByLabel("Name", { exact: true }).fill("On-call");
    await dialog.getByRole("button", { name: "Create destination" }).click();
    await page.waitForURL(/\/destinations\/[a-z0-9]+$/);

    const list = await t
      .clients(p.owner.session)
      .destinations.listDestinations({ projectName: p.projectName });
    const email = list.destinations.find((d) => d.displayName === "On-call");
    assert.deepEqual(email?.recipients.map((r) => r.user).sort(), [grace.name, p.owner.user].sort());
    assert.deepEqual(problems, []);
  });
});
