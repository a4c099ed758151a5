import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Browser, Page } from "playwright-core";
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
import { type SeededProject, startTestApp, type TestApp } from "../../packages/server/testing/harness.ts";
import { pushAll, rwSeries } from "../../packages/server/testing/remote-write.ts";

const [sqlite] = await testDialects();

/** What the focused element is: its tag, its text and its accessible name's attributes. */
async function focused(page: Page): Promise<{ tag: string; text: string; label: string }> {
  return (await page.evaluate(`(() => {
    const e = document.activeElement;
    return {
      tag: e ? e.tagName.toLowerCase() : "",
      text: ((e && e.textContent) || "").trim(),
      label: (e && e.getAttribute("aria-label")) || "",
    };
  })()`)) as { tag: string; text: string; label: string };
}

/** Presses Tab until `match` is focused (at most 80 times): the element is reachable by keyboard. */
async function tabTo(page: Page, match: (f: Awaited<ReturnType<typeof focused>>) => boolean) {
  for (let i = 0; i < 80; i++) {
    await page.keyboard.press("Tab");
    if (match(await focused(page))) return;
  }
  assert.fail("not reachable with Tab");
}

describe("console by keyboard: skip link, focus after navigation, chart tables, dialogs", {
  skip: browserUnavailable(),
}, () => {
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
    p = await t.seedProject("keys", ["web-a"]);
    base = `${t.baseUrl}/projects/keys`;
    // 65 minutes of CPU at 30 s, with no sample for the 5 minutes from 20 to 15 minutes ago.
    const nowS = Math.floor(Date.now() / 30_000) * 30;
    const cpu: [number, number][] = [];
    let c = 1000;
    for (let ts = nowS - 3900, i = 0; ts <= nowS; ts += 30, i++) {
      c += ((20 + (i % 4) * 10) / 100) * 30 * 2;
      if (ts > nowS - 1200 && ts <= nowS - 900) continue;
      cpu.push([ts * 1000, c]);
    }
    await pushAll(t.baseUrl, t.app.config.collectorToken, [
      rwSeries("svc_vm_cpu_seconds_total", { vm: p.vms[0] }, cpu),
    ]);
    ({ page, problems } = await openPage(browser));
    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);
  });
  after(async () => {
    await browser?.close();
    await t?.close();
  });

  it("the first Tab reaches the skip link, which moves focus to the page's heading", async () => {
    await page.goto(`${base}/vms`);
    await page.getByRole("heading", { level: 1, name: "Virtual machines" }).waitFor();
    await page.keyboard.press("Tab");
    assert.equal((await focused(page)).text, "Skip to content");
    assert.ok(await page.getByRole("link", { name: "Skip to content" }).isVisible(), "visible when focused");
    await page.keyboard.press("Enter");
    assert.deepEqual(await focused(page), { tag: "h1", text: "Virtual machines", label: "" });
    // The next Tab continues inside the page, past the navigation.
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(`!!document.activeElement.closest("main")`), true);
  });

  it("marks the current page in the navigation and moves focus to the new page's heading", async () => {
    const nav = page.getByRole("navigation", { name: "Console" });
    assert.equal(
      await nav.getByRole("link", { name: "Virtual machines" }).getAttribute("aria-current"),
      "page",
    );
    await nav.getByRole("link", { name: "Alert rules" }).focus();
    await page.keyboard.press("Enter");
    await page.waitForURL(`${base}/alerts`);
    await page.getByRole("heading", { level: 1, name: "Alert rules" }).waitFor();
    await untilInPage(page, `document.activeElement.tagName === "H1"`);
    assert.equal((await focused(page)).text, "Alert rules");
    assert.equal(await nav.getByRole("link", { name: "Alert rules" }).getAttribute("aria-current"), "page");
    assert.equal(
      await nav.getByRole("link", { name: "Virtual machines" }).getAttribute("aria-current"),
      null,
    );
    // A sub-page marks its section's link as the location.
    await page.goto(`${base}/vms/dc-1/web-a`);
    await page.getByRole("heading", { level: 1, name: "web-a" }).waitFor();
    assert.equal(
      await nav.getByRole("link", { name: "Virtual machines" }).getAttribute("aria-current"),
      "location",
    );
  });

  it("each chart has a summary and a table of its points, reachable by keyboard", async () => {
    await page.goto(`${base}/vms/dc-1/web-a`);
    const card = page.getByTestId("card-cpu");
    await card.locator(".vm-chart").waitFor();
    const [cpu] = JSON.parse((await card.locator(".vm-chart").getAttribute("data-series")) ?? "[]") as {
      values: (number | null)[];
    }[];
    const present = cpu.values.filter((v) => v !== null) as number[];
    // The summary names the latest, lowest, highest and mean values, and the gap.
    const summary = (await card.getByTestId("chart-summary").textContent()) ?? "";
    const pct = (v: number) => `${v.toFixed(v < 10 ? 1 : 0)} %`;
    const mean = present.reduce((a, b) => a + b, 0) / present.length;
    assert.match(summary, new RegExp(`latest sample ${pct(present[present.length - 1])}`));
    assert.match(summary, new RegExp(`min ${pct(Math.min(...present))}, max ${pct(Math.max(...present))}`));
    assert.match(summary, new RegExp(`average over the range ${pct(mean)}`));
    // The one coverage statement (issue 43, item 1): the steps with a sample are the plotted points, and
    // the gaps are runs of missing steps (the missing 5 minutes).
    const coverage = (await card.getByTestId("chart-coverage").textContent()) ?? "";
    const m = /Coverage: (\d+) of (\d+) steps \(30 s each\) have a sample · (\d+) gaps? \(shaded\)/.exec(
      coverage,
    );
    assert.ok(m, coverage);
    assert.equal(Number(m[1]), present.length);
    assert.ok(Number(m[3]) >= 1);
    // The canvas is hidden from screen readers; its text alternative is not.
    assert.equal(await card.getByTestId("chart-cpu").getAttribute("aria-hidden"), "true");

    await page.getByRole("heading", { level: 1 }).focus();
    await tabTo(page, (f) => f.tag === "summary" && f.text === "View CPU as a table");
    await page.keyboard.press("Enter");
    const table = card.getByRole("region", { name: "CPU, plotted points" }).getByRole("table");
    await table.waitFor();
    const rows = table.locator("tbody tr");
    assert.equal(await rows.count(), cpu.values.length);
    // Each row is the plotted value at its step; a missing step is a dash, never 0.
    const cells = await rows.locator("td").allTextContents();
    assert.deepEqual(
      cells,
      cpu.values.map((v) => (v === null ? "—" : pct(v))),
    );
    // The scrolling table takes focus too, so it scrolls by keyboard.
    await page.keyboard.press("Tab");
    assert.equal((await focused(page)).label, "CPU, plotted points");
  });

  it("Escape on a dialog with typed input asks before discarding it", async () => {
    await page.goto(`${base}/service-accounts`);
    await page.getByRole("button", { name: "Create service account" }).click();
    const dialog = page.getByRole("dialog", { name: "Create service account" });
    // Untouched, Escape closes it.
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "hidden" });

    await page.getByRole("button", { name: "Create service account" }).click();
    await dialog.getByRole("textbox").first().fill("ci-deployer");
    await page.keyboard.press("Escape");
    const ask = dialog.getByTestId("discard-confirm");
    await ask.waitFor();
    assert.equal((await focused(page)).text, "Keep editing");
    // Escape again keeps editing (a second Escape must not slip past the question either).
    await page.keyboard.press("Escape");
    await ask.waitFor({ state: "hidden" });
    assert.ok(await dialog.isVisible());
    assert.equal(await dialog.getByRole("textbox").first().inputValue(), "ci-deployer");
    // The × asks as well; Discard closes.
    await dialog.getByRole("button", { name: "Close" }).click();
    await dialog.getByRole("button", { name: "Discard" }).click();
    await dialog.waitFor({ state: "hidden" });
    assert.deepEqual(problems, []);
  });
});
