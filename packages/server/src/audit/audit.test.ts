import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { newCpuRule } from "../../testing/alert-rules.ts";
import { testDialects } from "../../testing/dialects.ts";
import { ADMIN_TOKEN, type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import { type HttpsPeer, makeCertificate, startHttpsPeer } from "../../testing/https-peer.ts";
import { actorOf } from "../iam/actor.ts";
import { methodAccess } from "../iam/capabilities.ts";
import type { CiTokenPrincipal } from "../iam/principal.ts";
import {
  type AuditEventInput,
  auditedMethods,
  isAudited,
  listAuditEvents,
  purgeAuditEvents,
  recordAuditEvent,
} from "./events.ts";
import { LAST_USE_INTERVAL_MS, LastUseTracker } from "./last-use.ts";
import { type PendingAudit, pendingAudit, withAuditedTransactions } from "./transactions.ts";

/** Issue 29: who did what. */
const tls = makeCertificate();
const PAGE_KEY = Buffer.alloc(32, 7);

it("every method of the capability table that is not a read is audited", () => {
  for (const m of Object.keys(methodAccess)) {
    const read = /\/(Get|List|Query|Preview|WhoAmI)/.test(m);
    assert.equal(isAudited(m), !read, m);
  }
  assert.ok(auditedMethods.includes("svc.iam.v1.KeyService/RotateKey"));
  assert.ok(!auditedMethods.includes("svc.iam.v1.KeyService/ListKeys"));
});

it("a CI token's actor carries the repository, workflow and ref of the identity token it was exchanged for", () => {
  const p: CiTokenPrincipal = {
    kind: "CI_TOKEN",
    tokenId: "t1",
    trustId: "tr1",
    repository: "acme/deploy",
    workflow: "acme/deploy/.github/workflows/deploy.yml@refs/heads/main",
    ref: "refs/heads/main",
    projectId: "acme",
    identityId: "sa1",
    keyCapabilities: [],
    identityPermissions: [],
  };
  const a = actorOf(p);
  assert.equal(a.kind, "CI_TOKEN");
  assert.equal(a.name, "projects/acme/serviceAccounts/sa1");
  assert.deepEqual(a.detail, {
    trust: "projects/acme/ciTrusts/tr1",
    repository: "acme/deploy",
    workflow: "acme/deploy/.github/workflows/deploy.yml@refs/heads/main",
    ref: "refs/heads/main",
  });
});

for (const { dialect, skip } of await testDialects()) {
  describe(`audit log (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let p: SeededProject;
    let peer: HttpsPeer;
    let readKey: string;
    let writeKey: string;
    let writeKeyName: string;
    /** Every secret, token, password and URL issued or sent in this suite. */
    const secrets: string[] = [];

    const events = async () => (await t.app.db.db.selectFrom("audit_events").selectAll().execute()) ?? [];
    const count = async (method: string) => (await events()).filter((e) => e.method === method);

    async function call(method: string, body: unknown, token?: string): Promise<number> {
      const res = await fetch(`${t.baseUrl}/${method}`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "connect-protocol-version": "1",
          "user-agent": "audit-test/1",
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
        body: JSON.stringify(body),
      });
      await res.text();
      return res.status;
    }

    before(async () => {
      peer = await startHttpsPeer(tls);
      t = await startTestApp(dialect, {
        notify: { dispatcherAutoStart: false, ca: tls.cert, options: { allowHosts: ["127.0.0.1"] } },
      });
      p = await t.seedProject("acme", ["web-1"]);
      secrets.push(p.owner.session, p.owner.password);
      const owner = t.clients(p.owner.session);
      const key = async (template: string, caps: string[]) => {
        const sa = await owner.serviceAccounts.createServiceAccount({
          parent: p.projectName,
          displayName: template,
          template,
        });
        const k = await owner.keys.createKey({
          parent: sa.name,
          displayName: template,
          capabilities: caps,
          requestId: randomUUID(),
        });
        secrets.push(k.secret ?? "");
        return { secret: k.secret ?? "", name: k.key?.name ?? "" };
      };
      readKey = (await key("Metrics scraper", ["monitoring.read"])).secret;
      const w = await key("Alert manager", ["monitoring.read", "monitoring.write"]);
      writeKey = w.secret;
      writeKeyName = w.name;
    });
    after(async () => {
      await t?.close();
      await peer?.close();
    });

    it("every audited RPC records exactly one event per call, with the caller's kind", async () => {
      const tokenFor = (m: string) => {
        const a = methodAccess[m];
        return a === "operator" ? ADMIN_TOKEN : a === "public" ? undefined : p.owner.session;
      };
      const kindFor = (m: string) => {
        const a = methodAccess[m];
        return a === "operator" ? "OPERATOR" : a === "public" ? "ANONYMOUS" : "USER";
      };
      // Logout ends the session the others use; Backup would write a backup: both run on their own.
      const methods = auditedMethods
        .filter((m) => !m.startsWith("console/") && !m.endsWith("/Logout") && !m.endsWith("/Backup"))
        .concat(["svc.iam.v1.SessionService/Logout"]);
      for (const m of methods) {
        const before = new Set((await count(m)).map((e) => e.id));
        // A name in acme that does not exist: the call is answered (400 / 404) and changes nothing.
        await call(m, { name: "projects/acme/nope" }, tokenFor(m));
        const after = await count(m);
        const added = after.filter((e) => !before.has(e.id));
        assert.equal(added.length, 1, `${m}: one event`);
        const [newest] = added;
        assert.equal(newest.actor_kind, kindFor(m), `${m}: actor kind`);
        assert.equal(newest.user_agent, "audit-test/1", m);
      }
      // Reads are not recorded.
      const n = (await events()).length;
      await call("svc.monitoring.v1.AlertService/ListAlertRules", { projectName: p.projectName }, readKey);
      assert.equal((await events()).length, n);
      // The session ended by Logout above: sign in again for the tests below.
      const s = await t.clients().sessions.login({ email: p.owner.email, password: p.owner.password });
      secrets.push(s.sessionToken);
      p = { ...p, owner: { ...p.owner, session: s.sessionToken } };
      const login = (await count("svc.iam.v1.SessionService/Login")).filter((e) => e.outcome === "ok");
      assert.ok(login.length > 0);
      assert.equal(login.at(-1)?.actor, p.owner.user, "a sign-in names the user it signed in");
    });

    it("a create names what it created (so the resource's own log starts with it); a refused one the parent", async () => {
      const owner = t.clients(p.owner.session);
      const sa = await owner.serviceAccounts.createServiceAccount({
        parent: p.projectName,
        displayName: "creator",
        template: "Metrics scraper",
      });
      const nowS = () => BigInt(Math.floor(t.clock.ms / 1000));
      // Each create method, called successfully; the name of what it created, read from its answer.
      const creates: Record<string, () => Promise<string | undefined>> = {
        "svc.monitoring.v1.SilenceService/CreateSilence": async () =>
          (
            await owner.silences.createSilence({
              projectName: p.projectName,
              comment: "reboot",
              vmNames: [p.vms[0] ?? ""],
              startTimeUnix: 0n,
              endTimeUnix: nowS() + 600n,
              requestId: randomUUID(),
            })
          ).name,
        "svc.monitoring.v1.DestinationService/CreateDestination": async () => {
          const d = await owner.destinations.createDestination({
            projectName: p.projectName,
            displayName: "created",
            kind: "WEBHOOK",
            url: `${peer.url}/hooks/created`,
            requestId: randomUUID(),
          });
          secrets.push(d.webhookSecret);
          return d.destination?.name;
        },
        "svc.iam.v1.ServiceAccountService/CreateServiceAccount": async () =>
          (
            await owner.serviceAccounts.createServiceAccount({
              parent: p.projectName,
              displayName: "another",
              template: "Metrics scraper",
            })
          ).name,
        "svc.iam.v1.KeyService/CreateKey": async () => {
          const k = await owner.keys.createKey({
            parent: sa.name,
            displayName: "created",
            capabilities: ["monitoring.read"],
            requestId: randomUUID(),
          });
          secrets.push(k.secret ?? "");
          return k.key?.name;
        },
        "svc.iam.v1.AutomationService/StartCITrustSetup": async () => {
          const s = await owner.automation.startCITrustSetup({
            serviceAccount: sa.name,
            intended: {
              repository: "acme/deploy",
              workflow: ".github/workflows/deploy.yml",
              branch: "main",
              event: "push",
            },
          });
          secrets.push(s.pairingCode);
          return s.trust?.name;
        },
        "svc.admin.v1.ProjectService/CreateProject": async () =>
          (await t.admin.projects.createProject({ projectId: `made-${dialect.name}` })).name,
        "svc.admin.v1.UserService/CreateUser": async () => {
          const password = `pw-${randomUUID()}`;
          secrets.push(password);
          return (await t.admin.users.createUser({ email: `made-${randomUUID()}@example.com`, password }))
            .name;
        },
        "svc.admin.v1.VMService/CreateVM": async () =>
          (
            await t.admin.vms.createVM({
              parent: p.projectName,
              vmId: "made-1",
              location: "dc-1",
              vcpus: 1,
              memoryBytes: 1n << 30n,
            })
          ).name,
        "svc.admin.v1.VMService/CreateMaintenanceWindow": async () =>
          (
            await t.admin.vms.createMaintenanceWindow({
              parent: p.projectName,
              vms: [p.vms[0] ?? ""],
              startTimeUnix: nowS(),
              endTimeUnix: nowS() + 600n,
              reason: "made",
            })
          ).name,
      };
      // A new create method without a row here fails: its event must name what it creates too.
      const createMethods = auditedMethods.filter((m) => /\/(Create|StartCITrustSetup$)/.test(m));
      assert.deepEqual(Object.keys(creates).sort(), createMethods.sort());
      for (const [m, create] of Object.entries(creates)) {
        const before = new Set((await count(m)).map((e) => e.id));
        const name = await create();
        assert.ok(name, `${m}: the answer names what it created`);
        const added = (await count(m)).filter((e) => !before.has(e.id));
        assert.equal(added.length, 1, `${m}: one event`);
        assert.equal(added[0]?.outcome, "ok", m);
        assert.equal(added[0]?.resource, name, `${m}: the event names the created resource`);
        // The resource's own page (RecentActivity) lists its events by this filter: its creation is among them.
        const own = await listAuditEvents(t.app.db.db, PAGE_KEY, { resource: name, method: m });
        assert.deepEqual(
          own.events.map((e) => e.id),
          [added[0]?.id],
          `${m}: listed on its own page`,
        );
      }
      // A retried create (same requestId) names the resource the first call created.
      const body = {
        projectName: p.projectName,
        comment: "again",
        vmNames: [p.vms[0] ?? ""],
        startTimeUnix: 0n,
        endTimeUnix: nowS() + 600n,
        requestId: randomUUID(),
      };
      const first = await owner.silences.createSilence(body);
      await owner.silences.createSilence(body);
      const replays = (await count("svc.monitoring.v1.SilenceService/CreateSilence")).filter(
        (e) => e.request_id === body.requestId,
      );
      assert.deepEqual(replays.map((e) => [e.resource, Number(e.replay)]).sort(), [
        [first.name, 0],
        [first.name, 1],
      ]);
      // A refused create created nothing: its event names the parent it was asked of.
      const refused = {
        parent: sa.name,
        displayName: "x",
        capabilities: ["monitoring.read"],
        requestId: randomUUID(),
      };
      assert.equal(await call("svc.iam.v1.KeyService/CreateKey", refused, writeKey), 403);
      const [r] = (await count("svc.iam.v1.KeyService/CreateKey")).filter(
        (e) => e.request_id === refused.requestId,
      );
      assert.equal(r?.resource, sa.name);
      assert.equal(r?.outcome, "HUMAN_ONLY");
      // So does one that failed after its checks (a VM id already taken).
      const before = new Set((await count("svc.admin.v1.VMService/CreateVM")).map((e) => e.id));
      const dup = {
        parent: p.projectName,
        vmId: "made-1",
        location: "dc-1",
        vcpus: 1,
        memoryBytes: "1073741824",
      };
      assert.equal(await call("svc.admin.v1.VMService/CreateVM", dup, ADMIN_TOKEN), 409);
      const failed = (await count("svc.admin.v1.VMService/CreateVM")).filter((e) => !before.has(e.id));
      assert.deepEqual(
        failed.map((e) => [e.resource, e.outcome]),
        [[p.projectName, "ALREADY_EXISTS"]],
      );
    });

    it("a save with a write key names the key; a refused call is recorded with its reason and resource", async () => {
      const body = newCpuRule(p.projectName);
      assert.equal(await call("svc.monitoring.v1.AlertService/SaveAlertRule", body, writeKey), 200);
      const [ok] = (await count("svc.monitoring.v1.AlertService/SaveAlertRule")).filter(
        (e) => e.request_id === body.requestId,
      );
      assert.equal(ok.outcome, "ok");
      assert.equal(ok.actor_kind, "SERVICE_ACCOUNT_KEY");
      assert.equal(JSON.parse(ok.actor_detail).key, writeKeyName);
      assert.equal(ok.project_id, "acme");
      assert.equal(ok.replay, 0);
      assert.ok(JSON.parse(ok.changed_fields).includes("spec.threshold"), ok.changed_fields);
      // The same requestId again: recorded as a replay.
      assert.equal(await call("svc.monitoring.v1.AlertService/SaveAlertRule", body, writeKey), 200);
      const again = (await count("svc.monitoring.v1.AlertService/SaveAlertRule")).filter(
        (e) => e.request_id === body.requestId,
      );
      assert.equal(again.length, 2);
      assert.equal(again.filter((e) => Number(e.replay) === 1).length, 1);

      const denied = {
        projectName: p.projectName,
        id: randomUUID(),
        requestId: randomUUID(),
        spec: body.spec,
      };
      assert.equal(await call("svc.monitoring.v1.AlertService/SaveAlertRule", denied, readKey), 403);
      const [d] = (await count("svc.monitoring.v1.AlertService/SaveAlertRule")).filter(
        (e) => e.request_id === denied.requestId,
      );
      assert.equal(d.outcome, "CAPABILITY");
      assert.equal(d.project_id, "acme", "a refusal inside the caller's own project is that project's");
      assert.equal(d.actor_kind, "SERVICE_ACCOUNT_KEY");
      assert.equal(d.resource, `${p.projectName}/alertRules/${denied.id}`);
      // A denied rotate by a key.
      assert.equal(await call("svc.iam.v1.KeyService/RotateKey", { name: writeKeyName }, writeKey), 403);
      const rot = (await count("svc.iam.v1.KeyService/RotateKey")).filter((e) => e.resource === writeKeyName);
      assert.equal(rot.at(-1)?.outcome, "HUMAN_ONLY");
      // An unauthenticated call names no one and is not recorded.
      const n = (await events()).length;
      assert.equal(await call("svc.iam.v1.KeyService/RotateKey", { name: writeKeyName }, "svck_nope"), 401);
      assert.equal((await events()).length, n);
    });

    it("a refused call into another project is recorded where the caller belongs, never in the target's log", async () => {
      const victim = await t.seedProject("victim", []);
      const rule = (projectName: string) => ({ ...newCpuRule(projectName), requestId: randomUUID() });
      const attempts = [
        // acme's write key, into another tenant and into a project not yet created
        { body: rule(victim.projectName), token: writeKey, own: "acme", reason: "PROJECT_BOUNDARY" },
        { body: rule("projects/not-yet"), token: writeKey, own: "acme", reason: "PROJECT_BOUNDARY" },
        // acme's owner, a person: outside every project (the operator's listing)
        { body: rule(victim.projectName), token: p.owner.session, own: "", reason: "PROJECT_BOUNDARY" },
        { body: rule("projects/not-yet"), token: p.owner.session, own: "", reason: "PROJECT_BOUNDARY" },
      ];
      for (const a of attempts) {
        assert.equal(await call("svc.monitoring.v1.AlertService/SaveAlertRule", a.body, a.token), 403);
        const [e] = (await count("svc.monitoring.v1.AlertService/SaveAlertRule")).filter(
          (x) => x.request_id === a.body.requestId,
        );
        assert.ok(e, "the refusal is recorded");
        assert.equal(e.project_id, a.own, `${a.body.projectName}: recorded where the caller belongs`);
        assert.equal(e.outcome, a.reason);
        assert.equal(e.resource, `${a.body.projectName}/alertRules/${a.body.id}`, "naming what it tried");
      }
      const polluted = await t.app.db.db
        .selectFrom("audit_events")
        .select(["method", "actor"])
        .where("project_id", "in", ["victim", "not-yet"])
        .execute();
      assert.deepEqual(
        polluted.filter((e) => !e.method.startsWith("svc.admin.")),
        [],
        "no tenant wrote into another's log",
      );
      // The owner of acme reads its key's refused attempts in acme's own log.
      const own = await listAuditEvents(t.app.db.db, PAGE_KEY, {
        projectId: "acme",
        method: "SaveAlertRule",
      });
      assert.ok(own.events.some((e) => e.resource.startsWith("projects/not-yet/")));
    });

    it("a member's call refused by their role in their own project is that project's event (docs/audit.md)", async () => {
      const viewer = await t.admin.users.createUser({
        email: "audit-viewer@example.com",
        password: "viewer-password-1",
        displayName: "Viewer",
      });
      await t.admin.projects.setMember({ project: p.projectName, user: viewer.name, role: "viewer" });
      const session =
        (
          await t
            .clients()
            .sessions.login({ email: "audit-viewer@example.com", password: "viewer-password-1" })
        ).sessionToken ?? "";
      const body = { ...newCpuRule(p.projectName), requestId: randomUUID() };
      assert.equal(await call("svc.monitoring.v1.AlertService/SaveAlertRule", body, session), 403);
      const [e] = (await count("svc.monitoring.v1.AlertService/SaveAlertRule")).filter(
        (x) => x.request_id === body.requestId,
      );
      assert.ok(e, "the refusal is recorded");
      assert.equal(e.outcome, "CAPABILITY");
      assert.equal(
        e.project_id,
        "acme",
        "a member refused by their role: the project's own log, where its owner reads it",
      );
      // The same person into a project they are not a member of: outside every project, as above.
      const other = { ...newCpuRule("projects/victim"), requestId: randomUUID() };
      assert.equal(await call("svc.monitoring.v1.AlertService/SaveAlertRule", other, session), 403);
      const [o] = (await count("svc.monitoring.v1.AlertService/SaveAlertRule")).filter(
        (x) => x.request_id === other.requestId,
      );
      assert.deepEqual([o?.outcome, o?.project_id], ["PROJECT_BOUNDARY", ""]);
    });

    it("after a scenario, no event holds any secret, token, password or URL issued or sent in it", async () => {
      const owner = t.clients(p.owner.session);
      const created = await owner.keys.createKey({
        parent: p.projectName,
        displayName: "mine",
        capabilities: ["monitoring.read"],
        requestId: randomUUID(),
      });
      secrets.push(created.secret ?? "");
      const rotated = await owner.keys.rotateKey({
        name: created.key?.name,
        overlapSeconds: 0,
        requestId: randomUUID(),
      });
      secrets.push(rotated.secret ?? "");
      await owner.keys.revokeKey({ name: rotated.key?.name });
      const url = `${peer.url}/hooks/secret-path-${randomUUID()}`;
      secrets.push(url, url.slice(url.indexOf("/hooks/")));
      const dest = await owner.destinations.createDestination({
        projectName: p.projectName,
        displayName: "hook",
        kind: "WEBHOOK",
        url,
        requestId: randomUUID(),
      });
      secrets.push(dest.webhookSecret);
      const url2 = `${peer.url}/hooks/other-${randomUUID()}`;
      secrets.push(url2, url2.slice(url2.indexOf("/hooks/")));
      await owner.destinations.updateDestination({ name: dest.destination?.name, url: url2 });
      const rs = await owner.destinations.rotateWebhookSecret({ name: dest.destination?.name });
      assert.ok(rs.webhookSecret);
      secrets.push(rs.webhookSecret);
      const updates = await count("svc.monitoring.v1.DestinationService/UpdateDestination");
      assert.deepEqual(JSON.parse(updates.at(-1)?.changed_fields ?? "[]"), ["url"]);
      const all = JSON.stringify(await events(), (_k, v) => (typeof v === "bigint" ? String(v) : v));
      assert.ok(secrets.filter((x) => x.length >= 8).length >= 12, "the scenario issued its secrets");
      for (const s of secrets.filter((x) => x.length >= 8))
        assert.ok(!all.includes(s), `an event holds ${s.slice(0, 6)}…`);
      for (const m of ["CreateKey", "RotateKey", "RevokeKey"])
        assert.ok(
          (await count(`svc.iam.v1.KeyService/${m}`)).some((e) => e.outcome === "ok"),
          m,
        );
    });

    it("an event rides in the change's transaction: both commit, or neither", async () => {
      const db = withAuditedTransactions(t.app.db.db);
      const event = (requestId: string): AuditEventInput => ({
        time: 1,
        projectId: "acme",
        actor: { kind: "USER", name: "users/tx", detail: {} },
        method: "svc.monitoring.v1.AlertService/SaveAlertRule",
        resource: "projects/acme/alertRules/tx",
        requestId,
        outcome: "ok",
        clientAddress: "",
        userAgent: "",
        changedFields: [],
      });
      const change = (trx: typeof db, id: string) =>
        trx.insertInto("projects").values({ id, display_name: id, create_time: 1 }).execute();
      const has = async (requestId: string, project: string) => ({
        event: (
          await db.selectFrom("audit_events").select("id").where("request_id", "=", requestId).execute()
        ).length,
        change: (await db.selectFrom("projects").select("id").where("id", "=", project).execute()).length,
      });
      // Committed: the change and its event.
      const ok: PendingAudit = { written: false, closed: false, event: () => event("tx-commit-1") };
      await pendingAudit.run(ok, () => db.transaction().execute((trx) => change(trx, "txcommit")));
      assert.equal(ok.written, true);
      assert.deepEqual(await has("tx-commit-1", "txcommit"), { event: 1, change: 1 });
      // A second transaction of the same call carries nothing more.
      await pendingAudit.run(ok, () => db.transaction().execute((trx) => change(trx, "txsecond")));
      assert.deepEqual(await has("tx-commit-1", "txsecond"), { event: 1, change: 1 });
      // The change fails: neither, and the event is left to the guard (which records the failure).
      const failed: PendingAudit = { written: false, closed: false, event: () => event("tx-fail-1") };
      await assert.rejects(
        pendingAudit.run(failed, () =>
          db.transaction().execute(async (trx) => {
            await change(trx, "txfail");
            throw new Error("the change fails");
          }),
        ),
      );
      assert.equal(failed.written, false);
      assert.deepEqual(await has("tx-fail-1", "txfail"), { event: 0, change: 0 });
      // The transaction fails after the change, while its event is being written: neither.
      const late: PendingAudit = {
        written: false,
        closed: false,
        event: () => {
          throw new Error("fails after the change, at the event");
        },
      };
      await assert.rejects(
        pendingAudit.run(late, () => db.transaction().execute((trx) => change(trx, "txlate"))),
      );
      assert.equal(late.written, false);
      assert.equal((await has("", "txlate")).change, 0);
      // After the call answered, its transactions (work it started) carry nothing.
      const closed: PendingAudit = { written: false, closed: true, event: () => event("tx-closed-1") };
      await pendingAudit.run(closed, () => db.transaction().execute((trx) => change(trx, "txclosed")));
      assert.deepEqual(await has("tx-closed-1", "txclosed"), { event: 0, change: 1 });
    });

    it("keys and service accounts remember their last use, written at most once a minute per key", async () => {
      const tracker = new LastUseTracker(t.app.db.db);
      const principal = {
        kind: "SERVICE_ACCOUNT_KEY" as const,
        keyId: writeKeyName.split("/").at(-1) ?? "",
        projectId: "acme",
        identityId: writeKeyName.split("/")[3],
        keyCapabilities: [],
        identityPermissions: [],
      };
      const t0 = 5_000_000_000_000;
      for (let i = 0; i < 500; i++) await tracker.note(principal, t0 + i * 100, "198.51.100.7");
      assert.equal(tracker.writes, 1, "500 requests within 50 s: one write");
      await tracker.note(principal, t0 + LAST_USE_INTERVAL_MS, "198.51.100.8");
      assert.equal(tracker.writes, 2);
      const k = await t.app.db.db
        .selectFrom("api_keys")
        .select(["last_used_time", "last_used_address"])
        .where("id", "=", principal.keyId)
        .executeTakeFirstOrThrow();
      assert.equal(Number(k.last_used_time), t0 + LAST_USE_INTERVAL_MS);
      assert.equal(k.last_used_address, "198.51.100.8");
      const sa = await t.app.db.db
        .selectFrom("service_accounts")
        .select(["last_used_time"])
        .where("id", "=", principal.identityId)
        .executeTakeFirstOrThrow();
      assert.equal(Number(sa.last_used_time), t0 + LAST_USE_INTERVAL_MS);
      // Another key of the same account within the minute: the key is noted, the account is not written again.
      await tracker.note(
        { ...principal, keyId: "another-key" },
        t0 + LAST_USE_INTERVAL_MS + 1000,
        "198.51.100.9",
      );
      assert.equal(tracker.writes, 3);
      const sa2 = await t.app.db.db
        .selectFrom("service_accounts")
        .select(["last_used_address"])
        .where("id", "=", principal.identityId)
        .executeTakeFirstOrThrow();
      assert.equal(sa2.last_used_address, "198.51.100.8");
      // Through the server: the read key's row carries its use.
      await call("svc.monitoring.v1.AlertService/ListAlertRules", { projectName: p.projectName }, readKey);
      const used = await t.app.db.db
        .selectFrom("api_keys")
        .select(["last_used_time", "last_used_address"])
        .where("capabilities", "=", JSON.stringify(["monitoring.read"]))
        .where("kind", "=", "SERVICE_ACCOUNT")
        .executeTakeFirstOrThrow();
      assert.ok(used.last_used_time !== null);
      assert.equal(used.last_used_address, "127.0.0.1");
    });

    it("ListAuditEvents: owners and audit.read keys read their project's log; viewers and read keys are refused; bad filters name the field", async () => {
      const owner = t.clients(p.owner.session);
      const sa = await owner.serviceAccounts.createServiceAccount({
        parent: p.projectName,
        displayName: "auditor",
        template: "Auditor",
      });
      const k = await owner.keys.createKey({
        parent: sa.name,
        displayName: "auditor",
        capabilities: ["audit.read"],
        requestId: randomUUID(),
      });
      const auditor = t.clients(k.secret);
      const rotations = await auditor.audit.listAuditEvents({
        projectName: p.projectName,
        method: "RotateKey",
      });
      assert.ok(rotations.events.length > 0);
      for (const e of rotations.events) {
        assert.equal(e.method, "svc.iam.v1.KeyService/RotateKey");
        assert.equal(e.projectName, p.projectName);
        assert.match(e.name, /^projects\/acme\/auditEvents\//);
      }
      const byOwner = await owner.audit.listAuditEvents({ projectName: p.projectName, pageSize: 2 });
      assert.equal(byOwner.events.length, 2);
      assert.ok(byOwner.nextPageToken);
      const next = await owner.audit.listAuditEvents({
        projectName: p.projectName,
        pageSize: 2,
        pageToken: byOwner.nextPageToken,
      });
      assert.notDeepEqual(next.events[0]?.name, byOwner.events[0]?.name);
      const status = (body: unknown, token: string) =>
        call("svc.monitoring.v1.AuditService/ListAuditEvents", body, token);
      assert.equal(await status({ projectName: p.projectName }, readKey), 403);
      assert.equal(await status({ projectName: p.projectName }, writeKey), 403);
      const bad = async (body: Record<string, unknown>, field: string) => {
        const res = await fetch(`${t.baseUrl}/svc.monitoring.v1.AuditService/ListAuditEvents`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "connect-protocol-version": "1",
            authorization: `Bearer ${p.owner.session}`,
          },
          body: JSON.stringify({ projectName: p.projectName, ...body }),
        });
        assert.equal(res.status, 400, JSON.stringify(body));
        assert.match(await res.text(), new RegExp(`"field":"${field}"`));
      };
      await bad({ method: "FlyToTheMoon" }, "method");
      await bad({ startTimeUnixMs: "2000", endTimeUnixMs: "1000" }, "endTimeUnixMs");
      await bad({ resource: "projects/other/alertRules/x" }, "resource");
      // The operator lists every project.
      const all = await t.admin.audit.listAuditEvents({ method: "CreateProject" });
      assert.ok(all.events.some((e) => e.actorKind === "OPERATOR"));
    });

    it("lists newest first with filters and signed page tokens, names the bad filter's field, and purges by age in batches", async () => {
      const db = t.app.db.db;
      const base = {
        projectId: "paging",
        actor: { kind: "USER" as const, name: "users/u1", detail: {} },
        resource: "projects/paging/alertRules/r1",
        requestId: "",
        outcome: "ok",
        clientAddress: "203.0.113.1",
        userAgent: "",
        changedFields: [],
      };
      const day = 86_400_000;
      const now = 1_800_000_000_000;
      for (let i = 0; i < 7; i++)
        await recordAuditEvent(db, {
          ...base,
          time: now - i * day * 100,
          method: i % 2 ? "svc.iam.v1.KeyService/CreateKey" : "svc.monitoring.v1.AlertService/SaveAlertRule",
        });
      const seen: number[] = [];
      let token = "";
      do {
        const page = await listAuditEvents(db, PAGE_KEY, {
          projectId: "paging",
          pageSize: 3,
          pageToken: token,
        });
        seen.push(...page.events.map((e) => e.time));
        token = page.nextPageToken;
      } while (token);
      assert.deepEqual(
        seen,
        [...seen].sort((a, b) => b - a),
      );
      assert.equal(seen.length, 7);
      const keys = await listAuditEvents(db, PAGE_KEY, { projectId: "paging", method: "CreateKey" });
      assert.equal(keys.events.length, 3);
      const ranged = await listAuditEvents(db, PAGE_KEY, {
        projectId: "paging",
        startTime: now - 250 * day,
        endTime: now + 1,
      });
      assert.equal(ranged.events.length, 3);
      // A name matches the resource and those under it (a service account's keys), not its namesakes.
      for (const resource of [
        "projects/paging/serviceAccounts/sa_1",
        "projects/paging/serviceAccounts/sa_1/keys/k1",
        "projects/paging/serviceAccounts/sa_10",
        "projects/paging/serviceAccounts/saX1/keys/k2",
      ])
        await recordAuditEvent(db, {
          ...base,
          resource,
          time: now + 1,
          method: "svc.iam.v1.KeyService/RotateKey",
        });
      const under = async (resource: string) =>
        (await listAuditEvents(db, PAGE_KEY, { projectId: "paging", resource })).events
          .map((e) => e.resource)
          .sort();
      assert.deepEqual(await under("projects/paging/serviceAccounts/sa_1"), [
        "projects/paging/serviceAccounts/sa_1",
        "projects/paging/serviceAccounts/sa_1/keys/k1",
      ]);
      assert.deepEqual(await under("projects/paging/serviceAccounts/sa_1/"), [
        "projects/paging/serviceAccounts/sa_1/keys/k1",
      ]);
      assert.deepEqual(await under("projects/paging/serviceAccounts/SA_1"), [], "names are matched exactly");
      await db
        .deleteFrom("audit_events")
        .where("method", "=", "svc.iam.v1.KeyService/RotateKey")
        .where("project_id", "=", "paging")
        .execute();
      const other = await listAuditEvents(db, PAGE_KEY, { projectId: "acme", actor: "users/u1" });
      assert.equal(other.events.length, 0, "another project's events are not listed");
      await assert.rejects(
        listAuditEvents(db, PAGE_KEY, { projectId: "paging", method: "Nope" }),
        /method: /,
      );
      await assert.rejects(
        listAuditEvents(db, PAGE_KEY, { projectId: "paging", startTime: 10, endTime: 5 }),
        /endTimeUnixMs/,
      );
      const firstPage = await listAuditEvents(db, PAGE_KEY, { projectId: "paging", pageSize: 3 });
      await assert.rejects(
        listAuditEvents(db, PAGE_KEY, { projectId: "acme", pageToken: firstPage.nextPageToken }),
        /pageToken/,
      );
      // 400 days: the events 500 and 600 days old go, two at a time.
      const purged = await purgeAuditEvents(db, now, 400, 1);
      assert.ok(purged >= 2);
      const left = await listAuditEvents(db, PAGE_KEY, { projectId: "paging" });
      assert.equal(left.events.length, 5);
    });
  });
}
