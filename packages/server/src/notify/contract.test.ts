import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { before, describe, it } from "node:test";
import { SvcError } from "@svc/sdk";
import pino from "pino";
import { testDialects } from "../../testing/dialects.ts";
import type { SeededProject, TestApp } from "../../testing/harness.ts";
import { type HttpsPeer, makeCertificate, startSshLikeServer } from "../../testing/https-peer.ts";
import { notifyFixture } from "../../testing/notify-fixture.ts";
import { ruleMetrics } from "../alerts/catalog.ts";
import { resolveAlertOptions } from "../alerts/options.ts";
import { loadConfig } from "../config.ts";
import { clampPageSize } from "../pagination.ts";
import { createLogSender } from "./channels/email.ts";
import { createDispatcher } from "./dispatcher.ts";
import { postJson } from "./http.ts";
import { resolveNotifyOptions } from "./options.ts";
import { fanout } from "./outbox.ts";
import { createSealer } from "./seal.ts";

/**
 * The notification contract's rows not covered elsewhere (issue 30, item 5), all on the test clock: the
 * whole retry schedule up to the 24 h give-up, a timed-out attempt retried, the 90-day history purge, the
 * default limits at their defaults, and previews that save and send nothing.
 */
const S = 1000;
const MIN = 60 * S;
const H = 60 * MIN;
const tls = makeCertificate();

