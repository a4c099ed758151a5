import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { sql } from "kysely";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import { type DbHandle, openDb } from "../db/database.ts";
import { SvcError } from "../errors.ts";
import { authenticate, authorizeProject } from "./principal.ts";
import { keyCacheOf } from "./principal-cache.ts";

const DAY = 86_400_000;

/** The SvcError reason `p` rejects with (fails when it resolves). */
async function reasonOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof SvcError, String(e));
    return e.reason;
  }
  assert.fail("expected a refusal");
}

for (const { dialect, skip } of await testDialects()) {
  describe(`key principals cached under the auth revision (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let p: SeededProject;
    // Replica B: its own connection to the same database, so its own cache (principal-cache.ts);
    // replica A is the test app, through which the owner and the operator change grants.
    let b: DbHandle;
    before(async () => {
      t = await startTestApp(dialect);
      p = await t.seedProject("acme", ["web-1"]);
      b = await openDb({ databaseUrl: t.app.config.databaseUrl, dataDir: t.app.config.dataDir });
    });
    after(async () => {
      await b?.close();
      await t?.close();
    });

    /** Replica B's check of the Prometheus API: authenticate, then monitoring.read in the project. */
    const onB = async (
      secret: string,
      capability: "monitoring.read" | "monitoring.write" = "monitoring.read",
    ) => {
      const principal = await authenticate(b.db, secret, t.clock.now());
      await authorizeProject(b.db, principal, "acme", capability);
      return principal;
    };
    /** Replica A's Prometheus API over HTTP: its status for `secret`. */
    const promApiOnA = async (secret: string) =>
      (
        await fetch(`${t.baseUrl}/v1/monitoring/projects/acme/prometheus/api/v1/query?query=up`, {
          headers: { authorization: `Bearer ${secret}` },
        })
      ).status;

    async function serviceAccountKey(expireDays = 30) {
      const owner = t.clients(p.owner.session);
      const sa = await owner.serviceAccounts.createServiceAccount({
        parent: p.projectName,
        displayName: `sa-${randomUUID().slice(0, 8)}`,
        template: "Metrics scraper",
      });
      const created = await owner.keys.createKey({
        parent: sa.name,
        displayName: "k",
        capabilities: ["monitoring.read"],
        expireDays,
        requestId: randomUUID(),
      });
      return { sa, secret: created.secret!, name: created.key!.name };
    }

    it("a key revoked through replica A is refused at once by replica B, which had it cached", async () => {
      const { secret, name } = await serviceAccountKey();
      await onB(secret);
      await onB(secret);
      assert.equal(await promApiOnA(secret), 200);
      const cache = keyCacheOf(b.db);
      assert.ok(cache && cache.size >= 1, "replica B cached the key");
      await t.clients(p.owner.session).keys.revokeKey({ name });
      assert.equal(await reasonOf(onB(secret)), "CREDENTIAL_REVOKED");
      assert.equal(await promApiOnA(secret), 401);
    });

    it("a service account disabled on A is refused on B at once, and accepted again once enabled", async () => {
      const { sa, secret } = await serviceAccountKey();
      await onB(secret);
      const owner = t.clients(p.owner.session);
      await owner.serviceAccounts.disableServiceAccount({ name: sa.name });
      assert.equal(await reasonOf(onB(secret)), "IDENTITY_DISABLED");
      await owner.serviceAccounts.enableServiceAccount({ name: sa.name });
      await onB(secret);
    });

    it("a personal key follows its owner's role at once: editor → viewer → removed → member again", async () => {
      const email = `m-${randomUUID()}@example.com`;
      const password = `pw-${randomUUID()}`;
      const user = await t.admin.users.createUser({ email, password, displayName: "M" });
      await t.admin.projects.setMember({ project: p.projectName, user: user.name, role: "editor" });
      const { sessionToken } = await t.clients().sessions.login({ email, password });
      const key = await t.clients(sessionToken).keys.createKey({
        parent: p.projectName,
        displayName: "mine",
        capabilities: ["monitoring.read", "monitoring.write"],
        expireDays: 30,
        requestId: randomUUID(),
      });
      await onB(key.secret!, "monitoring.write");
      await t.admin.projects.setMember({ project: p.projectName, user: user.name, role: "viewer" });
      assert.equal(await reasonOf(onB(key.secret!, "monitoring.write")), "GRANT_REMOVED");
      await onB(key.secret!, "monitoring.read");
      await t.admin.projects.removeMember({ project: p.projectName, user: user.name });
      assert.equal(await reasonOf(onB(key.secret!, "monitoring.read")), "GRANT_REMOVED");
      assert.equal(await promApiOnA(key.secret!), 403);
      await t.admin.projects.setMember({ project: p.projectName, user: user.name, role: "viewer" });
      await onB(key.secret!, "monitoring.read");
      assert.equal(await promApiOnA(key.secret!), 200);
    });

    it("a cached key is refused once the clock passes its expiry, with no change in the database", async () => {
      const { secret } = await serviceAccountKey(1);
      await onB(secret);
      const revision = await keyCacheOf(b.db)!.revision();
      t.clock.advance(DAY + 1000);
      try {
        assert.equal(await keyCacheOf(b.db)!.revision(), revision, "nothing bumped the revision");
        assert.equal(await reasonOf(onB(secret)), "CREDENTIAL_EXPIRED");
        assert.equal(await promApiOnA(secret), 401);
      } finally {
        t.clock.advance(-(DAY + 1000));
      }
    });

    it("a change made by hand on the database (no svc code) bumps the revision; a key's last use does not", async () => {
      const { secret, name } = await serviceAccountKey();
      await onB(secret);
      const cache = keyCacheOf(b.db)!;
      const before = await cache.revision();
      // The key's last use, as audit/last-use.ts writes it: the cache stays valid.
      await b.db
        .updateTable("api_keys")
        .set({ last_used_time: t.clock.now(), last_used_address: "127.0.0.1" })
        .where("id", "=", name.split("/").at(-1)!)
        .execute();
      assert.equal(await cache.revision(), before);
      // A revocation in SQL, as an operator might in psql or sqlite3.
      await sql`update api_keys set revoke_time = ${t.clock.now()} where id = ${name.split("/").at(-1)!}`.execute(
        b.db,
      );
      assert.ok((await cache.revision()) > before);
      assert.equal(await reasonOf(onB(secret)), "CREDENTIAL_REVOKED");
    });

    it("an entry built under a revision superseded while its rows were read is not kept", async () => {
      const cache = keyCacheOf(b.db)!;
      const now = await cache.revision();
      const { secret } = await serviceAccountKey();
      const principal = await onB(secret);
      assert.equal(principal.kind, "SERVICE_ACCOUNT_KEY");
      if (principal.kind !== "SERVICE_ACCOUNT_KEY") return;
      const stale = { principal, expireTime: Number.MAX_SAFE_INTEGER, revokeTime: null, revision: now - 1 };
      cache.set("stale-hash", stale);
      assert.equal(cache.get("stale-hash", now - 1), undefined);
    });
  });
}
