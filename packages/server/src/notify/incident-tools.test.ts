import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { before, describe, it } from "node:test";
import { SvcError } from "@svc/sdk";
import { testDialects } from "../../testing/dialects.ts";
import type { SeededProject, TestApp } from "../../testing/harness.ts";
import { type HttpsPeer, makeCertificate, type PeerAnswer, type Received } from "../../testing/https-peer.ts";
import { notifyFixture } from "../../testing/notify-fixture.ts";

const S = 1000;
const tls = makeCertificate();
const ROUTING_KEY = "R0ut1ngKeyR0ut1ngKeyR0ut1ngKey12";
const GENIE_KEY = "0d4f1c2e-5b6a-4c3d-9e8f-7a6b5c4d3e2f";

/**
 * A PagerDuty Events API v2 receiver: checks the documented request shape of /v2/enqueue and answers as
 * PagerDuty does (202 with the dedup_key, 400 with `errors`), keeping each dedup_key's state.
 */
function pagerDuty() {
  const incidents = new Map<string, "triggered" | "acknowledged" | "resolved">();
  const invalid = (errors: string[]): PeerAnswer => ({
    status: 400,
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ status: "invalid event", message: "Event object is invalid", errors }),
  });
  const answer = (r: Received): PeerAnswer => {
    const errors: string[] = [];
    if (r.path !== "/v2/enqueue") return { status: 404 };
    if (!String(r.headers["content-type"]).startsWith("application/json"))
      errors.push("Content-Type must be application/json");
    let e: Record<string, unknown>;
    try {
      e = JSON.parse(r.body.toString());
    } catch {
      return invalid(["Body is not JSON"]);
    }
    if (e.routing_key !== ROUTING_KEY) errors.push("'routing_key' is invalid");
    const action = e.event_action;
    if (action !== "trigger" && action !== "acknowledge" && action !== "resolve")
      errors.push("'event_action' is invalid (must be one of: trigger, acknowledge, resolve)");
    const key = e.dedup_key;
    if (typeof key !== "string" || key.length === 0 || key.length > 255)
      errors.push("'dedup_key' is invalid");
    if (action === "trigger") {
      const payload = e.payload as Record<string, unknown> | undefined;
      if (!payload) errors.push("'payload' is missing");
      else {
        if (typeof payload.summary !== "string" || !payload.summary || payload.summary.length > 1024)
          errors.push("'payload.summary' is missing or too long");
        if (typeof payload.source !== "string" || !payload.source) errors.push("'payload.source' is missing");
        if (!["critical", "error", "warning", "info"].includes(String(payload.severity)))
          errors.push("'payload.severity' is invalid");
        if (payload.timestamp !== undefined && Number.isNaN(Date.parse(String(payload.timestamp))))
          errors.push("'payload.timestamp' is invalid");
      }
    }
    for (const l of (e.links as { href?: unknown }[] | undefined) ?? [])
      if (typeof l.href !== "string") errors.push("'links[].href' is missing");
    if (errors.length > 0) return invalid(errors);
    const k = key as string;
    if (action === "trigger") incidents.set(k, "triggered");
    else if (incidents.has(k)) incidents.set(k, action === "acknowledge" ? "acknowledged" : "resolved");
    return {
      status: 202,
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ status: "success", message: "Event processed", dedup_key: k }),
    };
  };
  return { incidents, answer };
}

/**
 * An Opsgenie Alert API receiver: `Authorization: GenieKey <key>`, create at /v2/alerts (message ≤ 130,
 * alias ≤ 512), acknowledge and close at /v2/alerts/{alias}/…?identifierType=alias; answers 202 with a
 * requestId, or 422 / 401 with a message as Opsgenie does.
 */
function opsgenie(peer: HttpsPeer) {
  const alerts = new Map<string, "open" | "acknowledged" | "closed">();
  const json = (status: number, o: unknown): PeerAnswer => ({
    status,
    headers: { "content-type": "application/json" },
    body: JSON.stringify(o),
  });
  const answer = (r: Received): PeerAnswer => {
    if (r.headers.authorization !== `GenieKey ${GENIE_KEY}`)
      return json(401, { message: "Could not authenticate", took: 0.001, requestId: randomUUID() });
    const u = new URL(r.path, peer.url);
    const body = JSON.parse(r.body.toString()) as Record<string, unknown>;
    const accepted = json(202, { result: "Request will be processed", took: 0.01, requestId: randomUUID() });
    if (u.pathname === "/v2/alerts") {
      const m = body.message;
      if (typeof m !== "string" || !m || m.length > 130)
        return json(422, { message: "Message can not be empty or longer than 130", took: 0, requestId: "x" });
      if (typeof body.alias !== "string" || body.alias.length > 512)
        return json(422, { message: "Alias is invalid", took: 0, requestId: "x" });
      if (!["P1", "P2", "P3", "P4", "P5"].includes(String(body.priority)))
        return json(422, { message: "Priority is invalid", took: 0, requestId: "x" });
      alerts.set(body.alias, "open");
      return accepted;
    }
    const op = /^\/v2\/alerts\/([^/]+)\/(acknowledge|close)$/.exec(u.pathname);
    if (!op || u.searchParams.get("identifierType") !== "alias") return json(404, { message: "Not found" });
    const alias = decodeURIComponent(op[1]);
    if (alerts.has(alias)) alerts.set(alias, op[2] === "acknowledge" ? "acknowledged" : "closed");
    return accepted;
  };
  return { alerts, answer };
}

