import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { type ParsedMail, simpleParser } from "mailparser";
import { SMTPServer } from "smtp-server";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import { labelsFromRecord } from "../storage/interface.ts";

const S = 1000;

for (const { dialect, skip } of await testDialects()) {
  describe(`email destinations through a real SMTP peer (${dialect.name})`, { skip }, () => {
    let smtp: SMTPServer;
    const inbox: { to: string[]; mail: ParsedMail }[] = [];
    let t: TestApp;
    let p: SeededProject;

    before(async () => {
      smtp = new SMTPServer({
        authOptional: true,
        disabledCommands: ["STARTTLS"],
        logger: false,
        onData(stream, session, done) {
          simpleParser(stream)
            .then((mail) => {
              inbox.push({ to: session.envelope.rcptTo.map((r) => r.address), mail });
              done();
            })
            .catch(done);
        },
      });
      await new Promise<void>((r) => smtp.listen(0, "127.0.0.1", r));
      const port = (smtp.server.address() as AddressInfo).port;
      t = await startTestApp(dialect, {
        notify: { dispatcherAutoStart: false, smtpUrl: `smtp://127.0.0.1:${port}`, options: {} },
      });
      p = await t.seedProject("mail", ["vm-1"]);
    });
    after(async () => {
      await t?.close();
      await new Promise<void>((r) => smtp?.close(() => r()));
    });

    it("a recipient completes the double opt-in with the emailed code, then receives the incident; removal from the project stops it", async () => {
      const owner = t.clients(p.owner.session);
      const me = (await owner.sessions.whoAmI({})).principal;
      const created = await owner.destinations.createDestination({
        projectName: p.projectName,
        displayName: "on-call mail",
        kind: "EMAIL",
        recipients: [me],
        requestId: randomUUID(),
      });
      const d = created.destination?.name ?? "";
      assert.deepEqual(
        created.destination?.recipients.map((r) => [r.email, r.verified]),
        [[p.owner.email, false]],
      );
      assert.equal(inbox.length, 1);
      assert.deepEqual(inbox[0].to, [p.owner.email]);
      // The code is base64url and may begin or end with "-": read the line after the prompt, not a word.
      const code = /confirm with this code:\s+(\S+)/.exec(inbox[0].mail.text ?? "")?.[1] ?? "";
      assert.ok(code, inbox[0].mail.text);
      // A wrong code is refused naming the field; the right one verifies.
      try {
        await owner.destinations.verifyDestination({ name: d, code: "wrongcode" });
        assert.fail("a wrong code must be refused");
      } catch (err) {
        assert.equal(ConnectError.from(err).code, Code.InvalidArgument);
        assert.match(ConnectError.from(err).rawMessage, /^code:/);
      }
      const verified = await owner.destinations.verifyDestination({ name: d, code });
      assert.equal(verified.recipients[0].verified, true);
      // A rule that fires at once, sending to the destination.
      const t0 = t.clock.ms + 3600 * S;
      t.clock.ms = t0;
      await owner.alerts.saveAlertRule({
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
          destinationNames: [d],
        },
      });
      const a = t.app.tsdb.appender();
      const labels = labelsFromRecord({
        __name__: "svc_vm_cpu_utilization_pct",
        project_id: "mail",
        vm: p.vms[0],
        vm_id: "vm-1",
        location: "dc-1",
        source: "hypervisor",
      });
      for (let ts = t0 - 60 * S; ts <= t0 + 60 * S; ts += 30 * S) a.append(labels, ts, ts <= t0 ? 97 : 20);
      await a.commit();
      await t.app.evaluator.runCycle(t0);
      await t.app.dispatcher.runOnce(t0);
      assert.equal(inbox.length, 2);
      assert.match(inbox[1].mail.subject ?? "", /CPU high/);
      const [sent] = (await owner.destinations.listDeliveries({ projectName: p.projectName, destination: d }))
        .deliveries;
      assert.equal(sent.state, "SENT");
      // The recipient leaves the project: the RESOLVED message is skipped, not sent.
      await t.admin.projects.removeMember({ project: p.projectName, user: me });
      await t.app.evaluator.runCycle(t0 + 30 * S);
      await t.app.dispatcher.runOnce(t0 + 30 * S);
      assert.equal(inbox.length, 2);
      const rows = await t.app.db.db
        .selectFrom("deliveries")
        .select(["event_type", "state", "skip_reason"])
        .execute();
      assert.ok(
        rows.some((r) => r.event_type === "incident.resolved" && r.skip_reason === "NO_VERIFIED_RECIPIENT"),
      );
    });
  });
}