it("the default limits are the spec's: 20 rules, 10,000 instances, page size 50, 5 destinations", () => {
  const dir = mkdtempSync(join(tmpdir(), "svc-limits-"));
  try {
    const config = loadConfig({}, { dataDir: dir });
    const alerts = resolveAlertOptions(config.alerts);
    const notify = resolveNotifyOptions(config.notify.options);
    assert.deepEqual(
      [alerts.maxRulesPerProject, alerts.maxInstancesPerProject, notify.maxDestinationsPerProject],
      [20, 10_000, 5],
    );
    assert.deepEqual(
      [clampPageSize(0), clampPageSize(51), clampPageSize(1_000), clampPageSize(7)],
      [50, 50, 50, 7],
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

for (const { dialect, skip } of await testDialects()) {
  describe(`the notification contract on the test clock (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let p: SeededProject;
    let peer: HttpsPeer;
    const projectId = "contract";
    const f = notifyFixture(dialect, { projectId, vmIds: ["vm-1"], tls });
    let vm1: string;

    before(() => {
      ({ t, p, peer } = f);
      [vm1] = p.vms;
    });

    let session = "";
    const owner = () => t.clients(session || p.owner.session);
    /** A new console session after the clock jumped past the old one's lifetime. */
    const relogin = async () => {
      session = (await t.clients().sessions.login({ email: p.owner.email, password: p.owner.password }))
        .sessionToken;
    };
    /** A dispatcher on the app's database with a fixed jitter (factor 1) and its own request timeout. */
    function dispatcher(
      requestTimeoutMs = 10_000,
      over: { pollIntervalMs?: number; delayMs?: number; log?: pino.Logger } = {},
    ) {
      const log = over.log ?? pino({ level: "silent" });
      const options = resolveNotifyOptions({
        allowHosts: ["127.0.0.1"],
        requestTimeoutMs,
        ...(over.pollIntervalMs ? { pollIntervalMs: over.pollIntervalMs } : {}),
      });
      return createDispatcher({
        db: t.app.db.db,
        options,
        sealer: createSealer(t.app.config.secretKey),
        mailer: createLogSender(pino({ level: "silent" })),
        post: async (url, body, headers) => {
          // A slow receiver: the first request to a URL ending in /slow answers after delayMs.
          if (over.delayMs && url.endsWith("/slow")) await new Promise((r) => setTimeout(r, over.delayMs));
          return postJson(url, body, headers, {
            timeoutMs: requestTimeoutMs,
            allowHosts: ["127.0.0.1"],
            ca: tls.cert,
          });
        },
        baseUrl: t.baseUrl,
        now: () => t.clock.ms,
        log,
        random: () => 0.5,
      });
    }
    async function webhook(name = "hook") {
      const d = await owner().destinations.createDestination({
        projectName: p.projectName,
        displayName: name,
        kind: "WEBHOOK",
        url: `${peer.url}/${name}`,
        requestId: randomUUID(),
      });
      return d.destination?.name ?? "";
    }
    const cpu = (fromMs: number, toMs: number, v: number) => f.cpu(vm1, fromMs, toMs, v);
    const spec = (over: Record<string, unknown> = {}) => ({
      displayName: "CPU high",
      metricId: "cpu_utilization_pct",
      operator: "GREATER_THAN",
      threshold: 90,
      sustainedSeconds: 0,
      severity: "CRITICAL",
      allVms: true,
      repeatIntervalSeconds: 0,
      destinationNames: [] as string[],
      ...over,
    });
    async function fire(destination: string) {
      const t0 = t.clock.ms + H;
      t.clock.ms = t0;
      const rule = await owner().alerts.saveAlertRule({
        projectName: p.projectName,
        id: randomUUID(),
        requestId: randomUUID(),
        expectedVersion: "0",
        spec: spec({ destinationNames: [destination] }),
      });
      await cpu(t0 - MIN, t0 + 30 * S, 97);
      await t.app.evaluator.runCycle(t0);
      return { t0, rule };
    }
    const only = async (destination: string) => {
      const { deliveries } = await owner().destinations.listDeliveries({
        projectName: p.projectName,
        destination,
      });
      assert.equal(deliveries.length, 1);
      return deliveries[0];
    };
    async function cleanup(rule: string, destination: string) {
      await owner().alerts.deleteAlertRule({ name: rule });
      await owner().destinations.deleteDestination({ name: destination });
      await dispatcher().runOnce(t.clock.ms);
    }

    it("a failing endpoint is tried on the whole schedule (5 s, 5 min, 30 min, 2 h, 5 h, 10 h after each failure), then the delivery is FAILED well inside 24 h", async () => {
      const d = await webhook("failing");
      const { t0, rule } = await fire(d);
      peer.respond = () => ({ status: 503 });
      const disp = dispatcher();
      const want = [0, 5 * S, 5 * MIN, 30 * MIN, 2 * H, 5 * H, 10 * H].reduce<number[]>(
        (acc, x) => [...acc, (acc.at(-1) ?? t0) + x],
        [],
      );
      let dl: Awaited<ReturnType<typeof only>> | undefined;
      for (const [i, at] of want.entries()) {
        // One second early nothing happens; at the due time the attempt is made.
        if (i > 0) {
          await disp.runOnce(at - S);
          assert.equal((await only(d)).attempts.length, i, `attempt ${i + 1} not before its time`);
        }
        await disp.runOnce(at);
        dl = await only(d);
        assert.equal(dl.attempts.length, i + 1);
        assert.equal(Number(dl.attempts[i].timeUnix) * 1000, Math.floor(at / 1000) * 1000);
        if (i < want.length - 1) {
          assert.equal(dl.state, "PENDING");
          assert.equal(Number(dl.nextAttemptTimeUnix), Math.floor(want[i + 1] / 1000));
        }
      }
      assert.equal(dl?.state, "FAILED");
      assert.ok(want.at(-1)! - t0 < 24 * H, "the last attempt is inside the 24 h retry period");
      const got = peer.received.filter((r) => r.path === "/failing");
      assert.equal(new Set(got.map((r) => r.headers["webhook-id"])).size, 1);
      assert.equal(new Set(got.map((r) => r.headers["svc-attempt-id"])).size, 7);
      await disp.runOnce(t0 + 25 * H);
      assert.equal((await only(d)).attempts.length, 7, "nothing after giving up");
      await cleanup(rule.name, d);
    });

    it("a pass kept open by a slow destination claims with the time of each claim: a lease that ran out meanwhile is taken (issue 48)", async () => {
      const slow = await webhook("slow");
      const other = await webhook("other");
      const t0 = t.clock.ms + H;
      t.clock.ms = t0;
      // One rule sending to both; the other's delivery is held by a replica that died, its lease ending
      // 300 ms into the pass that the slow destination keeps open for 3 s.
      const rule = await owner().alerts.saveAlertRule({
        projectName: p.projectName,
        id: randomUUID(),
        requestId: randomUUID(),
        expectedVersion: "0",
        spec: spec({ destinationNames: [slow, other] }),
      });
      await cpu(t0 - MIN, t0 + 30 * S, 97);
      await t.app.evaluator.runCycle(t0);
      const otherId = other.split("/").pop() ?? "";
      await fanout({ db: t.app.db.db, baseUrl: t.baseUrl, messageTtlMs: 86_400_000 }, t0);
      await t.app.db.db
        .updateTable("deliveries")
        .set({ lease_until: t0 + 300 })
        .where("destination_id", "=", otherId)
        .execute();
      try {
        const sent = await dispatcher(10_000, { pollIntervalMs: 50, delayMs: 3_000 }).runOnce(t0);
        assert.equal(sent.sent, 2, "the slow one and, during its attempt, the one whose lease ran out");
      } finally {
        await cleanup(rule.name, slow);
        await owner().destinations.deleteDestination({ name: other });
      }
    });

    it("an attempt that times out is a failure retried with the same DeliveryID, and sent once the endpoint answers", async () => {
      const d = await webhook("slow");
      const { t0, rule } = await fire(d);
      let release = () => {};
      const held = new Promise<void>((r) => {
        release = r;
      });
      peer.respond = () => ({ status: 204, hold: held });
      const disp = dispatcher(300);
      await disp.runOnce(t0);
      let dl = await only(d);
      assert.deepEqual(
        [dl.state, dl.attempts[0].status, dl.attempts[0].responseCode],
        ["PENDING", "FAILED", 0],
      );
      assert.match(dl.attempts[0].detail, /timed out/);
      assert.equal(Number(dl.nextAttemptTimeUnix) * 1000, t0 + 5 * S);
      release();
      peer.respond = () => ({ status: 204 });
      await disp.runOnce(t0 + 5 * S);
      dl = await only(d);
      assert.deepEqual([dl.state, dl.attempts.length], ["SENT", 2]);
      const [first, second] = peer.received.filter((r) => r.path === "/slow");
      assert.equal(first.headers["webhook-id"], second.headers["webhook-id"]);
      assert.notEqual(first.headers["svc-attempt-id"], second.headers["svc-attempt-id"]);
      await cleanup(rule.name, d);
    });

    it("an attempt's detail, which the tenant reads, says the class of failure (TLS handshake failed, connection refused), never the TLS library's text about what listens on the port; that goes to the operator's log", async () => {
      // An SSH server on an allowlisted port: a TLS client reads its banner as a bad record.
      const ssh = await startSshLikeServer();
      const lines: string[] = [];
      const log = pino({ level: "warn" }, { write: (line: string) => void lines.push(line) });
      const created = await owner().destinations.createDestination({
        projectName: p.projectName,
        displayName: "ssh port",
        kind: "WEBHOOK",
        url: `https://127.0.0.1:${ssh.port}/hook`,
        requestId: randomUUID(),
      });
      const d = created.destination?.name ?? "";
      try {
        const { t0, rule } = await fire(d);
        const disp = dispatcher(10_000, { log });
        await disp.runOnce(t0);
        // The port closes: the retry is refused.
        await ssh.close();
        await disp.runOnce(t0 + 10 * S);
        const dl = await only(d);
        assert.deepEqual(dl.attempts.map((a) => [a.status, a.detail]).sort(), [
          ["FAILED", "TLS handshake failed"],
          ["FAILED", "connection refused"],
        ]);
        const raw = lines.map((l) => JSON.parse(l) as { msg: string; error?: string; deliveryId?: string });
        const mine = raw.filter((l) => l.deliveryId === dl.deliveryId);
        assert.equal(mine.length, 2, "each failure is in the operator's log");
        assert.ok(
          mine.some((l) => /SSL|EPROTO|ECONNRESET|socket/i.test(l.error ?? "")),
          JSON.stringify(mine),
        );
        assert.ok(
          mine.some((l) => /ECONNREFUSED/.test(l.error ?? "")),
          JSON.stringify(mine),
        );
        await cleanup(rule.name, d);
      } finally {
        await ssh.close().catch(() => {});
      }
    });

    it("delivery history is kept 90 days after its last change, then purged with its attempts", async () => {
      const d = await webhook("history");
      const { t0, rule } = await fire(d);
      const disp = dispatcher();
      await disp.runOnce(t0);
      const dl = await only(d);
      assert.equal(dl.state, "SENT");
      const silence = await owner().silences.createSilence({
        projectName: p.projectName,
        requestId: randomUUID(),
        comment: "ends at once",
        ruleNames: [rule.name],
        startTimeUnix: 0n,
        endTimeUnix: BigInt(Math.floor(t0 / 1000) + 60),
      });
      const attempts = () =>
        t.app.db.db
          .selectFrom("delivery_attempts")
          .select("id")
          .where("delivery_id", "=", dl.deliveryId)
          .execute();
      assert.equal((await attempts()).length, 1);
      await disp.runOnce(t0 + 90 * 24 * H - H);
      assert.equal((await only(d)).deliveryId, dl.deliveryId, "kept for 90 days");
      assert.equal(
        (
          await t.app.db.db
            .selectFrom("silences")
            .select("id")
            .where("id", "=", silence.name.split("/").pop() ?? "")
            .execute()
        ).length,
        1,
        "and so is the silence",
      );
      await disp.runOnce(t0 + 90 * 24 * H + H);
      t.clock.ms = t0 + 90 * 24 * H + H;
      await relogin();
      const { deliveries } = await owner().destinations.listDeliveries({
        projectName: p.projectName,
        destination: d,
      });
      assert.equal(deliveries.length, 0, "purged after 90 days");
      assert.equal((await attempts()).length, 0);
      const silences = (await owner().silences.listSilences({ projectName: p.projectName })).silences;
      assert.ok(
        !silences.some((x) => x.name === silence.name),
        "an ended silence is purged with the history",
      );
      await cleanup(rule.name, d);
    });

    it("at the defaults: a 6th destination and a 21st rule are refused, and a listing's page holds 50", async () => {
      const made: string[] = [];
      for (let i = 0; i < 5; i++) made.push(await webhook(`d${i}`));
      const sixth = await SvcError.fromError(
        await webhook("d5").then(
          () => assert.fail("a 6th destination"),
          (e: unknown) => e,
        ),
      );
      assert.deepEqual([sixth.reason, sixth.info.limit], ["DESTINATION_LIMIT_EXCEEDED", "5"]);
      const rules: string[] = [];
      for (let i = 0; i < 20; i++)
        rules.push(
          (
            await owner().alerts.saveAlertRule({
              projectName: p.projectName,
              id: randomUUID(),
              requestId: randomUUID(),
              expectedVersion: "0",
              spec: spec({ displayName: `r${i}`, enabled: false }),
            })
          ).name,
        );
      const e = SvcError.fromError(
        await owner()
          .alerts.saveAlertRule({
            projectName: p.projectName,
            id: randomUUID(),
            requestId: randomUUID(),
            expectedVersion: "0",
            spec: spec({ displayName: "r20", enabled: false }),
          })
          .then(
            () => assert.fail("a 21st rule"),
            (x: unknown) => x,
          ),
      );
      assert.deepEqual([e.reason, e.info.limit], ["RULE_LIMIT_EXCEEDED", "20"]);
      // 51 test sends: the first page holds 50 whatever the asked size above it.
      for (let i = 0; i < 51; i++) await owner().destinations.sendTestNotification({ name: made[0] });
      for (const pageSize of [0, 50, 500]) {
        const page = await owner().destinations.listDeliveries({
          projectName: p.projectName,
          destination: made[0],
          pageSize,
        });
        assert.equal(page.deliveries.length, 50, `pageSize ${pageSize}`);
        assert.ok(page.nextPageToken);
      }
      for (const r of rules) await owner().alerts.deleteAlertRule({ name: r });
      for (const d of made) await owner().destinations.deleteDestination({ name: d });
      await dispatcher().runOnce(t.clock.ms);
    });

    it("previews of every rule kind save nothing and send nothing", async () => {
      const d = await webhook("preview");
      const t0 = t.clock.ms + H;
      t.clock.ms = t0;
      await cpu(t0 - 2 * H, t0, 97);
      const disp = dispatcher();
      await disp.runOnce(t0);
      peer.received.length = 0;
      const tables = [
        "alert_rules",
        "alert_rule_revisions",
        "alert_instances",
        "incidents",
        "incident_events",
        "deliveries",
        "delivery_attempts",
        "idempotency_records",
        "silences",
      ] as const;
      const snapshot = async () => {
        const out: Record<string, unknown[]> = {};
        for (const table of tables) out[table] = await t.app.db.db.selectFrom(table).selectAll().execute();
        return out;
      };
      const before = await snapshot();
      const specs = [...ruleMetrics.values()].map((m) =>
        spec({
          displayName: m.id,
          metricId: m.id,
          threshold: m.kind === "unexpected_stop" ? 0 : m.kind === "telemetry_age" ? 60 : 1,
          destinationNames: [d],
          repeatIntervalSeconds: 60,
        }),
      );
      specs.push(
        spec({
          metricId: "filesystem_used_pct",
          operator: "GREATER_THAN_OR_EQUAL",
          threshold: 100,
          forecastHorizonSeconds: 3600,
          forecastLookbackSeconds: 3600,
          destinationNames: [d],
        }),
      );
      const kinds = new Set([...ruleMetrics.values()].map((m) => m.kind));
      assert.deepEqual([...kinds].sort(), ["gauge", "rate", "ratio", "telemetry_age", "unexpected_stop"]);
      let fired = 0;
      for (const s of specs) {
        const r = await owner().alerts.previewAlertRule({
          projectName: p.projectName,
          spec: s,
          historySeconds: 3600,
        });
        assert.equal(r.queryStatus, "OK", `${s.metricId}: ${r.queryMessage}`);
        fired += r.firingInstances;
      }
      assert.ok(fired > 0, "the CPU preview would have fired: there was something to send");
      await disp.runOnce(t0);
      assert.deepEqual(await snapshot(), before, "no row written");
      assert.equal(peer.received.length, 0, "nothing sent");
      await owner().destinations.deleteDestination({ name: d });
    });
  });
}
