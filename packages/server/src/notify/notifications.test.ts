import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { before, describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { verifyWebhook } from "@svc/sdk";
import { testDialects } from "../../testing/dialects.ts";
import type { SeededProject, TestApp } from "../../testing/harness.ts";
import { type HttpsPeer, makeCertificate } from "../../testing/https-peer.ts";
import { notifyFixture } from "../../testing/notify-fixture.ts";
import { createLogSender } from "./channels/email.ts";
import { createDispatcher, RECHECK_MAX_AGE_MS } from "./dispatcher.ts";
import { postJson } from "./http.ts";
import { resolveNotifyOptions } from "./options.ts";
import { fanout } from "./outbox.ts";
import { createSealer } from "./seal.ts";

const S = 1000;
const tls = makeCertificate();

async function rejects(p: Promise<unknown>, code: Code, reason: string): Promise<ConnectError> {
  try {
    await p;
  } catch (err) {
    const e = ConnectError.from(err);
    assert.equal(e.code, code, e.message);
    assert.match(e.rawMessage, new RegExp(`\\[${reason}\\]$`), e.message);
    return e;
  }
  assert.fail("expected a refusal");
}

for (const { dialect, skip } of await testDialects()) {
  describe(`notifications (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let p: SeededProject;
    let peer: HttpsPeer;
    const projectId = "notify";
    const f = notifyFixture(dialect, { projectId, vmIds: ["vm-1"], tls });
    let vm1: string;

    before(() => {
      ({ t, p, peer } = f);
      [vm1] = p.vms;
    });

    const owner = () => t.clients(p.owner.session);
    const cpu = (fromMs: number, toMs: number, v: number) => f.cpu(vm1, fromMs, toMs, v);
    async function webhook(path = "/hooks/svc") {
      return owner().destinations.createDestination({
        projectName: p.projectName,
        displayName: "ops webhook",
        kind: "WEBHOOK",
        url: `${peer.url}${path}`,
        requestId: randomUUID(),
      });
    }
    /** A rule on vm-1 that fires at once, notifying `destination`; returns the incident after it fired. */
    async function fire(destination: string, repeatIntervalSeconds = 0) {
      const t0 = t.clock.ms + 3600 * S;
      t.clock.ms = t0;
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
          repeatIntervalSeconds,
        },
      });
      await cpu(t0 - 60 * S, t0 + 30 * S, 97);
      await t.app.evaluator.runCycle(t0);
      const { incidents } = await owner().incidents.listIncidents({
        projectName: p.projectName,
        rule: rule.name,
      });
      assert.equal(incidents.length, 1);
      return { t0, rule, incident: incidents[0] };
    }
    async function deliveries(destination: string) {
      return (await owner().destinations.listDeliveries({ projectName: p.projectName, destination }))
        .deliveries;
    }
    async function cleanup(rule: string, destination: string) {
      await owner().alerts.deleteAlertRule({ name: rule });
      await owner().destinations.deleteDestination({ name: destination });
      await t.app.dispatcher.runOnce(t.clock.ms);
    }

    it("a firing incident reaches a signed HTTPS webhook that verifies with the SDK; the secret is sealed and shown once", async () => {
      const created = await webhook();
      const d = created.destination?.name ?? "";
      assert.match(created.webhookSecret, /^whsec_[A-Za-z0-9+/]{43}=$/);
      const stored = await t.app.db.db.selectFrom("destination_secrets").select("sealed_secret").execute();
      assert.ok(
        stored.every((s) => !s.sealed_secret.includes(created.webhookSecret.slice(6))),
        "sealed at rest",
      );
      assert.ok(
        !JSON.stringify(await owner().destinations.getDestination({ name: d }), (_k, v) =>
          typeof v === "bigint" ? String(v) : v,
        ).includes("whsec_"),
      );
      const { t0, rule, incident } = await fire(d);
      const r = await t.app.dispatcher.runOnce(t0);
      assert.equal(r.sent, 1);
      assert.equal(peer.received.length, 1);
      const got = peer.received[0];
      assert.equal(got.path, "/hooks/svc");
      const v = verifyWebhook(got.body, got.headers as Record<string, string>, created.webhookSecret, {
        now: () => t0,
      });
      const payload = v.payload as {
        type: string;
        incident: { name: string; firingValue: number };
        rule: { name: string };
      };
      assert.equal(payload.type, "incident.opened");
      assert.equal(payload.incident.name, incident.name);
      assert.equal(payload.incident.firingValue, 97);
      assert.equal(payload.rule.name, rule.name);
      const [dl] = await deliveries(d);
      assert.deepEqual(
        [dl.state, dl.deliveryId, dl.attempts.length, dl.attempts[0].responseCode],
        ["SENT", v.deliveryId, 1, 204],
      );
      assert.equal(dl.attempts[0].attemptId, v.attemptId);
      await cleanup(rule.name, d);
    });

    it("retries keep the DeliveryID with a new attempt ID: about 5 s after a 500, at least 60 s (or Retry-After) after a 429, and a 3xx is a failure that is not followed", async () => {
      const created = await webhook();
      const d = created.destination?.name ?? "";
      const { t0, rule } = await fire(d);
      const answers: { status: number; headers?: Record<string, string> }[] = [
        { status: 500 },
        { status: 429 },
        { status: 429, headers: { "retry-after": "300" } },
        { status: 302, headers: { location: "https://127.0.0.1:1/elsewhere" } },
        { status: 200 },
      ];
      peer.respond = () => answers.shift() ?? { status: 200 };
      await t.app.dispatcher.runOnce(t0);
      let [dl] = await deliveries(d);
      const next1 = Number(dl.nextAttemptTimeUnix) * 1000 - t0;
      assert.ok(next1 >= 3 * S && next1 <= 7 * S, `about 5 s, got ${next1} ms`);
      // Next attempt times are whole seconds in the API: run one second after.
      const due = (x: typeof dl) => (Number(x.nextAttemptTimeUnix) + 1) * 1000;
      const at2 = due(dl);
      await t.app.dispatcher.runOnce(at2);
      [dl] = await deliveries(d);
      assert.ok(due(dl) - at2 >= 60 * S, `a 429 waits at least 60 s, got ${due(dl) - at2} ms`);
      const at3 = due(dl);
      await t.app.dispatcher.runOnce(at3);
      [dl] = await deliveries(d);
      assert.ok(due(dl) - at3 >= 300 * S, "Retry-After: 300 is honoured");
      await t.app.dispatcher.runOnce(due(dl));
      [dl] = await deliveries(d);
      assert.equal(dl.attempts.at(-1)?.responseCode, 302);
      assert.match(dl.attempts.at(-1)?.detail ?? "", /redirect/);
      assert.equal(peer.received.filter((r) => r.path === "/elsewhere").length, 0);
      await t.app.dispatcher.runOnce(due(dl));
      [dl] = await deliveries(d);
      assert.equal(dl.state, "SENT");
      assert.equal(peer.received.length, 5);
      const ids = new Set(peer.received.map((r) => r.headers["webhook-id"]));
      const attempts = new Set(peer.received.map((r) => r.headers["svc-attempt-id"]));
      assert.deepEqual([ids.size, attempts.size], [1, 5]);
      await cleanup(rule.name, d);
    });

    it("before every attempt it rechecks: paused, recovered, snoozed, expired and deleted each skip with the reason and send nothing", async () => {
      const created = await webhook();
      const d = created.destination?.name ?? "";
      // Paused.
      const { t0, rule, incident } = await fire(d);
      await owner().destinations.updateDestination({ name: d, paused: true });
      await t.app.dispatcher.runOnce(t0);
      const [paused] = await deliveries(d);
      assert.deepEqual([paused.state, paused.skipReason], ["SKIPPED", "DESTINATION_PAUSED"]);
      await owner().destinations.updateDestination({ name: d, paused: false });
      // Recovered before the firing message went out: the OPENED delivery is skipped, RESOLVED is sent.
      await cpu(t0 + 30 * S, t0 + 60 * S, 10);
      peer.respond = () => ({ status: 500 });
      await t.app.evaluator.runCycle(t0 + 30 * S);
      await owner().alerts.saveAlertRule({
        projectName: p.projectName,
        id: rule.id,
        requestId: randomUUID(),
        expectedVersion: "1",
        spec: { ...(rule.spec as object), displayName: "CPU high!" },
      });
      await cpu(t0 + 60 * S, t0 + 90 * S, 99);
      await t.app.evaluator.runCycle(t0 + 60 * S);
      await t.app.dispatcher.runOnce(t0 + 60 * S); // RESOLVED fails (500), second OPENED fails
      await cpu(t0 + 90 * S, t0 + 120 * S, 5);
      await t.app.evaluator.runCycle(t0 + 90 * S);
      peer.respond = () => ({ status: 204 });
      await t.app.dispatcher.runOnce(t0 + 100 * S);
      const all = await deliveries(d);
      const opened2 = all.find((x) => x.eventType === "incident.opened" && x.incident !== incident.name);
      assert.deepEqual([opened2?.state, opened2?.skipReason], ["SKIPPED", "INCIDENT_RECOVERED"]);
      assert.ok(all.filter((x) => x.eventType === "incident.resolved").every((x) => x.state === "SENT"));
      // Snoozed.
      await cpu(t0 + 120 * S, t0 + 150 * S, 99);
      await t.app.evaluator.runCycle(t0 + 120 * S);
      const open = (await owner().incidents.listIncidents({ projectName: p.projectName, state: "OPEN" }))
        .incidents[0];
      t.clock.ms = t0 + 121 * S;
      await owner().incidents.snoozeIncident({
        name: open.name,
        snoozeUntilUnix: BigInt((t0 + 3600 * S) / 1000),
      });
      await t.app.dispatcher.runOnce(t0 + 122 * S);
      const snoozed = (await deliveries(d)).find(
        (x) => x.incident === open.name && x.eventType === "incident.opened",
      );
      assert.deepEqual([snoozed?.state, snoozed?.skipReason], ["SKIPPED", "INCIDENT_SNOOZED"]);
      // Expired: a message that could not be sent within 24 h is never sent later.
      await owner().incidents.unsnoozeIncident({ name: open.name });
      await cpu(t0 + 150 * S, t0 + 180 * S, 5);
      await t.app.evaluator.runCycle(t0 + 150 * S);
      await t.app.dispatcher.runOnce(t0 + 150 * S + 25 * 3600 * S);
      const expired = (await deliveries(d)).find(
        (x) => x.incident === open.name && x.eventType === "incident.resolved",
      );
      assert.deepEqual([expired?.state, expired?.skipReason], ["SKIPPED", "EXPIRED"]);
      // Deleted while a delivery waits for its retry.
      await cpu(t0 + 180 * S, t0 + 210 * S, 99);
      await t.app.evaluator.runCycle(t0 + 180 * S);
      peer.respond = () => ({ status: 503 });
      await t.app.dispatcher.runOnce(t0 + 181 * S);
      const sentBefore = peer.received.length;
      await owner().destinations.deleteDestination({ name: d, detachFromRules: true });
      await t.app.dispatcher.runOnce(t0 + 200 * S);
      const rows = await t.app.db.db
        .selectFrom("deliveries")
        .select(["state", "skip_reason"])
        .where("create_time", "=", t0 + 181 * S)
        .execute();
      assert.deepEqual(
        rows.map((r) => [r.state, r.skip_reason]),
        [["SKIPPED", "DESTINATION_DELETED"]],
      );
      assert.equal(peer.received.length, sentBefore);
      await owner().alerts.deleteAlertRule({ name: rule.name });
    });

    it("a destination taken out of the rule while its delivery waits for a retry is skipped (DESTINATION_NOT_IN_RULE); one still named is sent", async () => {
      const removed = (await webhook("/hooks/removed")).destination?.name ?? "";
      const kept = (await webhook("/hooks/kept")).destination?.name ?? "";
      const { t0, rule } = await fire(removed);
      // Both named: a second revision adds `kept`, before the incident's first delivery is made.
      const spec = rule.spec as { destinationNames: string[] };
      const two = await owner().alerts.saveAlertRule({
        projectName: p.projectName,
        id: rule.id,
        requestId: randomUUID(),
        expectedVersion: "1",
        spec: { ...spec, destinationNames: [removed, kept] },
      });
      await t.app.evaluator.applyPending(t.clock.ms);
      await cpu(t0 + 30 * S, t0 + 60 * S, 97);
      await t.app.evaluator.runCycle(t0 + 30 * S);
      peer.respond = (req) => ({ status: req.path === "/hooks/removed" ? 503 : 204 });
      await t.app.dispatcher.runOnce(t0 + 31 * S);
      const [first] = await deliveries(removed);
      assert.deepEqual([first.state, first.attempts.length], ["PENDING", 1], "waits for its retry");
      // Taken out of the rule; the receiver now answers: the retry must not reach it.
      await owner().alerts.saveAlertRule({
        projectName: p.projectName,
        id: rule.id,
        requestId: randomUUID(),
        expectedVersion: two.version,
        spec: { ...spec, destinationNames: [kept] },
      });
      await t.app.evaluator.applyPending(t.clock.ms);
      peer.respond = () => ({ status: 204 });
      const before = peer.received.filter((x) => x.path === "/hooks/removed").length;
      await t.app.dispatcher.runOnce(t0 + 3600 * S);
      const [retried] = await deliveries(removed);
      assert.deepEqual([retried.state, retried.skipReason], ["SKIPPED", "DESTINATION_NOT_IN_RULE"]);
      assert.deepEqual(retried.attempts.map((a) => a.detail.split(":")[0]).sort(), [
        "DESTINATION_NOT_IN_RULE",
        "HTTP 503",
      ]);
      assert.equal(peer.received.filter((x) => x.path === "/hooks/removed").length, before, "not sent");
      const sentToKept = await deliveries(kept);
      assert.ok(sentToKept.length > 0 && sentToKept.every((x) => x.state === "SENT"));
      await owner().alerts.deleteAlertRule({ name: rule.name });
      await owner().destinations.deleteDestination({ name: removed });
      await owner().destinations.deleteDestination({ name: kept });
      await t.app.dispatcher.runOnce(t.clock.ms);
    });

    it("a delivery claimed by a process that died is resent after its lease with the same DeliveryID, also across a restart", async () => {
      const created = await webhook();
      const d = created.destination?.name ?? "";
      const { t0, rule } = await fire(d);
      // Fan out, then pretend a dispatcher claimed the delivery and was killed before recording anything.
      await fanout({ db: t.app.db.db, baseUrl: t.baseUrl, messageTtlMs: 86_400_000 }, t0);
      await t.app.db.db
        .updateTable("deliveries")
        .set({ lease_until: t0 + 60 * S })
        .where("state", "=", "PENDING")
        .execute();
      await t.app.dispatcher.runOnce(t0 + 1 * S);
      assert.equal(peer.received.length, 0, "another dispatcher's claim is respected");
      const before = peer.received.length;
      await t.restart();
      await t.app.dispatcher.runOnce(t0 + 61 * S);
      const [dl] = await deliveries(d);
      assert.equal(dl.state, "SENT");
      assert.ok(peer.received.length >= before + 1);
      assert.equal(peer.received.at(-1)?.headers["webhook-id"], dl.deliveryId);
      await cleanup(rule.name, d);
    });

    it("rotation signs with both secrets during the overlap (plus the legacy signature) and with the new one only after", async () => {
      const created = await webhook();
      const d = created.destination?.name ?? "";
      const rotated = await owner().destinations.rotateWebhookSecret({ name: d, overlapSeconds: 86_400 });
      const { t0, rule } = await fire(d);
      await t.app.dispatcher.runOnce(t0);
      const got = peer.received.at(-1);
      assert.ok(got);
      assert.equal(String(got.headers["svc-signature-v2"]).split(" ").length, 2);
      assert.match(String(got.headers["svc-signature-256"]), /^sha256=[0-9a-f]{64}$/);
      verifyWebhook(got.body, got.headers as Record<string, string>, created.webhookSecret, {
        now: () => t0,
      });
      verifyWebhook(got.body, got.headers as Record<string, string>, rotated.webhookSecret, {
        now: () => t0,
      });
      const now = await owner().destinations.rotateWebhookSecret({ name: d, overlapSeconds: 0 });
      assert.equal(now.destination?.secrets.length, 1);
      await cleanup(rule.name, d);
    });

    it("a still-firing incident notifies again after repeatIntervalSeconds, but not while snoozed", async () => {
      const created = await webhook();
      const d = created.destination?.name ?? "";
      const { t0, rule, incident } = await fire(d, 60);
      await cpu(t0 + 30 * S, t0 + 200 * S, 97);
      await t.app.dispatcher.runOnce(t0);
      await t.app.evaluator.runCycle(t0 + 60 * S);
      await t.app.dispatcher.runOnce(t0 + 60 * S);
      const types = () => peer.received.map((r) => JSON.parse(r.body.toString()).type);
      assert.deepEqual(types(), ["incident.opened", "incident.repeat"]);
      t.clock.ms = t0 + 61 * S;
      await owner().incidents.snoozeIncident({
        name: incident.name,
        snoozeUntilUnix: BigInt((t0 + 600 * S) / 1000),
      });
      await t.app.evaluator.runCycle(t0 + 120 * S);
      await t.app.dispatcher.runOnce(t0 + 120 * S);
      assert.deepEqual(
        types(),
        ["incident.opened", "incident.repeat"],
        "a snoozed repeat is skipped, not queued",
      );
      await cleanup(rule.name, d);
    });

    it("one slow destination does not hold up another: both are attempted at once", async () => {
      const slow = await webhook("/slow");
      const fast = await webhook("/fast");
      const ds = [slow.destination?.name ?? "", fast.destination?.name ?? ""];
      let slowAnswered = false;
      let fastBeforeSlowAnswered = false;
      peer.respond = (r) => {
        if (r.path === "/slow") {
          setTimeout(() => {
            slowAnswered = true;
          }, 1000);
          return { status: 204, delayMs: 1000 };
        }
        fastBeforeSlowAnswered = !slowAnswered;
        return { status: 204 };
      };
      const t0 = t.clock.ms + 3600 * S;
      t.clock.ms = t0;
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
          destinationNames: ds,
        },
      });
      await cpu(t0 - 60 * S, t0 + 30 * S, 97);
      await t.app.evaluator.runCycle(t0);
      // The slow destination's delivery is due first, so a dispatcher that sent one at a time would
      // make the fast one wait for the slow answer.
      await fanout({ db: t.app.db.db, baseUrl: t.baseUrl, messageTtlMs: 86_400_000 }, t0);
      const slowId = (ds[0] ?? "").split("/").pop() ?? "";
      await t.app.db.db
        .updateTable("deliveries")
        .set({ next_attempt_time: t0 - 1000 })
        .where("destination_id", "=", slowId)
        .execute();
      const r = await t.app.dispatcher.runOnce(t0);
      assert.equal(r.sent, 2);
      assert.ok(fastBeforeSlowAnswered, "the fast destination did not wait for the slow one's answer");
      await owner().alerts.deleteAlertRule({ name: rule.name });
      for (const d of ds) await owner().destinations.deleteDestination({ name: d });
    });

    /** Queues `n` test messages for a destination straight into the outbox (no nudge), due at `atMs` + i. */
    async function queueTests(destination: string, n: number, atMs: number): Promise<string[]> {
      const destinationId = destination.slice(destination.lastIndexOf("/") + 1);
      const ids = Array.from({ length: n }, () => `dlv_${randomUUID()}`);
      await t.app.db.db
        .insertInto("deliveries")
        .values(
          ids.map((id, i) => ({
            id,
            project_id: projectId,
            destination_id: destinationId,
            event_id: `test:${randomUUID()}`,
            incident_id: null,
            event_type: "test",
            message: JSON.stringify({ type: "test", deliveryId: id, timeUnix: 0, project: p.projectName }),
            state: "PENDING" as const,
            skip_reason: "",
            create_time: atMs + i,
            expire_time: atMs + 86_400_000,
            next_attempt_time: atMs + i,
            attempt_count: 0,
            lease_until: null,
            update_time: atMs + i,
          })),
        )
        .execute();
      return ids;
    }
    async function stateOf(ids: string[]) {
      const rows = await t.app.db.db
        .selectFrom("deliveries")
        .select(["id", "state", "skip_reason", "attempt_count"])
        .where("id", "in", ids)
        .execute();
      return ids.map((id) => rows.find((r) => r.id === id));
    }

    /** A second dispatcher on the app's database and keys, with `concurrency` 2 (claims of 16). */
    function smallDispatcher() {
      const cfg = t.app.config;
      return createDispatcher({
        db: t.app.db.db,
        options: resolveNotifyOptions({ ...cfg.notify.options, concurrency: 2 }),
        sealer: createSealer(cfg.secretKey),
        mailer: createLogSender(t.app.log),
        post: (url, body, headers) =>
          postJson(url, body, headers, { timeoutMs: 10_000, allowHosts: ["127.0.0.1"], ca: tls.cert }),
        baseUrl: t.baseUrl,
        now: () => t.clock.ms,
        log: t.app.log,
      });
    }

    it("one dispatcher sends each destination's deliveries one at a time and in order across many claims", async () => {
      const ds = [await webhook("/o1"), await webhook("/o2"), await webhook("/o3")].map(
        (c) => c.destination?.name ?? "",
      );
      const at = t.clock.ms + 60 * S;
      t.clock.ms = at;
      const ids = await Promise.all(ds.map((d) => queueTests(d, 30, at)));
      let inFlight = 0;
      let most = 0;
      peer.respond = () => {
        inFlight++;
        most = Math.max(most, inFlight);
        setTimeout(() => inFlight--, 3);
        return { status: 204, delayMs: 3 };
      };
      const r = await smallDispatcher().runOnce(at + 100);
      assert.equal(r.sent, 90);
      ["/o1", "/o2", "/o3"].forEach((path, i) => {
        const order = peer.received.filter((x) => x.path === path).map((x) => x.headers["webhook-id"]);
        assert.deepEqual(order, ids[i], `${path} in the order queued`);
      });
      assert.ok(most <= 2, `at most concurrency (2) in flight, saw ${most}`);
      for (const d of ds) await owner().destinations.deleteDestination({ name: d });
    });

    it("two dispatchers on one database claim batches at once and never send a delivery twice", async () => {
      const ds = [await webhook("/a"), await webhook("/b"), await webhook("/c")].map(
        (c) => c.destination?.name ?? "",
      );
      const at = t.clock.ms + 60 * S;
      t.clock.ms = at;
      const ids = (await Promise.all(ds.map((d) => queueTests(d, 40, at)))).flat();
      // Two dispatchers with small batches (concurrency 2: 16 a claim), so that their claims interleave.
      const [one, two] = [smallDispatcher(), smallDispatcher()];
      // A pass whose claim loses the race for every row (PostgreSQL: both picked the same ids, the other
      // committed first) claims none and ends; the next pass goes on.
      let sent = 0;
      for (let round = 0; round < 10 && sent < ids.length; round++) {
        const totals = await Promise.all([one.runOnce(at + 100), two.runOnce(at + 100)]);
        sent += totals[0].sent + totals[1].sent;
      }
      const got = peer.received.map((r) => String(r.headers["webhook-id"]));
      assert.equal(new Set(got).size, ids.length, "every delivery was sent");
      assert.equal(got.length, ids.length, "and none twice");
      assert.equal(sent, ids.length);
      const rows = await stateOf(ids);
      assert.ok(rows.every((r) => r?.state === "SENT" && r.attempt_count === 1));
      for (const d of ds) await owner().destinations.deleteDestination({ name: d });
    });

    it(`a destination paused during an attempt longer than ${RECHECK_MAX_AGE_MS} ms is read again before its next delivery`, async () => {
      const created = await webhook("/slow-then-paused");
      const d = created.destination?.name ?? "";
      const destinationId = d.slice(d.lastIndexOf("/") + 1);
      const at = t.clock.ms + 60 * S;
      t.clock.ms = at;
      const ids = await queueTests(d, 2, at);
      peer.respond = () => {
        void t.app.db.db
          .updateTable("destinations")
          .set({ paused: 1 })
          .where("id", "=", destinationId)
          .execute();
        return { status: 204, delayMs: RECHECK_MAX_AGE_MS + 100 };
      };
      const r = await t.app.dispatcher.runOnce(at + 10);
      assert.deepEqual([r.sent, r.skipped], [1, 1]);
      const rows = await stateOf(ids);
      assert.deepEqual(
        rows.map((x) => [x?.state, x?.skip_reason]),
        [
          ["SENT", ""],
          ["SKIPPED", "DESTINATION_PAUSED"],
        ],
      );
      await owner().destinations.deleteDestination({ name: d });
    });

    it("after a failed attempt the next delivery to that destination is rechecked at once, however fresh its state", async () => {
      const created = await webhook("/failing-then-paused");
      const d = created.destination?.name ?? "";
      const destinationId = d.slice(d.lastIndexOf("/") + 1);
      const at = t.clock.ms + 60 * S;
      t.clock.ms = at;
      const ids = await queueTests(d, 2, at);
      peer.respond = () => {
        void t.app.db.db
          .updateTable("destinations")
          .set({ paused: 1 })
          .where("id", "=", destinationId)
          .execute();
        return { status: 500, delayMs: 20 };
      };
      await t.app.dispatcher.runOnce(at + 10);
      const rows = await stateOf(ids);
      assert.deepEqual(
        rows.map((x) => [x?.state, x?.skip_reason]),
        [
          ["PENDING", ""],
          ["SKIPPED", "DESTINATION_PAUSED"],
        ],
      );
      assert.equal(peer.received.length, 1);
      await owner().destinations.deleteDestination({ name: d });
    });

    it("a delivery that becomes due while a slow destination holds the pass is sent within about a poll interval, not after the slow queue", async () => {
      const slow = (await webhook("/slow-queue")).destination?.name ?? "";
      const fast = (await webhook("/fast-later")).destination?.name ?? "";
      const at = t.clock.ms + 60 * S;
      t.clock.ms = at;
      await queueTests(slow, 2, at);
      const arrived: Record<string, number> = {};
      peer.respond = (r) => {
        arrived[r.path] = performance.now();
        return r.path === "/slow-queue" ? { status: 204, delayMs: 1500 } : { status: 204 };
      };
      const started = performance.now();
      const pass = t.app.dispatcher.runOnce(at + 10);
      await new Promise((r) => setTimeout(r, 200));
      const [later] = await queueTests(fast, 1, at);
      const r = await pass;
      const ended = performance.now();
      assert.equal(r.sent, 3, "the later delivery went out in the same pass");
      assert.ok(
        arrived["/fast-later"] - started < 2500 && arrived["/fast-later"] < ended - 500,
        `sent ${Math.round(arrived["/fast-later"] - started)} ms into a ${Math.round(ended - started)} ms pass`,
      );
      assert.equal((await stateOf([later]))[0]?.state, "SENT");
      for (const d of [slow, fast]) await owner().destinations.deleteDestination({ name: d });
    });

    it("docs/notifications.md states the recheck's staleness bound the dispatcher uses", () => {
      const doc = readFileSync(new URL("../../../../docs/notifications.md", import.meta.url), "utf8");
      assert.ok(
        doc.includes(`checked against state at most ${RECHECK_MAX_AGE_MS} ms old`),
        "docs/notifications.md",
      );
    });

    it("chat destinations get the provider's payload, and their URL is never shown again", async () => {
      for (const [kind, check] of [
        ["SLACK", (b: Record<string, unknown>) => Array.isArray(b.blocks) && typeof b.text === "string"],
        ["TEAMS", (b: Record<string, unknown>) => b.type === "message" && Array.isArray(b.attachments)],
        ["DISCORD", (b: Record<string, unknown>) => Array.isArray(b.embeds)],
      ] as const) {
        const secretPath = `/services/T000/B000/${randomUUID()}`;
        const c = await owner().destinations.createDestination({
          projectName: p.projectName,
          displayName: kind,
          kind,
          url: `${peer.url}${secretPath}`,
          requestId: randomUUID(),
        });
        const d = c.destination?.name ?? "";
        assert.ok(!c.destination?.url.includes(secretPath));
        const { t0, rule } = await fire(d);
        await t.app.dispatcher.runOnce(t0);
        const got = peer.received.at(-1);
        assert.equal(got?.path, secretPath);
        assert.ok(check(JSON.parse(got?.body.toString() ?? "{}")), kind);
        await cleanup(rule.name, d);
        peer.received.length = 0;
      }
    });

    it("test sends and verification are human operations; keys are refused; a destination URL to a private address is refused", async () => {
      const created = await webhook();
      const d = created.destination?.name ?? "";
      const key = (
        await owner().keys.createKey({
          parent: p.projectName,
          displayName: "k",
          capabilities: ["monitoring.read", "monitoring.write", "notifications.write"],
          requestId: randomUUID(),
        })
      ).secret;
      const auto = t.clients(key);
      await rejects(auto.destinations.sendTestNotification({ name: d }), Code.PermissionDenied, "HUMAN_ONLY");
      await rejects(
        auto.destinations.verifyDestination({ name: d, code: "x" }),
        Code.PermissionDenied,
        "HUMAN_ONLY",
      );
      const test = await owner().destinations.sendTestNotification({ name: d });
      assert.equal(test.eventType, "test");
      await t.app.dispatcher.runOnce(t.clock.ms);
      const got = peer.received.at(-1);
      assert.equal(JSON.parse(got?.body.toString() ?? "{}").type, "test");
      await rejects(
        auto.destinations.createDestination({
          displayName: "meta",
          kind: "WEBHOOK",
          url: "https://169.254.169.254/latest",
          requestId: randomUUID(),
        }),
        Code.InvalidArgument,
        "INVALID_FIELD",
      );
      await owner().destinations.deleteDestination({ name: d });
    });
  });
}
