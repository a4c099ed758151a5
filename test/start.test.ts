import assert from "node:assert/strict";
import { type ChildProcess, execFile } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { promisify } from "node:util";
import { startServerProcess } from "../packages/server/testing/server-process.ts";

const root = join(import.meta.dirname, "..");

/**
 * Starts what `npm start` runs (scripts/start.mjs: the builds brought up to date, then the server's bundle)
 * on a free port and waits for the lines it prints.
 */
async function start(dataDir: string): Promise<{ child: ChildProcess; out: () => string; baseUrl: string }> {
  const s = await startServerProcess({
    args: ["scripts/start.mjs"],
    env: { ...process.env, PORT: "0", SVC_DATA_DIR: dataDir, SVC_LOG_LEVEL: "warn" },
    // The last of the demo's lines the test reads: the keys come on lines printed before it, and a pipe may
    // deliver "demo project:" in an earlier chunk than the keys.
    ready: /console login: [^\n]*\n/,
  });
  return { child: s.child, out: s.output, baseUrl: s.baseUrl };
}

/** The messages in a demo mailbox directory, with their raw text. */
function mailbox(dir: string): { path: string; text: string }[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith(".eml"))
    .map((f) => ({ path: join(dir, f), text: readFileSync(join(dir, f), "utf8") }));
}

/** Polls `check` until it returns a non-empty list, for up to a minute (slow machines included). */
async function waitFor<T>(what: string, check: () => T[] | Promise<T[]>): Promise<T[]> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const found = await check();
    if (found.length > 0) return found;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.on("exit", r));
  child.kill("SIGTERM");
  await exited;
}