async function refusal(p: Promise<unknown>): Promise<SvcError> {
  try {
    await p;
  } catch (err) {
    return SvcError.fromError(err);
  }
  assert.fail("expected a refusal");
}

for (const { dialect, skip } of await testDialects()) {
  describe(`PagerDuty and Opsgenie destinations (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let p: SeededProject;
    let peer: HttpsPeer;
    const projectId = "oncall";
    const f = notifyFixture(dialect, { projectId, vmIds: ["vm-1"], tls });
    let vm1: string;

    before(() => {
      ({ t, p, peer } = f);
      [vm1] = p.vms;
    });

    const owner = () => t.clients(p.owner.session);
    const cpu = (fromMs: number, toMs: number, v: number) => f.cpu(vm1, fromMs, toMs, v);
    /** A rule notifying `destinations` fires at once; returns the rule, the incident and the time. */
    async function fire(destinations: string[]) {
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
          destinationNames: destinations,
          repeatIntervalSeconds: 0,
        },
      });
      await cpu(t0 - 60 * S, t0 + 30 * S, 97);
      await t.app.evaluator.runCycle(t0);
      const [incident] = (
        await owner().incidents.listIncidents({ projectName: p.projectName, rule: rule.name })
      ).incidents;
      return { t0, rule, incident };
    }
    async function recover(t0: number) {
      t.clock.ms = t0 + 60 * S;
      await cpu(t0 + 30 * S, t0 + 90 * S, 10);
      await t.app.evaluator.runCycle(t.clock.ms);
      await t.app.dispatcher.runOnce(t.clock.ms);
    }
    const deliveries = async (destination: string) =>
      (await owner().destinations.listDeliveries({ projectName: p.projectName, destination })).deliveries;
    const destinationCount = async () =>
      Number(
        (
          await t.app.db.db
            .selectFrom("destinations")
            .select((eb) => eb.fn.countAll<number>().as("n"))
            .where("delete_time", "is", null)
            .executeTakeFirstOrThrow()
        ).n,
      );

    it("a key of the wrong shape is a 400 naming integrationKey that never echoes it, and nothing is saved", async () => {
      const before = await destinationCount();
      const cases: [string, string, string, string][] = [
        ["PAGERDUTY", "short-key-123", "", "integrationKey"],
        ["PAGERDUTY", "", "", "integrationKey"],
        ["OPSGENIE", "not-a-uuid-but-a-secret", "", "integrationKey"],
        ["PAGERDUTY", ROUTING_KEY, "https://hooks.slack.com/services/x", "url"],
        ["WEBHOOK", ROUTING_KEY, `${peer.url}/x`, "integrationKey"],
      ];
      for (const [kind, integrationKey, url, field] of cases) {
        const e = await refusal(
          owner().destinations.createDestination({
            projectName: p.projectName,
            displayName: "pd",
            kind,
            integrationKey,
            url,
            requestId: randomUUID(),
          }),
        );
        assert.deepEqual([e.reason, e.field], ["INVALID_FIELD", field], `${kind} ${integrationKey}`);
        if (integrationKey) assert.ok(!e.message.includes(integrationKey), "the key is not echoed");
      }
      assert.equal(await destinationCount(), before);
    });

    it("PagerDuty: the opening triggers, acknowledging in svc acknowledges and the recovery resolves one dedup_key; the key is sealed", async () => {
      const pd = pagerDuty();
      peer.received.length = 0;
      peer.respond = pd.answer;
      const created = await owner().destinations.createDestination({
        projectName: p.projectName,
        displayName: "PagerDuty",
        kind: "PAGERDUTY",
        integrationKey: ROUTING_KEY,
        url: `${peer.url}/v2/enqueue`,
        requestId: randomUUID(),
      });
      const d = created.destination?.name ?? "";
      assert.equal(created.destination?.url, `${peer.url}/v2/enqueue`);
      const row = await t.app.db.db
        .selectFrom("destinations")
        .select(["sealed_key"])
        .where("id", "=", d.split("/").pop() ?? "")
        .executeTakeFirstOrThrow();
      assert.ok(row.sealed_key.startsWith("v1:") && !row.sealed_key.includes(ROUTING_KEY), "sealed at rest");
      assert.ok(
        !JSON.stringify(await owner().destinations.getDestination({ name: d }), (_k, v) =>
          typeof v === "bigint" ? String(v) : v,
        ).includes(ROUTING_KEY),
      );
      const hook = await owner().destinations.createDestination({
        projectName: p.projectName,
        displayName: "hook",
        kind: "WEBHOOK",
        url: `${peer.url}/hook`,
        requestId: randomUUID(),
      });
      const h = hook.destination?.name ?? "";
      const { t0, rule, incident } = await fire([d, h]);
      await t.app.dispatcher.runOnce(t0);
      const events = () =>
        peer.received.filter((r) => r.path === "/v2/enqueue").map((r) => JSON.parse(r.body.toString()));
      const [trigger] = events();
      assert.equal(trigger.event_action, "trigger");
      assert.equal(trigger.payload.severity, "critical");
      assert.equal(trigger.payload.source, vm1);
      assert.match(trigger.payload.summary, /^FIRING: CPU high on vm-1/);
      const key = trigger.dedup_key as string;
      assert.equal(pd.incidents.get(key), "triggered");
      const [sent] = await deliveries(d);
      assert.equal(sent.state, "SENT");
      assert.equal(sent.attempts[0].responseCode, 202);
      assert.match(sent.attempts[0].detail, new RegExp(`dedup_key ${key}`));

      await owner().incidents.acknowledgeIncident({ name: incident.name });
      await t.app.dispatcher.runOnce(t0 + 10 * S);
      assert.equal(events().at(-1)?.event_action, "acknowledge");
      assert.equal(events().at(-1)?.dedup_key, key);
      assert.equal(pd.incidents.get(key), "acknowledged");
      assert.ok(
        (await deliveries(h)).every((x) => x.eventType !== "incident.acknowledged"),
        "a webhook is not told of acknowledgements",
      );

      await recover(t0);
      assert.equal(events().at(-1)?.event_action, "resolve");
      assert.equal(pd.incidents.get(key), "resolved");
      assert.deepEqual((await deliveries(d)).map((x) => [x.eventType, x.state]).sort(), [
        ["incident.acknowledged", "SENT"],
        ["incident.opened", "SENT"],
        ["incident.resolved", "SENT"],
      ]);
      await owner().alerts.deleteAlertRule({ name: rule.name });
      await owner().destinations.deleteDestination({ name: h });
      await owner().destinations.deleteDestination({ name: d });
    });

    it("PagerDuty: a 400 is a failed attempt whose detail carries PagerDuty's errors; a 429 waits for Retry-After", async () => {
      const pd = pagerDuty();
      const created = await owner().destinations.createDestination({
        projectName: p.projectName,
        displayName: "PagerDuty",
        kind: "PAGERDUTY",
        integrationKey: ROUTING_KEY,
        url: `${peer.url}/v2/enqueue`,
        requestId: randomUUID(),
      });
      const d = created.destination?.name ?? "";
      // The routing key is changed to one PagerDuty does not know (same shape), then back.
      await owner().destinations.updateDestination({ name: d, integrationKey: "X".repeat(32) });
      peer.respond = pd.answer;
      const { t0, rule } = await fire([d]);
      await t.app.dispatcher.runOnce(t0);
      let [dl] = await deliveries(d);
      assert.deepEqual([dl.state, dl.attempts[0].responseCode], ["PENDING", 400]);
      assert.match(dl.attempts[0].detail, /HTTP 400: Event object is invalid, 'routing_key' is invalid/);
      await owner().destinations.updateDestination({ name: d, integrationKey: ROUTING_KEY });
      peer.respond = () => ({
        status: 429,
        headers: { "retry-after": "120", "content-type": "application/json" },
        body: JSON.stringify({
          status: "throttle event",
          message: "Requests for this service are arriving too quickly",
        }),
      });
      const at2 = (Number(dl.nextAttemptTimeUnix) + 1) * 1000;
      await t.app.dispatcher.runOnce(at2);
      [dl] = await deliveries(d);
      assert.equal(dl.attempts.at(-1)?.responseCode, 429);
      assert.ok(Number(dl.nextAttemptTimeUnix) * 1000 - at2 >= 119 * S, "Retry-After: 120 is honoured");
      peer.respond = pd.answer;
      await t.app.dispatcher.runOnce((Number(dl.nextAttemptTimeUnix) + 1) * 1000);
      [dl] = await deliveries(d);
      assert.deepEqual([dl.state, dl.attempts.length], ["SENT", 3]);
      assert.equal(new Set(dl.attempts.map((a) => a.attemptId)).size, 3);
      await owner().alerts.deleteAlertRule({ name: rule.name });
      await owner().destinations.deleteDestination({ name: d });
      await t.app.dispatcher.runOnce(t.clock.ms + 3600 * S);
    });

    it("Opsgenie: the opening creates an alert by alias with the GenieKey header, acknowledging acknowledges it and the recovery closes it", async () => {
      const og = opsgenie(peer);
      peer.received.length = 0;
      peer.respond = og.answer;
      const created = await owner().destinations.createDestination({
        projectName: p.projectName,
        displayName: "Opsgenie",
        kind: "OPSGENIE",
        integrationKey: GENIE_KEY,
        url: `${peer.url}/v2/alerts`,
        requestId: randomUUID(),
      });
      const d = created.destination?.name ?? "";
      const { t0, rule, incident } = await fire([d]);
      await t.app.dispatcher.runOnce(t0);
      const create = JSON.parse(peer.received[0].body.toString());
      assert.equal(peer.received[0].path, "/v2/alerts");
      assert.equal(create.priority, "P1");
      assert.equal(create.entity, vm1);
      assert.equal(og.alerts.get(create.alias), "open");
      await owner().incidents.acknowledgeIncident({ name: incident.name });
      await t.app.dispatcher.runOnce(t0 + 10 * S);
      assert.match(peer.received.at(-1)?.path ?? "", /\/acknowledge\?identifierType=alias$/);
      assert.equal(og.alerts.get(create.alias), "acknowledged");
      await recover(t0);
      assert.match(peer.received.at(-1)?.path ?? "", /\/close\?identifierType=alias$/);
      assert.equal(og.alerts.get(create.alias), "closed");
      const ds = await deliveries(d);
      assert.ok(ds.every((x) => x.state === "SENT" && x.attempts[0].responseCode === 202));
      assert.match(ds[0].attempts[0].detail, /Request will be processed, requestId /);
      await owner().alerts.deleteAlertRule({ name: rule.name });
      await owner().destinations.deleteDestination({ name: d });
    });

    it("Opsgenie: a 422 carries Opsgenie's message, a wrong key is a 401 that never shows the key, a 429 waits for Retry-After", async () => {
      const og = opsgenie(peer);
      const created = await owner().destinations.createDestination({
        projectName: p.projectName,
        displayName: "Opsgenie",
        kind: "OPSGENIE",
        integrationKey: "ffffffff-ffff-4fff-8fff-ffffffffffff",
        url: `${peer.url}/v2/alerts`,
        requestId: randomUUID(),
      });
      const d = created.destination?.name ?? "";
      peer.respond = og.answer;
      const { t0, rule } = await fire([d]);
      await t.app.dispatcher.runOnce(t0);
      let [dl] = await deliveries(d);
      assert.deepEqual([dl.state, dl.attempts[0].responseCode], ["PENDING", 401]);
      assert.match(dl.attempts[0].detail, /HTTP 401: Could not authenticate/);
      assert.ok(!dl.attempts[0].detail.includes("ffffffff"), "the key is not in the detail");
      await owner().destinations.updateDestination({ name: d, integrationKey: GENIE_KEY });
      peer.respond = () => ({
        status: 429,
        headers: { "retry-after": "90", "content-type": "application/json" },
        body: JSON.stringify({ message: "You are making too many requests!", took: 0, requestId: "r" }),
      });
      const at2 = (Number(dl.nextAttemptTimeUnix) + 1) * 1000;
      await t.app.dispatcher.runOnce(at2);
      [dl] = await deliveries(d);
      assert.equal(dl.attempts.at(-1)?.responseCode, 429);
      assert.match(dl.attempts.at(-1)?.detail ?? "", /too many requests/);
      assert.ok(Number(dl.nextAttemptTimeUnix) * 1000 - at2 >= 89 * S, "Retry-After: 90 is honoured");
      peer.respond = (r) =>
        r.path === "/v2/alerts"
          ? {
              status: 422,
              headers: { "content-type": "application/json" },
              body: JSON.stringify({ message: "Request body is not processable", took: 0, requestId: "r" }),
            }
          : og.answer(r);
      await t.app.dispatcher.runOnce((Number(dl.nextAttemptTimeUnix) + 1) * 1000);
      [dl] = await deliveries(d);
      assert.equal(dl.attempts.at(-1)?.responseCode, 422);
      assert.match(dl.attempts.at(-1)?.detail ?? "", /HTTP 422: Request body is not processable/);
      await owner().alerts.deleteAlertRule({ name: rule.name });
      await owner().destinations.deleteDestination({ name: d });
      await t.app.dispatcher.runOnce(t.clock.ms + 3600 * S);
    });
  });
}
