import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { verifyWebhook } from "@svc/sdk";
import { simpleParser } from "mailparser";
import type { Browser, Page } from "playwright-core";
import { SMTPServer } from "smtp-server";
import { labelsFromRecord } from "../../packages/server/src/storage/interface.ts";
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
import { type HttpsPeer, makeCertificate, startHttpsPeer } from "../../packages/server/testing/https-peer.ts";

const [sqlite] = await testDialects();
const skip = browserUnavailable();
const S = 1000;

/**
 * The incident and destination screens against a real server: a webhook destination created in the page
 * (its secret shown once), test sends delivered to a loopback HTTPS receiver and verified with the SDK, an
 * incident made by the evaluator from written samples and delivered by the dispatcher, acknowledge, snooze
 * and unsnooze through the page, a secret rotation with overlap 0, an email recipient verified with the
 * code from a real SMTP peer, the destination limit, and a viewer's read-only view.
 */
describe("console in Chromium: incidents and destinations", { skip }, () => {
  let t: TestApp;
  let browser: Browser;
  let peer: HttpsPeer;
  let smtp: SMTPServer;
  const inbox: { to: string[]; subject: string; text: string }[] = [];
  let p: SeededProject;
  let page: Page;
  let problems: string[];
  let base: string;
  // Shared by the steps, in order.
  let destination = "";
  let secret = "";
  let incident = "";

  before(async () => {
    const tls = makeCertificate();
    peer = await startHttpsPeer(tls);
    smtp = new SMTPServer({
      authOptional: true,
      disabledCommands: ["STARTTLS"],
      logger: false,
      onData(stream, session, done) {
        simpleParser(stream)
          .then((mail) => {
            inbox.push({
              to: session.envelope.rcptTo.map((r) => r.address),
              subject: mail.subject ?? "",
              text: mail.text ?? "",
            });
            done();
          })
          .catch(done);
      },
    });
    await new Promise<void>((r) => smtp.listen(0, "127.0.0.1", r));
    const smtpPort = (smtp.server.address() as AddressInfo).port;
    buildConsole();
    t = await startTestApp(
      sqlite.dialect,
      {
        consoleDir: CONSOLE_DIST,
        notify: {
          dispatcherAutoStart: false,
          ca: tls.cert,
          smtpUrl: `smtp://127.0.0.1:${smtpPort}`,
          options: { allowHosts: ["127.0.0.1"] },
        },
      },
      { wallClock: true },
    );
    browser = await launchBrowser();
    p = await t.seedProject("ops", ["web-1"]);
    ({ page, problems } = await openPage(browser));
    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);
    base = `${t.baseUrl}/projects/ops`;
  });
  after(async () => {
    await browser?.close();
    await t?.close();
    await peer?.close();
    await new Promise<void>((r) => (smtp ? smtp.close(() => r()) : r()));
  });

  const owner = () => t.clients(p.owner.session);

  it("creates a webhook destination whose secret is shown once, and a test send arrives signed and SENT", async () => {
    await page.goto(`${base}/destinations`);
    const table = page.getByTestId("destination-table");
    await table.getByText("In-app", { exact: true }).waitFor();
    await page.getByRole("button", { name: "New destination" }).click();
    const dialog = page.getByRole("dialog", { name: "New destination" });
    // The form checks before sending and keeps what was typed.
    await dialog.getByLabel("Name", { exact: true }).fill("Ops webhook");
    await dialog.getByLabel("Endpoint URL").fill("http://127.0.0.1/hook");
    await dialog.getByRole("button", { name: "Create destination" }).click();
    await dialog.getByText("Only https:// URLs are accepted.").waitFor();
    assert.equal(await dialog.getByLabel("Name", { exact: true }).inputValue(), "Ops webhook");
    await dialog.getByLabel("Endpoint URL").fill(`${peer.url}/hooks/console`);
    await dialog.getByRole("button", { name: "Create destination" }).click();
    const once = dialog.getByTestId("shown-once");
    await once.waitFor();
    secret = (await once.locator("code.secret").textContent()) ?? "";
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    await page.screenshot({ path: "/tmp/console-destination-created.png" });
    await once.getByRole("button", { name: "I have stored it" }).click();
    await page.waitForURL(/\/projects\/ops\/destinations\/[a-z0-9]+$/);
    destination = `projects/ops/destinations/${page.url().split("/").pop()}`;
    await page.getByTestId("destination-details").waitFor();
    // Never again: not after a reload, not on the list.
    await page.reload();
    await page.getByTestId("destination-details").getByText("current", { exact: true }).waitFor();
    assert.ok(!(await page.content()).includes(secret), "the secret is gone after a reload");
    assert.ok(!(await page.content()).includes("whsec_"));

    // A test send: the page shows the resulting delivery until the dispatcher has sent it.
    await page.getByRole("button", { name: "Send test" }).click();
    const result = page.getByTestId("test-result");
    await result.getByText("SENT", { exact: true }).first().waitFor();
    await result.getByTestId("attempts").getByText("HTTP 204").waitFor();
    assert.equal(peer.received.length, 1);
    const got = peer.received[0];
    assert.equal(got.path, "/hooks/console");
    const v = verifyWebhook(got.body, got.headers as Record<string, string>, secret);
    assert.equal((v.payload as { type: string }).type, "test");
    await result.getByText(v.deliveryId).waitFor();
    // The history lists it; expanding shows its attempt.
    const history = page.getByTestId("deliveries");
    const row = history.locator(`tr[data-delivery="${v.deliveryId}"]`);
    await row.getByText("SENT", { exact: true }).waitFor();
    await row.getByRole("button", { name: /Show attempts/ }).click();
    await history.getByTestId("attempts").getByText(v.attemptId).waitFor();
    await page.screenshot({ path: "/tmp/console-destination.png", fullPage: true });

    await page.goto(`${base}/destinations`);
    await table.locator('tr[data-destination="Ops webhook"]').getByText("Active").waitFor();
    assert.ok(!(await page.content()).includes(secret));
    await page.screenshot({ path: "/tmp/console-destinations.png" });
    assert.deepEqual(problems, []);
  });

  it("lists the incident and shows its timeline with the delivery; acknowledge, snooze 1 h and unsnooze", async () => {
    const now = Date.now();
    const rule = await owner().alerts.saveAlertRule({
      projectName: p.projectName,
      id: randomUUID(),
      requestId: randomUUID(),
      expectedVersion: "0",
      spec: {
        displayName: "CPU high",
        metricId: "cpu_utilization_pct",
        operator: "GREATER_THAN",
        threshold: 90,
        sustainedSeconds: 0,
        severity: "CRITICAL",
        allVms: true,
        destinationNames: [destination],
      },
    });
    const a = t.app.tsdb.appender();
    const labels = labelsFromRecord({
      __name__: "svc_vm_cpu_utilization_pct",
      project_id: "ops",
      vm: p.vms[0],
      vm_id: "web-1",
      location: "dc-1",
      source: "hypervisor",
    });
    for (let ts = now - 90 * S; ts <= now; ts += 30 * S) a.append(labels, ts, 97);
    await a.commit();
    await t.app.evaluator.runCycle(now);
    const [opened] = (await owner().incidents.listIncidents({ projectName: p.projectName, rule: rule.name }))
      .incidents;
    assert.ok(opened, "the evaluator opened an incident");
    incident = opened.name;
    const before = peer.received.length;
    await t.app.dispatcher.runOnce();
    assert.equal(peer.received.length, before + 1, "the incident was delivered to the webhook");

    await page.goto(`${base}/incidents`);
    const list = page.getByTestId("incident-table");
    const id = incident.split("/").pop() ?? "";
    const row = list.locator(`tr[data-incident="${id}"]`);
    await row.getByText("OPEN", { exact: true }).waitFor();
    await row.getByText("web-1").waitFor();
    await row.getByText("CRITICAL").waitFor();
    await row.getByText("Not acknowledged").waitFor();
    // The state filter asks the server: no resolved incident yet.
    await page.getByLabel("State").selectOption("RESOLVED");
    await page.getByText("No incident matches these filters.").waitFor();
    await page.getByLabel("State").selectOption("OPEN");
    await row.waitFor();
    await page.screenshot({ path: "/tmp/console-incidents.png" });

    await row.getByRole("link", { name: "CPU high" }).click();
    await page.waitForURL(new RegExp(`/projects/ops/incidents/${id}$`));
    const timeline = page.getByTestId("timeline");
    await timeline.locator('li[data-event="OPENED"]').getByText("by evaluator").waitFor();
    await timeline.locator('li[data-event="OPENED"]').getByText("value 97 % > 90 %").waitFor();
    const delivered = timeline.locator('li.tl-delivery[data-state="SENT"]');
    await delivered.getByText("Ops webhook").waitFor();
    await delivered.getByRole("button", { name: /1 attempt/ }).click();
    await delivered.getByTestId("attempts").getByText("HTTP 204").waitFor();
    await page.getByTestId("incident-summary").getByText("97 %", { exact: true }).first().waitFor();
    await page.getByRole("link", { name: "web-1" }).first().waitFor();
    assert.equal(
      await page.getByRole("link", { name: "CPU high" }).getAttribute("href"),
      `/projects/ops/alerts/${rule.id}`,
    );

    // The incident page meets WCAG 2.1 AA as axe checks it, at desktop and phone widths (test/console/demo.test.ts
    // checks every other page; the demo has no incident when it starts).
    for (const width of [1440, 390]) {
      await page.setViewportSize({ width, height: 860 });
      // Two frames: the page has laid itself out at the new width.
      await page.evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))");
      assert.deepEqual(await seriousViolations(page, `incident page at ${width} px`), []);
      // Nothing scrolls the page sideways, on a phone either.
      assert.ok(((await page.evaluate("document.documentElement.scrollWidth")) as number) <= width);
    }
    await page.setViewportSize({ width: 1280, height: 860 });

    await page.getByRole("button", { name: "Acknowledge" }).click();
    await timeline.locator('li[data-event="ACKNOWLEDGED"]').getByText("by you").waitFor();
    await page.getByTestId("acknowledged").getByText("by you").waitFor();
    let got = await owner().incidents.getIncident({ name: incident });
    assert.equal(got.acknowledgedBy, p.owner.user);

    await page.getByRole("button", { name: "Snooze…" }).click();
    const snooze = page.getByRole("dialog", { name: "Snooze notifications" });
    await snooze.waitFor();
    assert.deepEqual(await seriousViolations(page, "snooze dialog"), []);
    // A custom time is checked before sending: the past is refused in words.
    await snooze.getByLabel("Or until").fill("2020-01-01T10:00");
    await snooze.getByRole("button", { name: "Snooze until then" }).click();
    await snooze.getByText("Choose a time in the future.").waitFor();
    await page.screenshot({ path: "/tmp/console-snooze.png" });
    const clicked = Math.floor(Date.now() / 1000);
    await snooze.getByRole("button", { name: "1 hour" }).click();
    await timeline.locator('li[data-event="SNOOZED"]').waitFor();
    await page.getByTestId("snoozed").getByText("until").waitFor();
    got = await owner().incidents.getIncident({ name: incident });
    const until = Number(got.snoozeUntilUnix);
    assert.ok(Math.abs(until - (clicked + 3600)) <= 60, `snoozed for an hour: ${until - clicked} s`);
    assert.equal(got.snoozedBy, p.owner.user);
    await page.screenshot({ path: "/tmp/console-incident.png", fullPage: true });

    await page.getByRole("button", { name: "Unsnooze" }).click();
    await timeline.locator('li[data-event="UNSNOOZED"]').waitFor();
    await page.getByTestId("snoozed").getByText("no", { exact: true }).waitFor();
    got = await owner().incidents.getIncident({ name: incident });
    assert.equal(got.snoozeUntilUnix, 0n);
    assert.deepEqual(
      got.events.map((e) => e.kind),
      ["OPENED", "ACKNOWLEDGED", "SNOOZED", "UNSNOOZED"],
    );
    // The list shows who acknowledged it.
    await page.goto(`${base}/incidents`);
    await row.getByText("Acknowledged by you").waitFor();
    assert.deepEqual(problems, []);
  });

  it("rotates the webhook secret with overlap 0: new deliveries verify with the new secret only", async () => {
    await page.goto(`${base}/destinations/${destination.split("/").pop()}`);
    // The rule made in the previous step names it.
    await page.getByTestId("used-by").getByRole("link", { name: "CPU high" }).waitFor();
    await page.getByRole("button", { name: "Rotate secret…" }).click();
    const dialog = page.getByRole("dialog", { name: "Rotate the signing secret" });
    await dialog.getByRole("button", { name: "None (0)" }).click();
    await dialog.getByTestId("overlap-zero").getByText("discards the old secret at once").waitFor();
    await page.screenshot({ path: "/tmp/console-rotate.png" });
    await dialog.getByRole("button", { name: "Rotate secret", exact: true }).click();
    const once = dialog.getByTestId("shown-once");
    await once.waitFor();
    const fresh = (await once.locator("code.secret").textContent()) ?? "";
    assert.match(fresh, /^whsec_/);
    assert.notEqual(fresh, secret);
    await once.getByRole("button", { name: "I have stored it" }).click();
    const d = await owner().destinations.getDestination({ name: destination });
    assert.equal(d.secrets.length, 1, "overlap 0 leaves only the new secret");
    assert.equal(d.secrets[0].expireTimeUnix, 0n);
    await page.getByTestId("secrets").locator("tbody tr").first().waitFor();
    assert.equal(await page.getByTestId("secrets").locator("tbody tr").count(), 1);

    const before = peer.received.length;
    await page.getByRole("button", { name: "Send test" }).click();
    await page.getByTestId("test-result").getByText("SENT", { exact: true }).first().waitFor();
    assert.equal(peer.received.length, before + 1);
    const got = peer.received[before];
    const headers = got.headers as Record<string, string>;
    assert.ok(verifyWebhook(got.body, headers, fresh).deliveryId);
    assert.throws(() => verifyWebhook(got.body, headers, secret), /signature/i);
    secret = fresh;
    assert.deepEqual(problems, []);
  });

  it("an email recipient verifies with the code from the email, through the page", async () => {
    await page.goto(`${base}/destinations`);
    await page.getByRole("button", { name: "New destination" }).click();
    const dialog = page.getByRole("dialog", { name: "New destination" });
    await dialog.locator(".segmented label", { hasText: /^Email$/ }).click();
    await dialog.getByLabel("Name", { exact: true }).fill("On-call mail");
    // The signed-in user is offered and chosen by default.
    assert.equal(await dialog.getByRole("checkbox", { name: new RegExp(p.owner.email) }).isChecked(), true);
    await dialog.getByRole("button", { name: "Create destination" }).click();
    await page.waitForURL(/\/destinations\/[a-z0-9]+$/);
    const card = page.getByTestId("verify-email");
    await card.waitFor();
    await page.getByTestId("destination-details").getByText("unverified").waitFor();
    assert.equal(inbox.length, 1);
    assert.deepEqual(inbox[0].to, [p.owner.email]);
    assert.match(inbox[0].subject, /Confirm alert emails from project ops/);
    // The code is base64url and may begin or end with "-": read the line after the prompt, not a word.
    const code = /confirm with this code:\s+(\S+)/.exec(inbox[0].text)?.[1] ?? "";
    assert.ok(code, inbox[0].text);
    // The email's link opens this page (on this server's origin) with the code field ready.
    const link = /Enter it at (\S+)/.exec(inbox[0].text)?.[1] ?? "";
    const path = new URL(link).pathname;
    assert.equal(path, new URL(page.url()).pathname, link);
    assert.equal(new URL(link).search, "?verify=1");
    await page.goto(`${t.baseUrl}${path}?verify=1`);
    await card.getByLabel("Verification code").waitFor();
    assert.equal(
      await page.evaluate("document.activeElement?.getAttribute('aria-label')"),
      "Verification code",
    );
    await page.screenshot({ path: "/tmp/console-verify.png" });
    await card.getByLabel("Verification code").fill("wrongcode");
    await card.getByRole("button", { name: "Verify" }).click();
    await card.getByText("does not match the code sent to you").waitFor();
    await card.getByLabel("Verification code").fill(code);
    await card.getByRole("button", { name: "Verify" }).click();
    await card.waitFor({ state: "detached" });
    await page.getByTestId("destination-details").getByText("verified", { exact: true }).waitFor();
    await page.getByTestId("already-verified").waitFor();
    const name = `projects/ops/destinations/${new URL(page.url()).pathname.split("/").pop()}`;
    const d = await owner().destinations.getDestination({ name });
    assert.equal(d.recipients[0].verified, true);
    assert.deepEqual(problems, []);
  });

  it("explains the destination limit when the project reaches it", async () => {
    const have = (await owner().destinations.listDestinations({ projectName: p.projectName })).destinations;
    for (let i = have.length; i < 5; i++) {
      await owner().destinations.createDestination({
        projectName: p.projectName,
        displayName: `extra ${i}`,
        kind: "WEBHOOK",
        url: `${peer.url}/extra/${i}`,
        requestId: randomUUID(),
      });
    }
    await page.goto(`${base}/destinations`);
    await page.getByText("5 destinations;").waitFor();
    await page.getByRole("button", { name: "New destination" }).click();
    const dialog = page.getByRole("dialog", { name: "New destination" });
    await dialog.getByLabel("Name", { exact: true }).fill("One too many");
    await dialog.getByLabel("Endpoint URL").fill(`${peer.url}/six`);
    await dialog.getByRole("button", { name: "Create destination" }).click();
    const limit = dialog.getByTestId("limit-reached");
    await limit.getByText("already has 5 destinations; the limit is 5").waitFor();
    await limit.getByText("DESTINATION_LIMIT_EXCEEDED").waitFor();
    // What was typed is still there.
    assert.equal(await dialog.getByLabel("Name", { exact: true }).inputValue(), "One too many");
    await page.screenshot({ path: "/tmp/console-limit.png" });
    await dialog.getByRole("button", { name: "Cancel" }).click();
    assert.deepEqual(problems, []);
  });

  it("pauses and resumes, edits, reads a delivery with GetDelivery, filters the history, and deletes with confirmation", async () => {
    await page.goto(`${base}/destinations/${destination.split("/").pop()}`);
    await page.getByRole("button", { name: "Pause" }).click();
    await page.getByText("Nothing is sent here").waitFor();
    assert.equal((await owner().destinations.getDestination({ name: destination })).paused, true);
    await page.getByRole("button", { name: "Resume" }).click();
    await page.getByRole("button", { name: "Pause" }).waitFor();
    assert.equal((await owner().destinations.getDestination({ name: destination })).paused, false);

    // Edit: the name, and a URL checked before sending.
    await page.getByRole("button", { name: "Edit" }).click();
    const edit = page.getByRole("dialog", { name: "Edit Ops webhook" });
    await edit.getByLabel("Name", { exact: true }).fill("Ops webhook (main)");
    await edit.getByLabel("New URL").fill("ftp://127.0.0.1/x");
    await edit.getByRole("button", { name: "Save" }).click();
    await edit.getByText("Only https:// URLs are accepted.").waitFor();
    await edit.getByLabel("New URL").fill("");
    await edit.getByRole("button", { name: "Save" }).click();
    await page.getByRole("heading", { name: "Ops webhook (main)" }).waitFor();
    const renamed = await owner().destinations.getDestination({ name: destination });
    assert.equal(renamed.displayName, "Ops webhook (main)");
    assert.equal(renamed.url, `${peer.url}/hooks/console`);

    const history = page.getByTestId("deliveries");
    await history
      .getByRole("button", { name: /Show attempts/ })
      .first()
      .click();
    await history.getByRole("button", { name: "Details" }).first().click();
    const detail = page.getByTestId("delivery-dialog");
    await detail.getByText("Attempts (1)").waitFor();
    await detail.getByText("HTTP 204").waitFor();
    await page.keyboard.press("Escape");
    await detail.waitFor({ state: "hidden" });
    await page.getByLabel("Delivery state").selectOption("FAILED");
    await page.getByText("No failed delivery.").waitFor();

    const extra = (
      await owner().destinations.listDestinations({ projectName: p.projectName })
    ).destinations.find((d) => d.displayName === "extra 4");
    assert.ok(extra);
    await page.goto(`${base}/destinations/${extra.name.split("/").pop()}`);
    await page.getByRole("button", { name: "Delete…" }).click();
    const dialog = page.getByRole("dialog", { name: "Delete destination" });
    const confirm = dialog.getByRole("button", { name: "Delete destination" });
    assert.equal(await confirm.isDisabled(), true, "nothing is deleted before the name is typed");
    await dialog.getByLabel("Type “extra 4” to confirm").fill("extra 4");
    await confirm.click();
    await dialog.getByText("No delivery was pending.").waitFor();
    await dialog.getByRole("button", { name: "Back to destinations" }).click();
    await page.waitForURL(/\/projects\/ops\/destinations$/);
    await page.getByText("4 destinations;").waitFor();
    assert.equal(await page.locator('tr[data-destination="extra 4"]').count(), 0);
    assert.equal(
      (await owner().destinations.listDestinations({ projectName: p.projectName })).destinations.length,
      4,
    );
    assert.deepEqual(problems, []);
  });

  it("a viewer sees incidents and destinations without the write actions", async () => {
    const email = "viewer-ops@example.com";
    const password = `pw-${randomUUID()}`;
    const user = await t.admin.users.createUser({ email, password, displayName: "Viewer" });
    await t.admin.projects.setMember({ project: p.projectName, user: user.name, role: "viewer" });
    const viewer = await openPage(browser);
    await signIn(viewer.page, t.baseUrl, email, password);
    await viewer.page.goto(`${base}/incidents/${incident.split("/").pop()}`);
    // Someone else's acknowledgement is named by their display name, the email on hover (issue 43, item 4).
    const acked = viewer.page.getByTestId("timeline").locator('li[data-event="ACKNOWLEDGED"]');
    await acked.getByText("by Owner").waitFor();
    assert.equal(await acked.locator(".person").getAttribute("title"), `Owner <${p.owner.email}>`);
    await viewer.page.getByText("acknowledging and snoozing need the owner or editor role").waitFor();
    assert.equal(await viewer.page.getByRole("button", { name: "Snooze…" }).count(), 0);
    assert.equal(await viewer.page.getByRole("button", { name: "Acknowledge" }).count(), 0);
    await viewer.page.goto(`${base}/destinations/${destination.split("/").pop()}`);
    await viewer.page.getByTestId("destination-details").waitFor();
    assert.equal(await viewer.page.getByRole("button", { name: "Send test" }).count(), 0);
    assert.equal(await viewer.page.getByRole("button", { name: /Rotate/ }).count(), 0);
    // The verification link opened by someone who is not the recipient says so.
    const mail = (
      await owner().destinations.listDestinations({ projectName: p.projectName })
    ).destinations.find((d) => d.kind === "EMAIL");
    assert.ok(mail);
    await viewer.page.goto(`${base}/destinations/${mail.name.split("/").pop()}?verify=1`);
    await viewer.page.getByTestId("not-recipient").getByText(`signed in as ${email}`).waitFor();
    assert.equal(await viewer.page.getByTestId("verify-email").count(), 0);
    await viewer.page.goto(`${base}/destinations`);
    await viewer.page.getByTestId("destination-table").waitFor();
    assert.equal(await viewer.page.getByRole("button", { name: "New destination" }).count(), 0);
    await viewer.page.context().close();
    assert.deepEqual(viewer.problems, []);
  });
});