describe("npm start", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-start-"));
  after(() => rmSync(dataDir, { recursive: true, force: true }));

  it("creates the demo once, serves the spec's curl call and buf curl, and reuses the data", async () => {
    const first = await start(dataDir);
    let creds: {
      baseUrl: string;
      projectName: string;
      readKey: string;
      writeKey: string;
      adminToken: string;
      consoleEmail: string;
      consolePassword: string;
    };
    try {
      const path = join(dataDir, "demo-credentials.json");
      assert.equal(statSync(path).mode & 0o777, 0o600);
      creds = JSON.parse(readFileSync(path, "utf8"));
      assert.equal(creds.baseUrl, first.baseUrl);
      assert.equal(creds.projectName, "projects/demo");
      assert.ok(first.out().includes(creds.readKey), "the read key is printed once");
      assert.ok(first.out().includes(creds.writeKey));
      const res = await fetch(`${creds.baseUrl}/svc.monitoring.v1.MonitoringService/ListVMMonitoring`, {
        method: "POST",
        headers: {
          "Content-Type": "application/json",
          "Connect-Protocol-Version": "1",
          Authorization: `Bearer ${creds.readKey}`,
        },
        body: JSON.stringify({ projectName: "projects/demo", pageSize: 50, inventoryOnly: true }),
      });
      assert.equal(res.status, 200);
      const body = (await res.json()) as { vms: { name: string }[] };
      assert.ok(body.vms.length >= 3);

      // buf curl: an independent Connect client reading our .proto files.
      const { stdout } = await promisify(execFile)(
        join(root, "node_modules/.bin/buf"),
        [
          "curl",
          "--schema",
          join(root, "proto"),
          "--protocol",
          "connect",
          "-H",
          `Authorization: Bearer ${creds.readKey}`,
          "-d",
          JSON.stringify({ projectName: "projects/demo", pageSize: 50, inventoryOnly: true }),
          `${creds.baseUrl}/svc.monitoring.v1.MonitoringService/ListVMMonitoring`,
        ],
        { cwd: root },
      );
      assert.deepEqual(
        (JSON.parse(stdout) as { vms: { name: string }[] }).vms.map((v) => v.name),
        body.vms.map((v) => v.name),
      );

      // The demo's notifications: a webhook, an email, a chat and a PagerDuty destination, all on the CPU rule. Destinations
      // are for people (and notifications.write), not for the read key: read them in a console session.
      const login = await fetch(`${creds.baseUrl}/svc.iam.v1.SessionService/Login`, {
        method: "POST",
        headers: { "Content-Type": "application/json", "Connect-Protocol-Version": "1" },
        body: JSON.stringify({ email: creds.consoleEmail, password: creds.consolePassword }),
      });
      assert.equal(login.status, 200);
      const { sessionToken } = (await login.json()) as { sessionToken: string };
      const read = async (method: string, body: object, token = sessionToken) => {
        const r = await fetch(`${creds.baseUrl}/svc.monitoring.v1.${method}`, {
          method: "POST",
          headers: {
            "Content-Type": "application/json",
            "Connect-Protocol-Version": "1",
            Authorization: `Bearer ${token}`,
          },
          body: JSON.stringify(body),
        });
        assert.equal(r.status, 200, method);
        return r.json();
      };
      const { destinations } = (await read("DestinationService/ListDestinations", {
        projectName: "projects/demo",
      })) as { destinations: { name: string; kind: string }[] };
      assert.deepEqual(destinations.map((d) => d.kind).sort(), ["EMAIL", "PAGERDUTY", "SLACK", "WEBHOOK"]);
      const { rules } = (await read(
        "AlertService/ListAlertRules",
        { projectName: "projects/demo" },
        creds.readKey,
      )) as {
        rules: { spec: { metricId: string; destinationNames: string[] } }[];
      };
      const cpu = rules.find((r) => r.spec.metricId === "cpu_utilization_pct");
      assert.deepEqual(
        [...(cpu?.spec.destinationNames ?? [])].sort(),
        destinations.map((d) => d.name).sort(),
        "the CPU rule notifies the four demo destinations",
      );
      assert.match(first.out(), /demo notifications: .*ListDeliveries/);

      // Without SVC_SMTP_URL the demo's emails go through real SMTP to its catcher, which keeps each
      // message in the data dir and prints its subject and recipient, never its body.
      const mailDir = join(dataDir, "demo-mail");
      const [verification] = await waitFor("the verification email in the demo mailbox", () =>
        mailbox(mailDir).filter((m) => m.text.includes("Subject: [svc] Confirm alert emails")),
      );
      assert.equal(statSync(verification.path).mode & 0o777, 0o600);
      assert.match(verification.text, /^To: demo@example\.com\r?$/m);
      const mailText = verification.text.replace(/=\r?\n/g, ""); // quoted-printable soft line breaks
      const code = /confirm with this code:\s+(\S+)/.exec(mailText)?.[1] ?? "";
      assert.ok(code, "the verification email holds its code");
      assert.match(
        first.out(),
        /demo mailbox: "\[svc\] Confirm alert emails from project demo" to demo@example\.com/,
      );
      assert.ok(!first.out().includes(code), "the code is not printed");
      // A test send to the email destination: a delivery from the outbox, sent through SMTP.
      const email = destinations.find((d) => d.kind === "EMAIL")?.name ?? "";
      const test = await fetch(`${creds.baseUrl}/svc.monitoring.v1.DestinationService/SendTestNotification`, {
        method: "POST",
        headers: {
          "Content-Type": "application/json",
          "Connect-Protocol-Version": "1",
          Authorization: `Bearer ${sessionToken}`,
        },
        body: JSON.stringify({ name: email }),
      });
      assert.equal(test.status, 200);
      const { name: deliveryName } = (await test.json()) as { name: string };
      type Delivery = { state: string; attempts: { status: string; detail: string }[] };
      const sent = await waitFor("the test email delivery to be sent", async () => {
        const d = (await read("DestinationService/GetDelivery", { name: deliveryName })) as Delivery;
        return d.state === "PENDING" ? [] : [d];
      });
      assert.equal(sent[0].state, "SENT", JSON.stringify(sent[0]));
      assert.match(sent[0].attempts[0].detail, /^accepted by the SMTP server for 1 recipient/);
      await waitFor("the test email in the demo mailbox", () =>
        mailbox(mailDir).filter((m) => m.text.includes("Subject: [svc] Test notification for")),
      );
      assert.match(first.out(), /demo mailbox: "\[svc\] Test notification for .*" to demo@example\.com/);
      // A test send to the PagerDuty destination: its loopback receiver checks the Events API v2 shape
      // and answers 202 with the dedup_key, as PagerDuty does.
      const pagerDuty = destinations.find((d) => d.kind === "PAGERDUTY")?.name ?? "";
      const pdTest = await fetch(
        `${creds.baseUrl}/svc.monitoring.v1.DestinationService/SendTestNotification`,
        {
          method: "POST",
          headers: {
            "Content-Type": "application/json",
            "Connect-Protocol-Version": "1",
            Authorization: `Bearer ${sessionToken}`,
          },
          body: JSON.stringify({ name: pagerDuty }),
        },
      );
      assert.equal(pdTest.status, 200);
      const pdName = ((await pdTest.json()) as { name: string }).name;
      const [pdSent] = await waitFor("the PagerDuty test delivery to be sent", async () => {
        const d = (await read("DestinationService/GetDelivery", { name: pdName })) as Delivery;
        return d.state === "PENDING" ? [] : [d];
      });
      assert.equal(pdSent.state, "SENT", JSON.stringify(pdSent));
      assert.match(pdSent.attempts[0].detail, /dedup_key svc-test-/);
      assert.match(first.out(), /demo PagerDuty receiver: trigger svc-test-\S+ → triggered/);

      // The demo's two alert rules, and the curl recipe of docs/alerts.md, run as written.
      const doc = readFileSync(join(root, "docs/alerts.md"), "utf8");
      const block =
        /<!-- the block below is run by test\/start\.test\.ts -->\n```sh(?: runnable)?\n([\s\S]*?)```/.exec(
          doc,
        )?.[1];
      assert.ok(block, "docs/alerts.md has its tested block");
      const script = block
        .replaceAll("http://127.0.0.1:8080", creds.baseUrl)
        .replaceAll("./.data/", `${dataDir}/`);
      const run = await promisify(execFile)("bash", ["-euo", "pipefail", "-c", script], { cwd: root });
      assert.match(run.stdout, /"templates":\[/);
      assert.match(run.stdout, /High CPU utilization/);
      assert.match(run.stdout, /VM stopped unexpectedly/);
      assert.match(run.stdout, /"queryStatus":"OK"/);
      assert.match(run.stdout, /"version":"2"/);
      assert.match(run.stdout, /"retiredInstances":/);
    } finally {
      await stop(first.child);
    }

    const second = await start(dataDir);
    try {
      assert.match(second.out(), /existing data/);
      assert.ok(!second.out().includes(creds.readKey), "keys are not printed again");
      const res = await fetch(`${second.baseUrl}/svc.monitoring.v1.MonitoringService/ListVMMonitoring`, {
        method: "POST",
        headers: {
          "Content-Type": "application/json",
          "Connect-Protocol-Version": "1",
          Authorization: `Bearer ${creds.readKey}`,
        },
        body: JSON.stringify({ projectName: "projects/demo", inventoryOnly: true }),
      });
      assert.equal(res.status, 200);
    } finally {
      await stop(second.child);
    }
  });
});
