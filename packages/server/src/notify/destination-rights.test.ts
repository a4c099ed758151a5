import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, beforeEach, describe, it } from "node:test";
import { Code } from "@connectrpc/connect";
import { ErrorInfoSchema } from "@svc/sdk/gen/google/rpc/error_details_pb";
import SQLite from "better-sqlite3";
import { Kysely, Migrator, PostgresDialect, SqliteDialect } from "kysely";
import pg from "pg";
import { rejectsWith } from "../../testing/assert.ts";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import { type HttpsPeer, makeCertificate, startHttpsPeer } from "../../testing/https-peer.ts";
import { migrations } from "../db/migrations/index.ts";
import type { Database } from "../db/schema.ts";
import type { SvcError } from "../errors.ts";
import { type Capability, methodAccess, serviceAccountTemplates } from "../iam/capabilities.ts";
import { authenticate, authorizeProject } from "../iam/principal.ts";
import { generateSecret, hashSecret, secretHint } from "../iam/secrets.ts";

/** Issue 34: least privilege for notification routes. */
const tls = makeCertificate();

for (const { dialect, skip } of await testDialects()) {
  describe(`destination rights (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let p: SeededProject;
    let peer: HttpsPeer;
    let writeKey: string; // the demo's "Alert manager": monitoring.read + monitoring.write
    let notifyKey: string; // "Notification manager": monitoring.read + notifications.write
    let notifyKeyName: string;

    before(async () => {
      peer = await startHttpsPeer(tls);
      t = await startTestApp(dialect, {
        notify: { dispatcherAutoStart: false, ca: tls.cert, options: { allowHosts: ["127.0.0.1"] } },
      });
      p = await t.seedProject("rights", ["vm-1"]);
      const owner = t.clients(p.owner.session);
      const key = async (template: string) => {
        const sa = await owner.serviceAccounts.createServiceAccount({
          parent: p.projectName,
          displayName: template,
          template,
        });
        const k = await owner.keys.createKey({
          parent: sa.name,
          displayName: template,
          capabilities: [...serviceAccountTemplates[template]],
          requestId: randomUUID(),
        });
        return { secret: k.secret ?? "", name: k.key?.name ?? "" };
      };
      writeKey = (await key("Alert manager")).secret;
      const n = await key("Notification manager");
      notifyKey = n.secret;
      notifyKeyName = n.name;
    });
    after(async () => {
      await t?.close();
      await peer?.close();
    });
    beforeEach(() => {
      peer.received.length = 0;
    });

    const owner = () => t.clients(p.owner.session);
    const webhookBy = (token: string, path = "/hook") =>
      t.clients(token).destinations.createDestination({
        projectName: p.projectName,
        displayName: `hook ${path}`,
        kind: "WEBHOOK",
        url: `${peer.url}${path}`,
        requestId: randomUUID(),
      });
    const saveRule = (token: string, destinationNames: string[], displayName = "cpu") =>
      t.clients(token).alerts.saveAlertRule({
        projectName: p.projectName,
        id: randomUUID(),
        requestId: randomUUID(),
        expectedVersion: "0",
        spec: {
          displayName,
          metricId: "cpu_utilization_pct",
          operator: "GREATER_THAN",
          threshold: 90,
          sustainedSeconds: 60,
          severity: "WARNING",
          allVms: true,
          destinationNames,
        },
      });

    /**
     * One call per destination-managing row of the capability table, on a fresh destination; a row
     * added to the table without a call here fails the test below.
     */
    const calls: Record<string, (token: string, destination: string) => Promise<unknown>> = {
      "svc.monitoring.v1.DestinationService/CreateDestination": (token) => webhookBy(token, "/new"),
      "svc.monitoring.v1.DestinationService/UpdateDestination": (token, name) =>
        t.clients(token).destinations.updateDestination({ name, displayName: "renamed" }),
      "svc.monitoring.v1.DestinationService/DeleteDestination": (token, name) =>
        t.clients(token).destinations.deleteDestination({ name }),
      "svc.monitoring.v1.DestinationService/RotateWebhookSecret": (token, name) =>
        t.clients(token).destinations.rotateWebhookSecret({ name, overlapSeconds: 60 }),
    };

    it("every destination-managing method needs notifications.write: refused to a monitoring.write key, allowed with the new capability", async () => {
      const rows = Object.entries(methodAccess)
        .filter(([, access]) => access === "notifications.write")
        .map(([method]) => method);
      assert.deepEqual(rows.sort(), Object.keys(calls).sort());
      for (const method of rows) {
        const d = (await webhookBy(p.owner.session, "/target")).destination?.name ?? "";
        const err = await rejectsWith(calls[method](writeKey, d), Code.PermissionDenied, "CAPABILITY");
        assert.equal(err.findDetails(ErrorInfoSchema)[0]?.metadata.capability, "notifications.write", method);
        await calls[method](notifyKey, d);
        await owner()
          .destinations.deleteDestination({ name: d })
          .catch(() => {});
      }
      for (const d of (await owner().destinations.listDestinations({ projectName: p.projectName }))
        .destinations)
        await owner().destinations.deleteDestination({ name: d.name });
    });

    it("ListMembers names the project's members with their emails, by display name, for those who manage destinations (issue 27)", async () => {
      const viewer = await t.admin.users.createUser({
        email: `ada-${randomUUID()}@example.com`,
        password: "correct horse battery staple",
        displayName: "Ada Lovelace",
      });
      await t.admin.projects.setMember({ project: p.projectName, user: viewer.name, role: "viewer" });
      const other = await t.seedProject(`rights-other-${randomUUID().slice(0, 8)}`, []);
      const seen = (await owner().destinations.listMembers({ projectName: p.projectName })).members;
      assert.deepEqual(
        seen.map((m) => [m.user, m.displayName, m.email, m.role]),
        [
          [viewer.name, "Ada Lovelace", viewer.email, "viewer"],
          [p.owner.user, "Owner", p.owner.email, "owner"],
        ],
      );
      assert.ok(!seen.some((m) => m.user === other.owner.user), "another project's owner is not listed");
      // A notifications.write key reads them without naming its project; a monitoring.write key cannot.
      const byKey = await t.clients(notifyKey).destinations.listMembers({});
      assert.equal(byKey.members.length, 2);
      await rejectsWith(
        t.clients(writeKey).destinations.listMembers({ projectName: p.projectName }),
        Code.PermissionDenied,
        "CAPABILITY",
      );
      await rejectsWith(
        t.clients(other.owner.session).destinations.listMembers({ projectName: p.projectName }),
        Code.PermissionDenied,
        "PROJECT_BOUNDARY",
      );
      await t.admin.projects.removeMember({ project: p.projectName, user: viewer.name });
    });

    it("the demo's write key still saves and deletes rules, naming existing destinations", async () => {
      const d = (await webhookBy(p.owner.session)).destination?.name ?? "";
      const rule = await saveRule(writeKey, [d]);
      assert.deepEqual(rule.spec?.destinationNames, [d]);
      await t.clients(writeKey).alerts.deleteAlertRule({ name: rule.name });
      await owner().destinations.deleteDestination({ name: d });
    });

    it("notifications.write is chosen explicitly: only its template or a member's role grants it, and old templates never imply it", async () => {
      assert.deepEqual(serviceAccountTemplates["Notification manager"], [
        "monitoring.read",
        "notifications.write",
      ]);
      for (const [name, caps] of Object.entries(serviceAccountTemplates))
        if (name !== "Notification manager") assert.ok(!caps.includes("notifications.write"), name);
      const sa = await owner().serviceAccounts.createServiceAccount({
        parent: p.projectName,
        displayName: "am",
        template: "Alert manager",
      });
      await rejectsWith(
        owner().keys.createKey({
          parent: sa.name,
          displayName: "k",
          capabilities: ["monitoring.write", "notifications.write"],
          requestId: randomUUID(),
        }),
        Code.InvalidArgument,
        "INVALID_FIELD",
      );
      // A personal key of an owner may carry it when asked for; one made without it never has it.
      const personal = await owner().keys.createKey({
        parent: p.projectName,
        displayName: "mine",
        capabilities: ["notifications.write"],
        requestId: randomUUID(),
      });
      assert.deepEqual(personal.key?.capabilities, ["notifications.write"]);
    });

    it("a webhook a key creates stays paused until a person confirms it: nothing is delivered before", async () => {
      const created = await webhookBy(notifyKey, "/exfiltrate");
      const d = created.destination;
      assert.ok(d);
      assert.equal(d.awaitingConfirmation, true);
      assert.equal(d.creator, notifyKeyName);
      assert.equal(d.confirmationRequestedBy, notifyKeyName);
      // A rule firing into it and a test send: both skipped, the endpoint hears nothing.
      await owner().destinations.sendTestNotification({ name: d.name });
      await t.app.dispatcher.runOnce(t.clock.now());
      const before = (
        await owner().destinations.listDeliveries({ projectName: p.projectName, destination: d.name })
      ).deliveries;
      assert.deepEqual(
        before.map((x) => [x.state, x.skipReason]),
        [["SKIPPED", "DESTINATION_UNCONFIRMED"]],
      );
      assert.equal(peer.received.length, 0);
      // The key cannot confirm its own destination, nor can it un-pause it into sending.
      await rejectsWith(
        t.clients(notifyKey).destinations.confirmDestination({ name: d.name }),
        Code.PermissionDenied,
        "HUMAN_ONLY",
      );
      await t.clients(notifyKey).destinations.updateDestination({ name: d.name, paused: false });
      assert.equal((await owner().destinations.getDestination({ name: d.name })).awaitingConfirmation, true);
      const confirmed = await owner().destinations.confirmDestination({ name: d.name });
      assert.equal(confirmed.awaitingConfirmation, false);
      assert.equal(confirmed.confirmationRequestedBy, "");
      await owner().destinations.sendTestNotification({ name: d.name });
      await t.app.dispatcher.runOnce(t.clock.now());
      assert.equal(peer.received.length, 1);
      assert.equal(peer.received[0].path, "/exfiltrate");
      // A key pointing it elsewhere needs a person again.
      const moved = await t.clients(notifyKey).destinations.updateDestination({
        name: d.name,
        url: `${peer.url}/elsewhere`,
      });
      assert.equal(moved.awaitingConfirmation, true);
      await owner().destinations.deleteDestination({ name: d.name });
    });

    it("a destination a person creates is active at once", async () => {
      const d = (await webhookBy(p.owner.session, "/person")).destination;
      assert.equal(d?.awaitingConfirmation, false);
      assert.equal(d?.creator, p.owner.user);
      await owner().destinations.deleteDestination({ name: d?.name ?? "" });
    });

    it("deleting a destination that rules use is refused naming them; with detachFromRules each rule gets a new revision without it", async () => {
      const d = (await webhookBy(p.owner.session, "/used")).destination?.name ?? "";
      const keep = (await webhookBy(p.owner.session, "/kept")).destination?.name ?? "";
      const r1 = await saveRule(writeKey, [d, keep], "one");
      const r2 = await saveRule(writeKey, [d], "two");
      const unrelated = await saveRule(writeKey, [keep], "three");
      const err = await rejectsWith(
        owner().destinations.deleteDestination({ name: d }),
        Code.FailedPrecondition,
        "DESTINATION_IN_USE",
      );
      assert.ok(err.message.includes(r1.name) && err.message.includes(r2.name), err.message);
      assert.ok(!err.message.includes(unrelated.name));
      assert.equal((await owner().destinations.getDestination({ name: d })).name, d, "still there");
      const res = await owner().destinations.deleteDestination({ name: d, detachFromRules: true });
      assert.deepEqual([...res.detachedRules].sort(), [r1.name, r2.name].sort());
      const after1 = await owner().alerts.getAlertRule({ name: r1.name });
      const after2 = await owner().alerts.getAlertRule({ name: r2.name });
      assert.deepEqual([after1.version, after1.spec?.destinationNames], ["2", [keep]]);
      assert.deepEqual([after2.version, after2.spec?.destinationNames], ["2", []]);
      assert.equal((await owner().alerts.getAlertRule({ name: unrelated.name })).version, "1");
      const rev = await t.app.db.db
        .selectFrom("alert_rule_revisions")
        .select(["actor"])
        .where("rule_id", "=", after1.id)
        .where("version", "=", 2)
        .executeTakeFirstOrThrow();
      assert.equal(rev.actor, p.owner.user);
      await rejectsWith(owner().destinations.getDestination({ name: d }), Code.NotFound, "NOT_FOUND");
      // Saving a rule that names the deleted destination is refused: no rule names what does not exist.
      await rejectsWith(saveRule(writeKey, [d]), Code.InvalidArgument, "INVALID_FIELD");
      for (const r of [r1, r2, unrelated]) await owner().alerts.deleteAlertRule({ name: r.name });
      await owner().destinations.deleteDestination({ name: keep });
    });
  });

  describe(`migration 0009 keeps existing credentials as they were (${dialect.name})`, { skip }, () => {
    it("a write key from before the migration keeps exactly its rights: rules yes, destinations no; old destinations stay active", async () => {
      const database = await dialect.create();
      const db = database.databaseUrl
        ? new Kysely<Database>({
            dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: database.databaseUrl }) }),
          })
        : new Kysely<Database>({ dialect: new SqliteDialect({ database: new SQLite(":memory:") }) });
      try {
        const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
        assert.equal((await migrator.migrateTo("0008_rate_buckets")).error, undefined);
        const old = db as unknown as Kysely<Record<string, Record<string, unknown>>>;
        await old.insertInto("projects").values({ id: "old", display_name: "old", create_time: 1 }).execute();
        await old
          .insertInto("service_accounts")
          .values({
            id: "sa1",
            project_id: "old",
            display_name: "am",
            template: "Alert manager",
            permissions: JSON.stringify(["monitoring.read", "monitoring.write"]),
            state: "ACTIVE",
            create_time: 1,
          })
          .execute();
        const secret = generateSecret("serviceAccount");
        await old
          .insertInto("api_keys")
          .values({
            id: "k1",
            project_id: "old",
            kind: "SERVICE_ACCOUNT",
            service_account_id: "sa1",
            owner_user_id: null,
            creator_user_id: "u1",
            display_name: "ci",
            capabilities: JSON.stringify(["monitoring.read", "monitoring.write"]),
            secret_hash: hashSecret(secret),
            secret_hint: secretHint(secret),
            rotation_group: "g1",
            create_time: 1,
            expire_time: 10 ** 13,
            revoke_time: null,
          })
          .execute();
        await old
          .insertInto("destinations")
          .values({
            id: "d0000001",
            project_id: "old",
            kind: "WEBHOOK",
            display_name: "old hook",
            paused: 0,
            url_display: "https://example.com/h",
            sealed_url: "x",
            create_time: 1,
            update_time: 1,
            delete_time: null,
          })
          .execute();
        assert.equal((await migrator.migrateToLatest()).error, undefined);
        const key = await authenticate(db, secret, 2);
        await authorizeProject(db, key, "old", "monitoring.read");
        await authorizeProject(
          db,
          key,
          "old",
          methodAccess["svc.monitoring.v1.AlertService/SaveAlertRule"] as Capability,
        );
        await assert.rejects(
          authorizeProject(
            db,
            key,
            "old",
            methodAccess["svc.monitoring.v1.DestinationService/CreateDestination"] as Capability,
          ),
          (e: SvcError) => e.reason === "CAPABILITY" && e.metadata.capability === "notifications.write",
        );
        const d = await db.selectFrom("destinations").selectAll().executeTakeFirstOrThrow();
        assert.deepEqual([d.creator, d.unconfirmed_by], ["", ""]);
      } finally {
        await db.destroy();
        await database.drop();
      }
    });
  });
}
