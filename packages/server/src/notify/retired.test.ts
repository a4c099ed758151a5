import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, it } from "node:test";
import { newCpuRule } from "../../testing/alert-rules.ts";
import { testDialects } from "../../testing/dialects.ts";
import { makeCertificate } from "../../testing/https-peer.ts";
import { notifyFixture } from "../../testing/notify-fixture.ts";

const S = 1000;
const tls = makeCertificate();

/**
 * A firing message that is no longer relevant is not sent later (docs/notifications.md): when a rule
 * pause, condition edit or delete retired the incident before its `incident.opened` delivery went out,
 * the delivery is skipped as INCIDENT_RETIRED and the receiver gets no firing message.
 */
for (const { dialect, skip } of await testDialects()) {
  describe(`a firing message of a retired incident is not sent (${dialect.name})`, { skip }, () => {
    const f = notifyFixture(dialect, { projectId: "retired", vmIds: ["vm-1"], tls });
    const owner = () => f.t.clients(f.p.owner.session);

    /** A webhook and a rule notifying it whose incident opened at t0 (its delivery not yet attempted). */
    async function firing() {
      const { t } = f;
      const created = await owner().destinations.createDestination({
        projectName: f.p.projectName,
        displayName: "ops webhook",
        kind: "WEBHOOK",
        url: `${f.peer.url}/hooks/retired`,
        requestId: randomUUID(),
      });
      const destination = created.destination?.name ?? "";
      const t0 = t.clock.ms + 3600 * S;
      t.clock.ms = t0;
      const request = newCpuRule(f.p.projectName, { destinationNames: [destination] });
      const rule = await owner().alerts.saveAlertRule(request);
      await f.cpu(f.p.vms[0], t0 - 60 * S, t0 + 30 * S, 97);
      await t.app.evaluator.runCycle(t0);
      const [incident] = (await owner().incidents.listIncidents({ projectName: f.p.projectName })).incidents;
      assert.equal(incident?.state, "OPEN");
      return { t0, request, rule, incident, destination };
    }

    /** Dispatches, then checks the OPENED delivery was skipped as retired and nothing firing was sent. */
    async function assertRetiredSkip(destination: string, incident: string, atMs: number) {
      await f.t.app.dispatcher.runOnce(atMs);
      const { deliveries } = await owner().destinations.listDeliveries({
        projectName: f.p.projectName,
        destination,
      });
      const opened = deliveries.find((d) => d.incident === incident && d.eventType === "incident.opened");
      assert.deepEqual([opened?.state, opened?.skipReason], ["SKIPPED", "INCIDENT_RETIRED"]);
      assert.equal(
        opened?.attempts.every((a) => a.responseCode === 0),
        true,
        "never posted",
      );
      const types = f.peer.received.map((r) => (JSON.parse(r.body.toString()) as { type: string }).type);
      assert.ok(!types.includes("incident.opened"), `sent: ${types.join(", ")}`);
      await owner().destinations.deleteDestination({ name: destination, detachFromRules: true });
    }

    it("after a pause", async () => {
      const { t0, request, rule, incident, destination } = await firing();
      await owner().alerts.saveAlertRule({
        ...request,
        requestId: randomUUID(),
        expectedVersion: rule.version,
        spec: { ...request.spec, destinationNames: [destination], enabled: false },
      });
      await f.t.app.evaluator.applyPending(t0 + 10 * S);
      assert.equal((await owner().incidents.getIncident({ name: incident.name })).state, "RETIRED");
      await assertRetiredSkip(destination, incident.name, t0 + 20 * S);
      await owner().alerts.deleteAlertRule({ name: rule.name });
    });

    it("after a condition edit", async () => {
      const { t0, request, rule, incident, destination } = await firing();
      await owner().alerts.saveAlertRule({
        ...request,
        requestId: randomUUID(),
        expectedVersion: rule.version,
        spec: { ...request.spec, destinationNames: [destination], threshold: 99 },
      });
      await f.t.app.evaluator.applyPending(t0 + 10 * S);
      assert.equal((await owner().incidents.getIncident({ name: incident.name })).state, "RETIRED");
      await assertRetiredSkip(destination, incident.name, t0 + 20 * S);
      await owner().alerts.deleteAlertRule({ name: rule.name });
    });

    it("after a delete", async () => {
      const { t0, rule, incident, destination } = await firing();
      await owner().alerts.deleteAlertRule({ name: rule.name });
      assert.equal((await owner().incidents.getIncident({ name: incident.name })).state, "RETIRED");
      await assertRetiredSkip(destination, incident.name, t0 + 20 * S);
    });
  });
}
