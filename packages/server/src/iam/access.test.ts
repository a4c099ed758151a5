import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { Code } from "@connectrpc/connect";
import { rejectsWith } from "../../testing/assert.ts";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import { IDEMPOTENCY_RETENTION_MS, pruneIdempotency } from "./idempotency.ts";

const DAY = 86_400_000;

for (const { dialect, skip } of await testDialects()) {
  describe(`keys and access (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let p: SeededProject;
    let other: SeededProject;
    before(async () => {
      t = await startTestApp(dialect);
      p = await t.seedProject("acme", ["web-1", "web-2", "web-3"]);
      other = await t.seedProject("other", ["x-1"]);
    });
    after(() => t?.close());

    const list = (token: string, projectName = p.projectName) =>
      t.clients(token).monitoring.listVMMonitoring({ projectName, pageSize: 50, inventoryOnly: true });

    async function scraperKey(requestId = randomUUID()) {
      const owner = t.clients(p.owner.session);
      const sa = await owner.serviceAccounts.createServiceAccount({
        parent: p.projectName,
        displayName: "scraper",
        template: "Metrics scraper",
      });
      const created = await owner.keys.createKey({
        parent: sa.name,
        displayName: "k",
        capabilities: ["monitoring.read"],
        requestId,
      });
      return { sa, created };
    }

    it("issues a service-account key whose secret is shown once and works at once", async () => {
      const { created } = await scraperKey();
      assert.ok(created.secret?.startsWith("svcs_"));
      assert.equal(created.key?.state, "ACTIVE");
      assert.equal(created.replayed, false);
      const days = Number(created.key!.expireTimeUnix - created.key!.createTimeUnix) / 86_400;
      assert.equal(days, 90);
      const res = await list(created.secret!);
      assert.deepEqual(
        res.vms.map((v) => v.displayName),
        ["web-1", "web-2", "web-3"],
      );
    });

    it("answers a retried create with the same requestId with metadata and no secret", async () => {
      const owner = t.clients(p.owner.session);
      const sa = await owner.serviceAccounts.createServiceAccount({
        parent: p.projectName,
        displayName: "r",
        template: "Metrics scraper",
      });
      const body = {
        parent: sa.name,
        displayName: "retry",
        capabilities: ["monitoring.read"],
        requestId: randomUUID(),
      };
      const first = await owner.keys.createKey(body);
      const again = await owner.keys.createKey(body);
      assert.equal(again.key?.name, first.key?.name);
      assert.equal(again.secret, undefined);
      assert.equal(again.replayed, true);
      await rejectsWith(
        owner.keys.createKey({ ...body, displayName: "changed" }),
        Code.InvalidArgument,
        "REQUEST_ID_REUSED",
      );
      const keys = await owner.keys.listKeys({ parent: sa.name });
      assert.equal(keys.keys.length, 1);
    });

    it("keeps idempotency records for the retention window, then prunes them", async () => {
      const owner = t.clients(p.owner.session);
      const sa = await owner.serviceAccounts.createServiceAccount({
        parent: p.projectName,
        displayName: "p",
        template: "Metrics scraper",
      });
      const body = {
        parent: sa.name,
        displayName: "prune",
        capabilities: ["monitoring.read"],
        requestId: randomUUID(),
      };
      const first = await owner.keys.createKey(body);
      await pruneIdempotency(t.app.db.db, t.clock.now() + IDEMPOTENCY_RETENTION_MS - 1000);
      assert.equal(
        (await owner.keys.createKey(body)).key?.name,
        first.key?.name,
        "still a replay inside the window",
      );
      await pruneIdempotency(t.app.db.db, t.clock.now() + IDEMPOTENCY_RETENTION_MS + 1000);
      const later = await owner.keys.createKey(body);
      assert.notEqual(later.key?.name, first.key?.name);
      assert.ok(later.secret);
    });

    it("refuses an expiry over 365 days and capabilities beyond the account", async () => {
      const owner = t.clients(p.owner.session);
      const sa = await owner.serviceAccounts.createServiceAccount({
        parent: p.projectName,
        displayName: "e",
        template: "Metrics scraper",
      });
      const err = await rejectsWith(
        owner.keys.createKey({
          parent: sa.name,
          displayName: "k",
          capabilities: ["monitoring.read"],
          expireDays: 366,
          requestId: randomUUID(),
        }),
        Code.InvalidArgument,
        "EXPIRY_TOO_LONG",
      );
      assert.match(err.message, /expireDays/);
      await rejectsWith(
        owner.keys.createKey({
          parent: sa.name,
          displayName: "k",
          capabilities: ["monitoring.write"],
          requestId: randomUUID(),
        }),
        Code.InvalidArgument,
      );
    });

    it("stops a revoked key on the very next request", async () => {
      const { created } = await scraperKey();
      await list(created.secret!);
      await t.clients(p.owner.session).keys.revokeKey({ name: created.key!.name });
      const err = await rejectsWith(list(created.secret!), Code.Unauthenticated, "CREDENTIAL_REVOKED");
      assert.ok(!err.message.includes(created.secret!), "error echoes the secret");
    });

    it("refuses a key of a disabled service account, and accepts it again once enabled", async () => {
      const { sa, created } = await scraperKey();
      const owner = t.clients(p.owner.session);
      await owner.serviceAccounts.disableServiceAccount({ name: sa.name });
      await rejectsWith(list(created.secret!), Code.PermissionDenied, "IDENTITY_DISABLED");
      await owner.serviceAccounts.enableServiceAccount({ name: sa.name });
      await list(created.secret!);
    });

    it("refuses a key on another project (PROJECT_BOUNDARY)", async () => {
      const { created } = await scraperKey();
      await rejectsWith(list(created.secret!, other.projectName), Code.PermissionDenied, "PROJECT_BOUNDARY");
      await rejectsWith(
        t.clients(created.secret!).monitoring.queryVMMonitoring({
          name: other.vms[0],
          metricIds: ["cpu_utilization_pct"],
          stepSeconds: 60,
        }),
        Code.PermissionDenied,
        "PROJECT_BOUNDARY",
      );
    });

    it("refuses a personal key whose owner's grant was removed", async () => {
      const email = `member-${randomUUID()}@example.com`;
      const password = `pw-${randomUUID()}`;
      const user = await t.admin.users.createUser({ email, password });
      await t.admin.projects.setMember({ project: p.projectName, user: user.name, role: "viewer" });
      const { sessionToken } = await t.clients().sessions.login({ email, password });
      const me = t.clients(sessionToken);
      const created = await me.keys.createKey({
        parent: p.projectName,
        displayName: "mine",
        capabilities: ["monitoring.read"],
        requestId: randomUUID(),
      });
      assert.ok(created.secret?.startsWith("svcp_"));
      await list(created.secret!);
      // A viewer cannot mint a write key.
      await rejectsWith(
        me.keys.createKey({
          parent: p.projectName,
          displayName: "w",
          capabilities: ["monitoring.write"],
          requestId: randomUUID(),
        }),
        Code.InvalidArgument,
      );
      await t.admin.projects.removeMember({ project: p.projectName, user: user.name });
      await rejectsWith(list(created.secret!), Code.PermissionDenied, "GRANT_REMOVED");
    });

    it("refuses an expired key", async () => {
      const owner = t.clients(p.owner.session);
      const sa = await owner.serviceAccounts.createServiceAccount({
        parent: p.projectName,
        displayName: "x",
        template: "Metrics scraper",
      });
      const created = await owner.keys.createKey({
        parent: sa.name,
        displayName: "short",
        capabilities: ["monitoring.read"],
        expireDays: 1,
        requestId: randomUUID(),
      });
      await list(created.secret!);
      t.clock.advance(DAY + 1000);
      try {
        await rejectsWith(list(created.secret!), Code.Unauthenticated, "CREDENTIAL_EXPIRED");
      } finally {
        t.clock.advance(-(DAY + 1000));
      }
    });

    it("rotates with an overlap, and immediately with overlap 0", async () => {
      const { created } = await scraperKey();
      const owner = t.clients(p.owner.session);
      const r1 = await owner.keys.rotateKey({
        name: created.key!.name,
        overlapSeconds: 3600,
        requestId: randomUUID(),
      });
      assert.ok(r1.secret);
      await list(created.secret!); // still inside the overlap
      await list(r1.secret!);
      // The list says when the old key stops and which key replaces it; the new key is plainly active.
      const parent = created.key!.name.slice(0, created.key!.name.indexOf("/keys/"));
      const during = (await owner.keys.listKeys({ parent })).keys;
      const old = during.find((k) => k.name === created.key!.name);
      const replacement = during.find((k) => k.name === r1.key!.name);
      assert.equal(old?.state, "ACTIVE");
      assert.equal(old?.stopTimeUnix, BigInt(Math.floor(t.clock.now() / 1000) + 3600));
      assert.equal(old?.replacedBy, r1.key!.name);
      assert.equal(replacement?.stopTimeUnix, 0n);
      assert.equal(replacement?.replacedBy, "");
      t.clock.advance(3601_000);
      const afterwards = (await owner.keys.listKeys({ parent })).keys.find(
        (k) => k.name === created.key!.name,
      );
      assert.equal(afterwards?.state, "REVOKED");
      assert.equal(afterwards?.stopTimeUnix, 0n);
      assert.equal(afterwards?.replacedBy, "");
      await rejectsWith(list(created.secret!), Code.Unauthenticated);
      await list(r1.secret!);
      const r2 = await owner.keys.rotateKey({
        name: r1.key!.name,
        overlapSeconds: 0,
        requestId: randomUUID(),
      });
      await rejectsWith(list(r1.secret!), Code.Unauthenticated, "CREDENTIAL_REVOKED");
      await list(r2.secret!);
      await rejectsWith(
        owner.keys.rotateKey({ name: r2.key!.name, overlapSeconds: 86_401, requestId: randomUUID() }),
        Code.InvalidArgument,
      );
    });

    it("refuses every key on human-only methods", async () => {
      const { sa, created } = await scraperKey();
      const k = t.clients(created.secret!);
      await rejectsWith(
        k.keys.createKey({
          parent: sa.name,
          displayName: "k",
          capabilities: ["monitoring.read"],
          requestId: randomUUID(),
        }),
        Code.PermissionDenied,
        "HUMAN_ONLY",
      );
      await rejectsWith(
        k.serviceAccounts.listServiceAccounts({ parent: p.projectName }),
        Code.PermissionDenied,
        "HUMAN_ONLY",
      );
      await rejectsWith(k.admin.projects.listProjects({}), Code.PermissionDenied, "OPERATOR_ONLY");
    });

    it("refuses missing, malformed and unknown credentials without echoing them", async () => {
      await rejectsWith(list(""), Code.Unauthenticated);
      const fake = "svcs_abcdefghijklmnopqrstuvwxyz012345ABCDEF";
      const err = await rejectsWith(list(fake), Code.Unauthenticated);
      assert.ok(!err.message.includes(fake));
      await rejectsWith(
        t
          .clients(p.owner.session)
          .monitoring.listVMMonitoring({ projectName: other.projectName, inventoryOnly: true }),
        Code.PermissionDenied,
        "PROJECT_BOUNDARY",
      );
    });

    it("pages ListVMMonitoring with a tamper-evident token in stable order", async () => {
      const { created } = await scraperKey();
      const m = t.clients(created.secret!).monitoring;
      const seen: string[] = [];
      let pageToken = "";
      for (;;) {
        const page = await m.listVMMonitoring({
          projectName: p.projectName,
          pageSize: 2,
          pageToken,
          inventoryOnly: true,
        });
        seen.push(...page.vms.map((v) => v.name));
        if (page.nextPageToken === undefined) break;
        assert.equal(page.vms.length, 2);
        pageToken = page.nextPageToken;
      }
      assert.deepEqual(seen, [...p.vms].sort());
      const first = await m.listVMMonitoring({
        projectName: p.projectName,
        pageSize: 1,
        inventoryOnly: true,
      });
      const tampered = `${first.nextPageToken!.slice(0, -2)}xx`;
      await rejectsWith(
        m.listVMMonitoring({
          projectName: p.projectName,
          pageSize: 1,
          pageToken: tampered,
          inventoryOnly: true,
        }),
        Code.InvalidArgument,
        "INVALID_PAGE_TOKEN",
      );
      const big = await m.listVMMonitoring({
        projectName: p.projectName,
        pageSize: 500,
        inventoryOnly: true,
      });
      assert.equal(big.vms.length, 3);
      assert.equal(big.nextPageToken, undefined);
      // A token of this project is refused by another project's listing.
      const o = t.clients(other.owner.session).monitoring;
      await rejectsWith(
        o.listVMMonitoring({
          projectName: other.projectName,
          pageToken: first.nextPageToken!,
          inventoryOnly: true,
        }),
        Code.InvalidArgument,
        "INVALID_PAGE_TOKEN",
      );
    });

    it("serves binary protobuf as well as JSON", async () => {
      const { created } = await scraperKey();
      const res = await t
        .clients(created.secret!, { useBinaryFormat: true })
        .monitoring.listVMMonitoring({ projectName: p.projectName, inventoryOnly: true });
      assert.equal(res.vms.length, 3);
    });
  });
}
