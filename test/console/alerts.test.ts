import assert from "node:assert/strict";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
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
import { type SeededProject, startTestApp, type TestApp } from "../../packages/server/testing/harness.ts";
import { pushAll, rwSeries } from "../../packages/server/testing/remote-write.ts";

const [sqlite] = await testDialects();
const skip = browserUnavailable();
const S = 1000;

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(tmpdir(), `svc-console-alerts-${name}.png`), fullPage: true });
}

/** SaveAlertRule bodies the page sent (the console's transport speaks Connect JSON). */
function recordSaves(page: Page): { requestId: string; expectedVersion: string; id: string }[] {
  const saves: { requestId: string; expectedVersion: string; id: string }[] = [];
  page.on("request", (r) => {
    if (!r.url().endsWith("/svc.monitoring.v1.AlertService/SaveAlertRule")) return;
    const body = JSON.parse(r.postData() ?? "{}") as Record<string, string>;
    saves.push({ requestId: body.requestId, expectedVersion: body.expectedVersion ?? "0", id: body.id });
  });
  return saves;
}

describe("console in Chromium: alert rules, the preview on the chart, versions and conflicts", {
  skip,
}, () => {
  let t: TestApp;
  let browser: Browser;
  let p: SeededProject;
  let vmA: string;
  let vmB: string;
  before(async () => {
    buildConsole();
    t = await startTestApp(sqlite.dialect, { consoleDir: CONSOLE_DIST }, { wallClock: true });
    browser = await launchBrowser();
    p = await t.seedProject("alerting", ["web-a", "web-b"]);
    [vmA, vmB] = p.vms;
    // 55 minutes of hypervisor telemetry through the real remote-write endpoint, every 30 s on 2 vCPUs.
    // web-a runs at 97 % for two 10-minute episodes (each fires once with "for 5 min") and breaches
    // again for the last 3 minutes (pending at the end); web-b stays at 20 %.
    const now = Math.floor(Date.now() / (30 * S)) * 30 * S;
    const t0 = now - 55 * 60 * S;
    const utilA = (ts: number) => {
      const ago = (now - ts) / (60 * S);
      return (ago <= 50 && ago > 40) || (ago <= 25 && ago > 15) || ago <= 3 ? 97 : 30;
    };
    const series = (vm: string, util: (ts: number) => number) => {
      const cpu: [number, number][] = [];
      const vcpus: [number, number][] = [];
      let c = 1000;
      for (let ts = t0; ts <= now; ts += 30 * S) {
        if (ts > t0) c += (util(ts) / 100) * 30 * 2;
        cpu.push([ts, c]);
        vcpus.push([ts, 2]);
      }
      return [rwSeries("svc_vm_cpu_seconds_total", { vm }, cpu), rwSeries("svc_vm_vcpus", { vm }, vcpus)];
    };
    await pushAll(t.baseUrl, t.app.config.collectorToken, [...series(vmA, utilA), ...series(vmB, () => 20)]);
  });
  after(async () => {
    await browser?.close();
    await t?.close();
  });

  it("creates a rule from the CPU template, previews it on the chart, edits it in two tabs, and deletes it", async () => {
    const owner = t.clients(p.owner.session);
    const { page, problems } = await openPage(browser);
    const saves = recordSaves(page);
    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);
    await page.getByRole("link", { name: "Alert rules" }).click();
    await page.getByText("No alert rules yet.").waitFor();

    // New rule → the CPU template fills the form.
    await page.getByRole("button", { name: "New rule" }).click();
    await page.getByTestId("alert-templates").locator("[data-template=cpu]").click();
    await page.waitForURL(/\/projects\/alerting\/alerts\/new\?template=cpu$/);
    const form = page.getByTestId("alert-form");
    assert.equal(await form.locator("input[name=displayName]").inputValue(), "High CPU utilization");
    assert.equal(await form.locator("select[name=metricId]").inputValue(), "cpu_utilization_pct");
    assert.equal(await form.locator("select[name=operator]").inputValue(), "GREATER_THAN");
    assert.equal(await form.locator("input[name=threshold]").inputValue(), "90");
    assert.equal(await form.locator("input[name=sustainedSeconds]").inputValue(), "300");
    await form.locator("input[name=displayName]").fill("CPU on web servers");

    // The preview over the last hour, drawn for web-a: its shaded intervals are the RPC's answer.
    const preview = page.getByTestId("alert-preview");
    await preview.getByLabel("Preview window").selectOption("3600");
    await preview.getByRole("button", { name: "Preview", exact: true }).click();
    await preview.getByTestId("preview-result").waitFor();
    const rpc = await owner.alerts.previewAlertRule({
      projectName: p.projectName,
      historySeconds: 3600,
      spec: {
        displayName: "CPU on web servers",
        metricId: "cpu_utilization_pct",
        operator: "GREATER_THAN",
        threshold: 90,
        sustainedSeconds: 300,
        severity: "WARNING",
        allVms: true,
        repeatIntervalSeconds: 3600,
      },
    });
    assert.equal(rpc.queryStatus, "OK");
    const rpcA = rpc.instances.find((i) => i.vmName === vmA);
    const rpcB = rpc.instances.find((i) => i.vmName === vmB);
    assert.ok(rpcA && rpcB);
    assert.equal(rpcA.firingIntervals.length, 2, "two episodes of 10 minutes fire once each");
    assert.equal(rpcA.finalState, "PENDING");
    assert.equal(rpcB.firingIntervals.length, 0);

    // It opens on the instance that fires most, listed first.
    assert.equal(await preview.getByLabel("Preview instance").inputValue(), `${vmA}|`);
    const chart = preview.getByTestId("preview-chart");
    await chart.locator("canvas").first().waitFor();
    assert.equal(await chart.getAttribute("data-intervals"), String(rpcA.firingIntervals.length));
    assert.ok(Number(await chart.getAttribute("data-points")) > 60, "the metric's history is drawn");
    assert.equal(
      await preview.getByTestId("preview-firing-count").textContent(),
      `Would have fired ${rpcA.firingIntervals.length} times`,
    );
    assert.equal(await preview.getByTestId("preview-intervals").locator("li").count(), 2);
    assert.equal(await preview.getByTestId("preview-firing-instances").textContent(), "1 of 2 instances");
    const rows = preview.getByTestId("preview-instances").locator("tbody tr");
    assert.equal(await rows.count(), 2);
    assert.equal(await rows.locator(`[data-testid=preview-instance-fires]`).first().isVisible(), true);
    assert.equal(
      (
        await preview.getByTestId("preview-instances").locator(`tr[data-vm="${vmA}"] td`).nth(1).textContent()
      )?.trim(),
      "2 times",
    );
    // 55 minutes of data in a 60-minute window: the preview says the history is partial.
    if (rpc.historyStatus === "PARTIAL")
      await preview.getByTestId("preview-status").getByText("Partial history").waitFor();
    await shot(page, "preview");

    // Switch to web-b: nothing shaded.
    await preview.getByLabel("Preview instance").selectOption(`${vmB}|`);
    await preview.getByTestId("preview-firing-count").getByText("Would have fired 0 times").waitFor();
    assert.equal(await preview.getByTestId("preview-chart").getAttribute("data-intervals"), "0");

    // Changing the form marks the preview outdated.
    await form.locator("input[name=threshold]").fill("95");
    await preview.getByTestId("preview-outdated").waitFor();
    await form.locator("input[name=threshold]").fill("90");
    // A new run opens on the instance that fires most again, not on the one looked at last.
    await preview.getByRole("button", { name: "Preview again", exact: true }).click();
    await preview.getByTestId("preview-firing-count").getByText("Would have fired 2 times").waitFor();
    assert.equal(await preview.getByLabel("Preview instance").inputValue(), `${vmA}|`);
    assert.equal(await rows.first().getAttribute("data-vm"), vmA);

    // Create: version 1, then the evaluator applies it (the save nudges it) → APPLIED.
    await page.getByRole("button", { name: "Create rule" }).click();
    await page.getByTestId("alert-notice").getByText("Saved version 1.").waitFor();
    assert.match(page.url(), /\/projects\/alerting\/alerts\/[0-9a-f-]{36}$/);
    const ruleId = page.url().split("/").pop() ?? "";
    const ruleName = `${p.projectName}/alertRules/${ruleId}`;
    await page.getByTestId("alert-version").getByText("1", { exact: true }).waitFor();
    await page.getByTestId("alert-sync").getByText("applied").waitFor();
    assert.equal(saves.length, 1);
    assert.equal(saves[0].expectedVersion, "0");
    assert.equal(saves[0].id, ruleId);

    // One evaluation: web-a is breaching (pending) and appears in the instances table.
    await t.app.evaluator.runCycle();
    await page.reload();
    const instances = page.getByTestId("alert-instances");
    await instances.waitFor();
    const instA = instances.locator("tbody tr", { hasText: "web-a" });
    await instA.getByText("pending").waitFor();
    // Every watched instance is listed, not only the stored one: web-b (inactive with data, so not
    // stored) has its row, its last value a dash; as many rows as "Watching" counts.
    const instB = instances.locator(`tbody tr[data-vm="${vmB}"]`);
    await instB.getByText("inactive", { exact: true }).waitFor();
    assert.equal((await instB.locator("td").nth(4).textContent())?.trim(), "—");
    assert.equal(await instances.locator("tbody tr").count(), 2);
    assert.match(
      (await page
        .getByText(/^\d+ instances?$/)
        .first()
        .textContent()) ?? "",
      /^2 instances$/,
    );
    await shot(page, "rule");

    // The saved rule's preview (issue 43, item 6): its firings all came before the rule existed, and its
    // chart marks the moment it was created.
    const saved = page.getByTestId("alert-preview");
    await saved.getByRole("button", { name: "Preview", exact: true }).click();
    await saved
      .getByTestId("preview-firing-count")
      .getByText(/^Would have fired 2 times/)
      .waitFor();
    assert.equal(
      (await saved.getByTestId("preview-before-rule").textContent())?.trim(),
      "(2 before this rule existed)",
    );
    // Its chart marks when the rule was created (at the right edge when newer than the window's last step).
    await saved
      .getByTestId("chart-marker")
      .getByText(/This rule was created /)
      .waitFor();

    // The list: name, condition in words, version and sync status.
    await page.getByRole("link", { name: "Alert rules" }).first().click();
    const row = page.getByTestId("alert-rules").locator(`tr[data-rule="${ruleId}"]`);
    await row.waitFor();
    assert.equal(await row.locator("a.alert-rule-name").textContent(), "CPU on web servers");
    assert.equal(await row.getByTestId("alert-rule-condition").textContent(), "CPU > 90 % for 5 min");
    assert.equal(await row.getByTestId("alert-rule-version").textContent(), "v1");
    await row.getByTestId("alert-rule-sync").getByText("applied").waitFor();
    await row.getByTestId("alert-rule-counts").getByText("1 pending").waitFor();
    await shot(page, "list");

    // Two tabs open version 1.
    const second = await openPage(browser);
    const saves2 = recordSaves(second.page);
    await signIn(second.page, t.baseUrl, p.owner.email, p.owner.password);
    await page.goto(`${t.baseUrl}/projects/alerting/alerts/${ruleId}`);
    await second.page.goto(`${t.baseUrl}/projects/alerting/alerts/${ruleId}`);
    const form1 = page.getByTestId("alert-form");
    const form2 = second.page.getByTestId("alert-form");
    await form1.waitFor();
    await form2.waitFor();

    // Tab 1 saves version 2 (threshold 85).
    await form1.locator("input[name=threshold]").fill("85");
    await page.getByRole("button", { name: "Save", exact: true }).click();
    await page.getByTestId("alert-notice").getByText("Saved version 2.").waitFor();

    // Tab 2, still on version 1, renames and saves: refused, and explained.
    await form2.locator("input[name=displayName]").fill("CPU on the web tier");
    await second.page.getByRole("button", { name: "Save", exact: true }).click();
    const conflict = second.page.getByTestId("alert-conflict");
    await conflict.waitFor();
    assert.equal(await conflict.getByTestId("alert-conflict-version").textContent(), "2");
    assert.match(
      (await conflict.getByTestId("alert-conflict-text").textContent()) ?? "",
      /Someone saved version 2 since you opened version 1/,
    );
    // What they changed: the threshold 90 → 85, next to this tab's own value.
    const diff = conflict.getByTestId("alert-conflict-diff").locator("tbody tr", { hasText: "Threshold" });
    await diff.waitFor();
    assert.deepEqual(
      (await diff.locator("td").allTextContents()).map((s) => s.trim()),
      ["Threshold", "90 %", "85 %", "90 %"],
    );
    // And this tab's own edit beside it.
    const mine = conflict.getByTestId("alert-conflict-diff").locator("tbody tr", { hasText: "Display name" });
    assert.deepEqual(
      (await mine.locator("td").allTextContents()).map((s) => s.trim()),
      ["Display name", "CPU on web servers", "CPU on web servers", "CPU on the web tier"],
    );
    await shot(second.page, "conflict");

    // Reloading their version resolves it: the form shows version 2, and the next save is version 3.
    await conflict.getByRole("button", { name: "Load version 2 (discard my edits)" }).click();
    await second.page.getByTestId("alert-notice").getByText("Loaded version 2.", { exact: false }).waitFor();
    assert.equal(await form2.locator("input[name=threshold]").inputValue(), "85");
    assert.equal(await form2.locator("input[name=displayName]").inputValue(), "CPU on web servers");
    await form2.locator("select[name=severity]").selectOption("CRITICAL");
    await second.page.getByRole("button", { name: "Save", exact: true }).click();
    await second.page.getByTestId("alert-notice").getByText("Saved version 3.").waitFor();

    // Tab 1 (on version 2) saves again: the conflict names version 3, and it overwrites on purpose.
    await form1.locator("input[name=sustainedSeconds]").fill("600");
    await page.getByRole("button", { name: "Save", exact: true }).click();
    const conflict1 = page.getByTestId("alert-conflict");
    await conflict1.getByTestId("alert-conflict-version").getByText("3").waitFor();
    await conflict1.getByRole("button", { name: "Overwrite with my edits" }).click();
    await page.getByTestId("alert-notice").getByText("Saved version 4.").waitFor();
    const v4 = await owner.alerts.getAlertRule({ name: ruleName });
    assert.equal(v4.version, "4");
    assert.equal(v4.spec?.sustainedSeconds, 600);
    assert.equal(v4.spec?.severity, "WARNING", "the overwrite saved this tab's form, as it said");

    // Every save action had its own request id, each against the version its form was loaded from.
    const all = [...saves, ...saves2];
    assert.equal(new Set(all.map((s) => s.requestId)).size, all.length);
    assert.deepEqual(
      saves.map((s) => s.expectedVersion),
      ["0", "1", "2", "3"],
    );
    assert.deepEqual(
      saves2.map((s) => s.expectedVersion),
      ["1", "2"],
    );

    // A save whose answer is lost on the way back: the page retries with the same request id, and the
    // server answers with the revision it already wrote instead of writing a second one.
    await page.route(
      "**/svc.monitoring.v1.AlertService/SaveAlertRule",
      async (route) => {
        await route.fetch();
        await route.abort("failed");
      },
      { times: 1 },
    );
    await form1.getByRole("checkbox", { name: /Enabled/ }).uncheck();
    await page.getByRole("button", { name: "Save", exact: true }).click();
    await page
      .getByTestId("alert-notice")
      .getByText("Saved version 5 (the server had already accepted this save).")
      .waitFor();
    assert.equal(saves.length, 6);
    assert.equal(saves[4].requestId, saves[5].requestId, "the retry reuses the lost attempt's request id");
    assert.equal(saves[5].expectedVersion, "4");
    const v5 = await owner.alerts.getAlertRule({ name: ruleName });
    assert.equal(v5.version, "5");
    assert.equal(v5.spec?.enabled, false);

    // A value the server refuses: the message sits next to the field it names.
    await form1.locator("input[name=sustainedSeconds]").fill("90000");
    await page.getByRole("button", { name: "Save", exact: true }).click();
    const fieldError = form1.locator("label.field", { has: page.locator("input[name=sustainedSeconds]") });
    await fieldError.locator(".field-error").getByText("must be at most 86400").waitFor();
    await page.getByTestId("alert-save-error").waitFor();
    await shot(page, "field-error");
    assert.equal((await owner.alerts.getAlertRule({ name: ruleName })).version, "5");

    // Fixing the field clears its message.
    await form1.locator("input[name=sustainedSeconds]").fill("600");
    await fieldError.locator(".field-error").waitFor({ state: "detached" });

    // Delete, with confirmation, against the version the form holds.
    await page.getByRole("button", { name: "Delete rule" }).click();
    const dialog = page.getByTestId("alert-delete-dialog");
    await dialog.getByText("will stop being evaluated").waitFor();
    await dialog.getByRole("button", { name: "Delete rule" }).click();
    await page.waitForURL(/\/projects\/alerting\/alerts$/);
    await page.getByText("No alert rules yet.").waitFor();
    assert.equal((await owner.alerts.listAlertRules({ projectName: p.projectName })).rules.length, 0);

    assert.deepEqual(problems, []);
    assert.deepEqual(second.problems, []);
    await second.page.context().close();
  });

  it("offers a forecast on memory and filesystem rules, names a wrong bound before saving, and saves it", async () => {
    const { page, problems } = await openPage(browser);
    const saves: Record<string, unknown>[] = [];
    page.on("request", (r) => {
      if (r.url().endsWith("/svc.monitoring.v1.AlertService/SaveAlertRule"))
        saves.push(JSON.parse(r.postData() ?? "{}").spec ?? {});
    });
    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);
    await page.goto(`${t.baseUrl}/projects/alerting/alerts/new`);
    const form = page.getByTestId("alert-form");
    await form.locator("input[name=displayName]").fill("Memory full within a day");
    // CPU has no forecast; guest memory has.
    assert.equal(await form.locator("select[name=metricId]").inputValue(), "cpu_utilization_pct");
    assert.equal(await page.getByTestId("alert-forecast").count(), 0);
    await form.locator("select[name=metricId]").selectOption("memory_used_pct");
    const forecast = page.getByTestId("alert-forecast");
    await forecast.getByRole("checkbox", { name: /Forecast/ }).check();
    assert.equal(await forecast.locator("input[name=forecastHorizonSeconds]").inputValue(), "86400");
    assert.equal(await forecast.locator("input[name=forecastLookbackSeconds]").inputValue(), "21600");
    await form.locator("input[name=threshold]").fill("90");

    // Out of the server's bounds: each field says what it takes, and nothing is sent.
    await forecast.locator("input[name=forecastHorizonSeconds]").fill("30");
    await forecast.locator("input[name=forecastLookbackSeconds]").fill("a day");
    await page.getByRole("button", { name: "Create rule" }).click();
    await forecast.getByText("must be a whole number of seconds from 60 (1 min) to 604800 (7 d)").waitFor();
    await forecast.getByText("must be a whole number of seconds from 300 (5 min) to 86400 (1 d)").waitFor();
    assert.equal(saves.length, 0);

    await forecast.locator("input[name=forecastHorizonSeconds]").fill("3600");
    await forecast.getByText("the value 1 h from each evaluation").waitFor();
    await forecast.locator("input[name=forecastLookbackSeconds]").fill("1800");
    await page.getByRole("button", { name: "Create rule" }).click();
    await page.getByTestId("alert-notice").getByText("Saved version 1.").waitFor();
    assert.equal(saves.length, 1);
    assert.equal(saves[0].forecastHorizonSeconds, 3600);
    assert.equal(saves[0].forecastLookbackSeconds, 1800);
    const id = page.url().split("/").pop() ?? "";
    const stored = await t.clients(p.owner.session).alerts.getAlertRule({
      name: `${p.projectName}/alertRules/${id}`,
    });
    assert.equal(stored.spec?.forecastHorizonSeconds, 3600);
    assert.equal(stored.spec?.forecastLookbackSeconds, 1800);

    // Reloaded, the form shows the stored forecast; a metric without forecasts drops it from the save.
    await page.reload();
    assert.equal(await forecast.getByRole("checkbox", { name: /Forecast/ }).isChecked(), true);
    assert.equal(await forecast.locator("input[name=forecastHorizonSeconds]").inputValue(), "3600");
    await form.locator("select[name=metricId]").selectOption("cpu_utilization_pct");
    assert.equal(await page.getByTestId("alert-forecast").count(), 0);
    await page.getByRole("button", { name: "Save", exact: true }).click();
    await page.getByTestId("alert-notice").getByText("Saved version 2.").waitFor();
    assert.equal(saves[1].forecastHorizonSeconds ?? 0, 0);
    assert.equal(saves[1].forecastLookbackSeconds ?? 0, 0);
    assert.deepEqual(problems, []);
    await page.context().close();
  });

  it("shows a viewer the rule read-only, with the preview still available", async () => {
    const owner = t.clients(p.owner.session);
    const id = crypto.randomUUID();
    const r = await owner.alerts.saveAlertRule({
      projectName: p.projectName,
      id,
      requestId: crypto.randomUUID(),
      expectedVersion: "0",
      spec: {
        displayName: "Memory high",
        metricId: "memory_used_pct",
        operator: "GREATER_THAN",
        threshold: 95,
        sustainedSeconds: 600,
        severity: "WARNING",
        allVms: false,
        vmNames: [vmA],
        repeatIntervalSeconds: 0,
      },
    });
    const email = "viewer-alerts@example.com";
    const password = `pw-${crypto.randomUUID()}`;
    const user = await t.admin.users.createUser({ email, password, displayName: "Viewer" });
    await t.admin.projects.setMember({ project: p.projectName, user: user.name, role: "viewer" });

    const { page, problems } = await openPage(browser);
    await signIn(page, t.baseUrl, email, password);
    await page.goto(`${t.baseUrl}/projects/alerting/alerts`);
    const row = page.getByTestId("alert-rules").locator(`tr[data-rule="${id}"]`);
    await row.waitFor();
    assert.equal(await row.getByTestId("alert-rule-condition").textContent(), "Memory > 95 % for 10 min");
    assert.equal(await page.getByRole("button", { name: "New rule" }).count(), 0);
    await row.locator("a.alert-rule-name").click();
    const form = page.getByTestId("alert-form");
    await form.waitFor();
    assert.equal(await form.locator("input[name=displayName]").inputValue(), "Memory high");
    assert.equal(await form.locator("input[name=displayName]").isDisabled(), true);
    assert.equal(await form.locator("input[name=threshold]").isDisabled(), true);
    assert.equal(await page.getByRole("button", { name: "Save", exact: true }).count(), 0);
    assert.equal(await page.getByRole("button", { name: "Delete rule" }).count(), 0);
    // The selection shows the one VM.
    assert.equal(
      await form.getByTestId("alert-vm-picker").locator("input[type=checkbox]:checked").count(),
      1,
    );
    await page.getByTestId("alert-preview").getByRole("button", { name: "Preview", exact: true }).click();
    await page.getByTestId("preview-result").waitFor();
    assert.equal(await page.getByTestId("preview-instances").locator("tbody tr").count(), 1);
    assert.deepEqual(problems, []);
    await owner.alerts.deleteAlertRule({ name: r.name });
    await page.context().close();
  });
});
