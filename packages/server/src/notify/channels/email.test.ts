import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { after, before, describe, it } from "node:test";
import { type ParsedMail, simpleParser } from "mailparser";
import pino from "pino";
import { SMTPServer } from "smtp-server";
import type { NotificationMessage } from "../message.ts";
import { createLogSender, createSmtpSender, renderIncidentEmail, renderVerificationEmail } from "./email.ts";

const message: NotificationMessage = {
  type: "incident.opened",
  deliveryId: "d-42",
  timeUnix: 1_767_225_600,
  project: "projects/demo",
  incident: {
    name: "projects/demo/incidents/i-1",
    state: "OPEN",
    severity: "CRITICAL",
    metricId: "cpu_utilization_pct",
    operator: "GREATER_THAN",
    threshold: 90,
    firingValue: 96.1,
    openTimeUnix: 1_767_225_600,
  },
  rule: { name: "projects/demo/alertRules/r-1", displayName: "High CPU <script>", version: "1" },
  vm: { name: "projects/demo/vms/web-2" },
  summary: "FIRING: High CPU <script> on web-2 (96.1 > 90)",
  link: "https://svc.example/projects/p1/incidents/i-1",
};

describe("notify/channels/email", () => {
  let server: SMTPServer;
  let port: number;
  const received: { from: string; to: string[]; mail: ParsedMail }[] = [];

  before(async () => {
    server = new SMTPServer({
      authOptional: true,
      // Plain SMTP on loopback: the test server has no certificate the client trusts.
      disabledCommands: ["STARTTLS"],
      logger: false,
      onData(stream, session, done) {
        simpleParser(stream)
          .then((mail) => {
            received.push({
              from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
              to: session.envelope.rcptTo.map((r) => r.address),
              mail,
            });
            done();
          })
          .catch(done);
      },
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    port = (server.server.address() as AddressInfo).port;
  });
  after(() => new Promise<void>((r) => server?.close(() => r())));

  it("createSmtpSender delivers an incident email that parses back to what was rendered", async () => {
    const sender = createSmtpSender(`smtp://127.0.0.1:${port}`);
    const mail = renderIncidentEmail(message);
    await sender.sendMail({ from: "svc alerts <alerts@svc.test>", to: "ops@example.test", ...mail });
    sender.close();
    const got = received.at(-1)!;
    assert.deepEqual([got.from, got.to], ["alerts@svc.test", ["ops@example.test"]]);
    assert.equal(got.mail.subject, "[svc] FIRING: High CPU <script> on web-2 (96.1 > 90)");
    const to = Array.isArray(got.mail.to) ? got.mail.to[0] : got.mail.to;
    assert.equal(to?.value[0].address, "ops@example.test");
    assert.match(got.mail.text ?? "", /^FIRING: High CPU <script> on web-2 \(96\.1 > 90\)$/m);
    assert.match(got.mail.text ?? "", /^Severity: +CRITICAL$/m);
    assert.match(got.mail.text ?? "", /^Condition: +CPU utilization > 90 %$/m);
    assert.match(
      got.mail.text ?? "",
      /^Open incident: https:\/\/svc\.example\/projects\/p1\/incidents\/i-1$/m,
    );
    assert.match(got.mail.text ?? "", /Delivery d-42/);
    const html = typeof got.mail.html === "string" ? got.mail.html : "";
    assert.match(html, /<h2[^>]*>FIRING: High CPU &lt;script&gt; on web-2 \(96\.1 &gt; 90\)<\/h2>/);
    assert.doesNotMatch(html, /<script>/);
    assert.match(html, /<a href="https:\/\/svc\.example\/projects\/p1\/incidents\/i-1">Open incident<\/a>/);
  });

  it("createSmtpSender delivers a verification email with the code in the body only", async () => {
    const sender = createSmtpSender(`smtp://127.0.0.1:${port}`);
    const mail = renderVerificationEmail({
      projectName: "projects/demo",
      destinationName: "On-call",
      code: "482913",
      link: "https://svc.example/projects/p1/destinations/d1?verify=1",
    });
    await sender.sendMail({ from: "alerts@svc.test", to: "new@example.test", ...mail });
    sender.close();
    const got = received.at(-1)!;
    assert.deepEqual(got.to, ["new@example.test"]);
    assert.equal(got.mail.subject, "[svc] Confirm alert emails from project demo");
    assert.doesNotMatch(got.mail.subject ?? "", /482913/);
    assert.match(got.mail.text ?? "", /^ {4}482913$/m);
    assert.match(got.mail.text ?? "", /"On-call" in the svc project projects\/demo/);
    assert.match(got.mail.text ?? "", /https:\/\/svc\.example\/projects\/p1\/destinations\/d1\?verify=1/);
    assert.equal(got.mail.html, false);
  });

  it("createSmtpSender refuses a URL that is not smtp:// or smtps://", () => {
    assert.throws(() => createSmtpSender("direct://x"), /must start with smtp:\/\/ or smtps:\/\//);
    assert.throws(
      () => createSmtpSender("https://user:secret@mail.example"),
      (e: Error) => !e.message.includes("secret"),
    );
  });

  it("createSmtpSender rejects when the server is unreachable", async () => {
    const closed = new SMTPServer({ authOptional: true, logger: false });
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const freePort = (closed.server.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const sender = createSmtpSender(`smtp://127.0.0.1:${freePort}`);
    await assert.rejects(
      sender.sendMail({ from: "a@svc.test", to: "b@example.test", subject: "s", text: "t" }),
      /ECONNREFUSED/,
    );
    sender.close();
  });

  it("createLogSender logs who and what about, never the body", async () => {
    let lines = "";
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines += chunk.toString();
        done();
      },
    });
    const sender = createLogSender(pino({ level: "info" }, sink));
    const mail = renderVerificationEmail({
      projectName: "projects/demo",
      destinationName: "On-call",
      code: "771234",
      link: "https://svc.example/projects/p1/destinations/d1?verify=1",
    });
    await sender.sendMail({ from: "alerts@svc.test", to: "new@example.test", ...mail });
    const line = JSON.parse(lines.trim());
    assert.equal(line.level, 30);
    assert.deepEqual([line.mail.to, line.mail.subject], ["new@example.test", mail.subject]);
    assert.doesNotMatch(lines, /771234/);
  });

  it("renderIncidentEmail of a test send and of a very long name", () => {
    const t = renderIncidentEmail({
      type: "test",
      deliveryId: "d-1",
      timeUnix: 1_767_225_600,
      project: "projects/demo",
      summary: "Test notification from svc",
      link: "https://svc.example/projects/p1/destinations/x",
    });
    assert.equal(t.subject, "[svc] Test notification from svc");
    assert.match(t.text, /^Open in svc: https:\/\/svc\.example\/projects\/p1\/destinations\/x$/m);
    const long = renderIncidentEmail({ ...message, summary: `FIRING: ${"x\r\n".repeat(500)}` });
    assert.ok(long.subject.length <= 200 && long.subject.endsWith("…"));
    assert.doesNotMatch(long.subject, /[\r\n]/);
  });
});
