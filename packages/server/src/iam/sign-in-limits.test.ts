import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../testing/dialects.ts";
import { startTestApp, type TestApp } from "../../testing/harness.ts";

/** SessionService/Login over Connect's JSON, so the status and headers are the test's to read. */
async function apiLogin(t: TestApp, email: string, password: string): Promise<Response> {
  return fetch(`${t.baseUrl}/svc.iam.v1.SessionService/Login`, {
    method: "POST",
    headers: { "content-type": "application/json", "connect-protocol-version": "1" },
    body: JSON.stringify({ email, password }),
  });
}

async function consoleLogin(t: TestApp, email: string, password: string): Promise<Response> {
  return fetch(`${t.baseUrl}/console/api/session`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ email, password }),
  });
}

async function newUser(t: TestApp, email: string): Promise<{ email: string; password: string }> {
  const password = `pw-${email}-correct`;
  await t.admin.users.createUser({ email, password, displayName: "Guessed" });
  return { email, password };
}

for (const { dialect, skip } of await testDialects()) {
  describe(`sign-in limits, API and console alike (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect);
    });
    after(() => t?.close());

    it("refuses API logins after 10 wrong passwords with 429 and Retry-After, the right one too, until it refills", async () => {
      t.clock.advance(600_000); // every bucket full again
      const u = await newUser(t, "api-guess@example.com");
      const statuses: number[] = [];
      let limited: Response | undefined;
      for (let i = 0; i < 30; i++) {
        const r = await apiLogin(t, u.email, `wrong-${i}`);
        statuses.push(r.status);
        if (r.status === 429) limited ??= r;
        else await r.body?.cancel();
      }
      assert.deepEqual(statuses.slice(0, 10), Array(10).fill(401), "10 failures are answered");
      assert.ok(
        statuses.slice(10).every((s) => s === 429),
        `then 429: ${statuses.join(",")}`,
      );
      assert.ok(limited);
      assert.ok(Number(limited.headers.get("retry-after")) >= 1, "Retry-After says when to come back");
      assert.match(await limited.text(), /RATE_LIMITED/);
      // The right password is refused while the account's bucket is empty: guessing cannot go on.
      assert.equal((await apiLogin(t, u.email, u.password)).status, 429);
      t.clock.advance(11_000);
      const ok = await apiLogin(t, u.email, u.password);
      assert.equal(ok.status, 200, "one token back after 10 s");
    });

    it("shares the account's bucket between the console's sign-in and the API's Login", async () => {
      t.clock.advance(600_000);
      const u = await newUser(t, "both-paths@example.com");
      for (let i = 0; i < 10; i++) assert.equal((await consoleLogin(t, u.email, `wrong-${i}`)).status, 401);
      const r = await apiLogin(t, u.email.toUpperCase(), u.password);
      assert.equal(r.status, 429, "the console's failures lock the API's Login of the same account");
      t.clock.advance(60_000);
      for (let i = 0; i < 6; i++) assert.equal((await apiLogin(t, u.email, `wrong-${i}`)).status, 401);
      assert.equal((await consoleLogin(t, u.email, u.password)).status, 429, "and the other way round");
    });

    it("counts failures only: a success gives its tokens back", async () => {
      t.clock.advance(600_000);
      // 22 successful sign-ins from one address (more than its 20) are all answered.
      const u = await newUser(t, "often@example.com");
      for (let i = 0; i < 22; i++) assert.equal((await apiLogin(t, u.email, u.password)).status, 200);
    });

    it("limits failures per client address across accounts: 20, then 429 for any account", async () => {
      t.clock.advance(600_000);
      for (let i = 0; i < 20; i++)
        assert.equal((await apiLogin(t, `nobody-${i}@example.com`, "pw")).status, 401);
      const u = await newUser(t, "same-address@example.com");
      const r = await apiLogin(t, u.email, u.password);
      assert.equal(r.status, 429);
      assert.match(await r.text(), /from this address/);
    });

    it("does not record attempts the limit refused: failed anonymous logins stay bounded in the audit log", async () => {
      t.clock.advance(600_000);
      const u = await newUser(t, "flood@example.com");
      const count = async () =>
        (
          await t.app.db.db
            .selectFrom("audit_events")
            .select("id")
            .where("method", "=", "svc.iam.v1.SessionService/Login")
            .where("actor_kind", "=", "ANONYMOUS")
            .execute()
        ).length;
      const before = await count();
      for (let i = 0; i < 145; i++) await (await apiLogin(t, u.email, `wrong-${i}`)).body?.cancel();
      const written = (await count()) - before;
      assert.ok(
        written <= 10,
        `${written} events for 145 wrong passwords: at most the account's 10 failures`,
      );
      assert.ok(written >= 1, "the failures themselves are recorded");
    });
  });
}
