/**
 * The walk (issue 27): signs in to a demo server and screenshots every console page, and the dialogs a
 * newcomer meets, at 390×844 (a phone) and 1440×900, into `.walk/` (git-ignored), for a person to LOOK
 * at. It also lists what a machine can see: a page wider than the window, a dialog past its edge, a page
 * error, a failed call. docs/console.md keeps the table of the last walk.
 *
 *   npm run walk:console                                  # starts `npm start`'s demo in a temporary dir
 *   npm run walk:console -- --data-dir .data              # a running `npm start` (its demo credentials)
 *   npm run walk:console -- --only 390 --out /tmp/walk    # one width; another folder
 *
 * Not a test: the screenshots are the result. It adds to the demo what the demo does not have yet, through
 * the public API with the demo's write key (a rule that fires at once, so there are incidents; a
 * silence) and through the console itself (a key, whose secret dialog is photographed, and a CI trust).
 */
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import type { DemoCredentials } from "../../packages/server/src/demo.ts";
import { buildConsole, launchBrowser } from "../../packages/server/testing/browser.ts";
import { type ServerProcess, startServerProcess } from "../../packages/server/testing/server-process.ts";

const arg = (name: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const OUT = arg("out") ?? join(import.meta.dirname, "..", "..", ".walk");
const WIDTHS: { name: string; width: number; height: number }[] = [
  { name: "390", width: 390, height: 844 },
  { name: "1440", width: 1440, height: 900 },
].filter((v) => !arg("only") || v.name === arg("only"));

/** Everything the walk noticed without a person: the page wider than the window and the like. */
const findings: string[] = [];

async function rpc(c: DemoCredentials, method: string, body: unknown): Promise<Record<string, unknown>> {
  const r = await fetch(`${c.baseUrl}/${method}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "connect-protocol-version": "1",
      authorization: `Bearer ${c.writeKey}`,
    },
    body: JSON.stringify(body),
  });
  const json = (await r.json()) as Record<string, unknown>;
  if (!r.ok) throw new Error(`${method}: ${r.status} ${JSON.stringify(json)}`);
  return json;
}

/** A rule every demo VM above 1 % CPU breaks at once, and a silence: incidents and silences to look at. */
async function addData(c: DemoCredentials): Promise<void> {
  const rules = (await rpc(c, "svc.monitoring.v1.AlertService/ListAlertRules", {
    projectName: c.projectName,
  })) as { rules?: { spec?: { displayName?: string }; name: string }[] };
  let walk = rules.rules?.find((r) => r.spec?.displayName === "Walk: CPU above 1 %");
  if (!walk) {
    walk = (await rpc(c, "svc.monitoring.v1.AlertService/SaveAlertRule", {
      projectName: c.projectName,
      id: randomUUID(),
      requestId: randomUUID(),
      expectedVersion: "0",
      spec: {
        displayName: "Walk: CPU above 1 %",
        metricId: "cpu_utilization_pct",
        operator: "GREATER_THAN",
        threshold: 1,
        sustainedSeconds: 0,
        severity: "WARNING",
        allVms: true,
        destinationNames: [],
      },
    })) as { name: string };
  }
  const silences = (await rpc(c, "svc.monitoring.v1.SilenceService/ListSilences", {
    projectName: c.projectName,
  })) as { silences?: unknown[] };
  if (!silences.silences?.length) {
    // The demo's write key (Alert manager) may not carry silences.write: then the walk goes on without one,
    // and silences an incident through the console below.
    await rpc(c, "svc.monitoring.v1.SilenceService/CreateSilence", {
      projectName: c.projectName,
      requestId: randomUUID(),
      startTimeUnix: "0",
      endTimeUnix: String(Math.floor(Date.now() / 1000) + 2 * 3600),
      comment: "Walk: planned maintenance of the web tier",
      ruleNames: [walk.name],
      vmNames: [],
    }).catch((e: Error) => findings.push(`no silence made: ${e.message.slice(0, 120)}`));
  }
  // The evaluator opens the incidents within a cycle or two.
  for (let i = 0; i < 90; i++) {
    const r = (await rpc(c, "svc.monitoring.v1.IncidentService/ListIncidents", {
      projectName: c.projectName,
    })) as { incidents?: unknown[] };
    if ((r.incidents?.length ?? 0) > 0) return;
    await new Promise((r) => setTimeout(r, 2000));
  }
  findings.push("no incident opened within 3 minutes: the incident pages show none");
}

/** What makes a page scroll sideways or cuts a dialog off, as demo.test.ts checks it. */
async function overflow(page: Page, where: string): Promise<void> {
  const r = (await page.evaluate(`(() => {
    const w = document.documentElement.clientWidth;
    const d = document.querySelector("dialog[open]");
    const wide = [...document.querySelectorAll("main *")]
      .filter((e) => { const b = e.getBoundingClientRect(); return b.width > 0 && b.right > w + 1 && !e.closest(".table-wrap, .access-table-wrap, .scroll-x, [data-scroll]") && getComputedStyle(e).position !== "fixed"; })
      .slice(0, 3).map((e) => e.tagName.toLowerCase() + (e.className && typeof e.className === "string" ? "." + e.className.split(" ").join(".") : ""));
    return { w, page: document.documentElement.scrollWidth, dialog: d ? Math.ceil(d.getBoundingClientRect().right) : 0, wide };
  })()`)) as { w: number; page: number; dialog: number; wide: string[] };
  if (r.page > r.w)
    findings.push(`${where}: the page is ${r.page} px wide in ${r.w} px (${r.wide.join(", ")})`);
  if (r.dialog > r.w) findings.push(`${where}: the dialog reaches ${r.dialog} px in ${r.w} px`);
}

async function settle(page: Page): Promise<void> {
  await page.waitForLoadState("networkidle").catch(() => {});
  // Charts are drawn once their data arrived, and resized on the next frame.
  await page.waitForTimeout(300);
}

async function shot(page: Page, dir: string, name: string, full = true): Promise<void> {
  await overflow(page, `${dir}/${name}`);
  await page.screenshot({ path: join(OUT, dir, `${name}.png`), fullPage: full });
  process.stdout.write(`  ${dir}/${name}.png\n`);
}

/** Clicks the first button named `name` in `scope` (default the page's main), if there is one. */
async function click(page: Page, name: string | RegExp, scope = "main"): Promise<boolean> {
  const b = page.locator(scope).getByRole("button", { name }).first();
  if ((await b.count()) === 0 || !(await b.isVisible())) {
    findings.push(`${page.url()}: no button ${name}`);
    return false;
  }
  await b.click();
  return true;
}

async function closeDialog(page: Page): Promise<void> {
  const d = page.locator("dialog[open]");
  if ((await d.count()) === 0) return;
  await page.keyboard.press("Escape");
  const confirm = page.locator("dialog[open]").getByRole("button", { name: /^Discard/ });
  if ((await confirm.count()) > 0) await confirm.first().click();
  await d
    .first()
    .waitFor({ state: "hidden", timeout: 3000 })
    .catch(() => {});
}

/** The first link under `list` (e.g. /projects/demo/alerts/…) on that list's page, or undefined. */
async function firstLink(page: Page, base: string, list: string): Promise<string | undefined> {
  await page.goto(`${base}/projects/demo/${list}`);
  await settle(page);
  const hrefs = await page
    .locator(`main a[href^="/projects/demo/${list}/"]`)
    .evaluateAll((as) => as.map((a) => a.getAttribute("href") ?? ""));
  return hrefs[0];
}

async function walk(browser: Browser, c: DemoCredentials, v: (typeof WIDTHS)[number]): Promise<void> {
  const dir = v.name;
  mkdirSync(join(OUT, dir), { recursive: true });
  const context = await browser.newContext({ viewport: { width: v.width, height: v.height } });
  const page = await context.newPage();
  page.on("pageerror", (e) => findings.push(`${dir} ${page.url()}: page error ${e.message}`));
  page.on("response", (r) => {
    if (r.status() >= 400) findings.push(`${dir} ${page.url()}: ${r.status()} ${new URL(r.url()).pathname}`);
  });
  const base = c.baseUrl;
  await page.goto(`${base}/`);
  await page.getByRole("button", { name: "Sign in" }).waitFor();
  await shot(page, dir, "00-sign-in", false);
  await page.getByLabel("Email").fill(c.consoleEmail);
  await page.getByLabel("Password").fill(c.consolePassword);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("navigation", { name: "Console" }).waitFor();

  const pages: [string, string][] = [
    ["01-vms", "vms"],
    ["02-vm", "vms/dc-1/web-1"],
    ["04-alerts", "alerts"],
    ["07-incidents", "incidents"],
    ["09-silences", "silences"],
    ["10-destinations", "destinations"],
    ["12-keys", "keys"],
    ["14-service-accounts", "service-accounts"],
    ["15-ci-trusts", "ci-trusts"],
    ["17-activity", "activity"],
    ["18-connect", "connect"],
  ];
  for (const [name, path] of pages) {
    await page.goto(`${base}/projects/demo/${path}`);
    await page.getByRole("heading", { level: 1 }).first().waitFor();
    if (path.startsWith("vms/")) await page.getByTestId("chart-cpu").locator("canvas").first().waitFor();
    await settle(page);
    await shot(page, dir, name);
  }

  if (v.width < 700) {
    await page.goto(`${base}/projects/demo/vms`);
    await settle(page);
    await page.getByRole("button", { name: "Menu" }).click();
    await shot(page, dir, "01b-menu", false);
    await page.getByRole("button", { name: "Close menu" }).click();
  }

  // The VM page over 7 days.
  await page.goto(`${base}/projects/demo/vms/dc-1/web-1?range=7d`);
  await settle(page);
  await shot(page, dir, "03-vm-7d");

  // A rule, the new-rule dialog and its preview.
  const rule = await firstLink(page, base, "alerts");
  if (rule) {
    await page.goto(`${base}${rule}`);
    await settle(page);
    await shot(page, dir, "05-rule");
  }
  await page.goto(`${base}/projects/demo/alerts`);
  await settle(page);
  if (await click(page, /^New rule/)) {
    await page.locator("dialog[open]").waitFor();
    await settle(page);
    await shot(page, dir, "06-rule-new", false);
    const first = page.locator("dialog[open]").getByRole("button").filter({ hasText: /CPU/ }).first();
    if ((await first.count()) > 0) {
      await first.click();
      await settle(page);
    }
    await shot(page, dir, "06b-rule-new-template");
    await closeDialog(page);
  }
  // A blank rule on guest memory with its forecast ticked.
  await page.goto(`${base}/projects/demo/alerts/new`);
  const form = page.getByTestId("alert-form");
  await form.locator("select[name=metricId]").selectOption("memory_used_pct");
  await page
    .getByTestId("alert-forecast")
    .getByRole("checkbox", { name: /Forecast/ })
    .check();
  await settle(page);
  await shot(page, dir, "06c-rule-new-forecast");

  // An incident.
  const incident = await firstLink(page, base, "incidents");
  if (incident) {
    await page.goto(`${base}${incident}`);
    await settle(page);
    await shot(page, dir, "08-incident");
    // Silence it from its page (issue 43, item 3): the dialog with its matchers filled in and a preset.
    if (await click(page, "Silence…")) {
      const dialog = page.locator("dialog[open]");
      await dialog.waitFor();
      await dialog.getByRole("button", { name: "4 hours" }).click();
      await dialog.getByLabel("Comment").fill("Walk: deploying the web tier");
      await shot(page, dir, "08b-incident-silence", false);
      await dialog.getByRole("button", { name: "Create silence" }).click();
      await dialog.waitFor({ state: "hidden" });
      await settle(page);
      await shot(page, dir, "08c-incident-silenced");
      await page.goto(`${base}/projects/demo/incidents`);
      await settle(page);
      await shot(page, dir, "07b-incidents-silenced");
    }
  }

  // A destination, and the new-destination dialog with the member picker of an email destination.
  const destination = await firstLink(page, base, "destinations");
  if (destination) {
    await page.goto(`${base}${destination}`);
    await settle(page);
    await shot(page, dir, "11-destination");
  }
  await page.goto(`${base}/projects/demo/destinations`);
  await settle(page);
  if (await click(page, /^New destination/)) {
    const dialog = page.locator("dialog[open]");
    await dialog.waitFor();
    const email = dialog.getByText("Email", { exact: true }).first();
    if ((await email.count()) > 0) await email.click();
    else findings.push(`${dir}: no Email kind in the new-destination dialog`);
    await settle(page);
    await shot(page, dir, "11b-destination-new-members", false);
    // PagerDuty (issue 43, item 8): its integration key and optional endpoint.
    await dialog.locator(".segmented label", { hasText: /^PagerDuty$/ }).click();
    await settle(page);
    await shot(page, dir, "11c-destination-new-pagerduty", false);
    await closeDialog(page);
  }

  // A new key: the form, then its once-shown secret.
  await page.goto(`${base}/projects/demo/keys`);
  await settle(page);
  if (await click(page, /^Create key/)) {
    const dialog = page.locator("dialog[open]");
    await dialog.waitFor();
    await shot(page, dir, "13-key-new", false);
    await dialog
      .getByLabel(/^Name/)
      .first()
      .fill(`walk ${dir}`)
      .catch(() => {});
    await dialog.getByRole("button", { name: /^Create key/ }).click();
    await page.getByRole("button", { name: /I have stored it/ }).waitFor({ timeout: 10_000 });
    await settle(page);
    await shot(page, dir, "13b-key-secret", false);
    await page.getByRole("button", { name: /I have stored it/ }).click();
  }

  // A CI trust setup.
  await page.goto(`${base}/projects/demo/ci-trusts`);
  await settle(page);
  const setUp = page.getByRole("main").getByRole("button", { name: /^(Set up|New|Start|Add)/ });
  if ((await setUp.count()) > 0) {
    await setUp.first().click();
    const dialog = page.locator("dialog[open]");
    await dialog.waitFor();
    await settle(page);
    await shot(page, dir, "16-ci-trust-new", false);
    // Through to the verification step: the copy-paste workflow with the server's origin.
    await dialog.getByLabel("Repository").fill(`acme/deploy-${dir}`);
    await dialog.getByLabel("Workflow file").fill(".github/workflows/svc-monitoring.yml");
    await dialog.getByRole("button", { name: "Start setup" }).click();
    await dialog
      .waitFor({ state: "hidden", timeout: 10_000 })
      .catch(() => findings.push(`${dir}: the CI trust dialog stayed open after Start setup`));
    await settle(page);
    await shot(page, dir, "16b-ci-trust-verify");
  } else findings.push(`${dir}: no button to set up a CI trust`);

  await context.close();
}

async function main(): Promise<void> {
  buildConsole();
  rmSync(OUT, { recursive: true, force: true });
  mkdirSync(OUT, { recursive: true });
  let server: ServerProcess | undefined;
  let tmp: string | undefined;
  let dataDir = arg("data-dir");
  if (!dataDir) {
    tmp = mkdtempSync(join(tmpdir(), "svc-walk-"));
    dataDir = tmp;
    process.stdout.write("starting the demo (npm start) with 24 h of data…\n");
    server = await startServerProcess({
      env: { ...process.env, PORT: "0", SVC_DATA_DIR: dataDir, SVC_LOG_LEVEL: "warn" },
      ready: /simulated load:/,
      timeoutMs: 240_000,
    });
  }
  const browser = await launchBrowser();
  try {
    const c = JSON.parse(readFileSync(join(dataDir, "demo-credentials.json"), "utf8")) as DemoCredentials;
    await addData(c);
    for (const v of WIDTHS) {
      process.stdout.write(`${v.width}×${v.height}:\n`);
      await walk(browser, c, v);
    }
  } finally {
    await browser.close();
    server?.child.kill("SIGTERM");
    await server?.exited;
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  }
  process.stdout.write(
    findings.length ? `\nnoticed:\n${findings.map((f) => `  - ${f}`).join("\n")}\n` : "\nnothing noticed\n",
  );
  process.stdout.write(`screenshots in ${OUT}\n`);
}

await main();
