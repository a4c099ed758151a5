import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../testing/dialects.ts";
import { startTestApp, type TestApp } from "../../testing/harness.ts";
import { CONTENT_SECURITY_POLICY } from "./routes.ts";

const dialects = await testDialects();

async function login(t: TestApp, email: string, password: string, headers: Record<string, string> = {}) {
  return fetch(`${t.baseUrl}/console/api/session`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ email, password }),
  });
}

function cookieOf(r: Response): string {
  const c = r.headers.get("set-cookie") ?? "";
  return c.split(";")[0];
}

async function rpc(t: TestApp, method: string, body: unknown, headers: Record<string, string>) {
  return fetch(`${t.baseUrl}/${method}`, {
    method: "POST",
    headers: { "content-type": "application/json", "connect-protocol-version": "1", ...headers },
    body: JSON.stringify(body),
  });
}

for (const { dialect, skip } of dialects) {
  describe(`console session (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect);
    });
    after(() => t?.close());

    it("sets an HttpOnly, SameSite=Strict cookie and never returns the session token in the body", async () => {
      const p = await t.seedProject("cookie");
      const r = await login(t, p.owner.email, p.owner.password);
      assert.equal(r.status, 200);
      const setCookie = r.headers.get("set-cookie") ?? "";
      assert.match(setCookie, /^svc_session=svch_/);
      assert.match(setCookie, /HttpOnly/);
      assert.match(setCookie, /SameSite=Strict/);
      // The test origin is http://, so the cookie is not Secure (it is when SVC_BASE_URL is https).
      assert.doesNotMatch(setCookie, /Secure/);
      const text = await r.text();
      assert.ok(!text.includes(cookieOf(r).split("=")[1]), "the token stays out of the page's reach");
      const body = JSON.parse(text) as { csrfToken: string; projects: { name: string; role: string }[] };
      assert.ok(body.csrfToken.length > 20);
      assert.deepEqual(body.projects, [{ name: p.projectName, displayName: "cookie", role: "owner" }]);
    });

    it("answers a wrong password with 401 and no cookie", async () => {
      const p = await t.seedProject("wrongpw");
      const r = await login(t, p.owner.email, "not-it");
      assert.equal(r.status, 401);
      assert.equal(r.headers.get("set-cookie"), null);
      const body = (await r.json()) as { message: string };
      assert.ok(!JSON.stringify(body).includes("not-it"), "the password is not echoed");
    });

    it("slows password guessing: 429 with Retry-After after a burst for one account", async () => {
      const p = await t.seedProject("guessing");
      let limited: Response | undefined;
      for (let i = 0; i < 12 && !limited; i++) {
        const r = await login(t, p.owner.email, `guess-${i}`);
        if (r.status === 429) limited = r;
        else assert.equal(r.status, 401);
      }
      assert.ok(limited, "the account's burst ran out");
      assert.ok(Number(limited.headers.get("retry-after")) >= 1);
      assert.equal(((await limited.json()) as { reason: string }).reason, "RATE_LIMITED");
    });

    it("refuses a sign-in posted from another site", async () => {
      const p = await t.seedProject("crosssite");
      const a = await login(t, p.owner.email, p.owner.password, { origin: "https://evil.example" });
      assert.equal(a.status, 403);
      assert.equal(((await a.json()) as { reason: string }).reason, "CSRF_REJECTED");
      const b = await login(t, p.owner.email, p.owner.password, { "sec-fetch-site": "cross-site" });
      assert.equal(b.status, 403);
      const c = await login(t, p.owner.email, p.owner.password, { origin: "not a url" });
      assert.equal(c.status, 403, "a malformed Origin is refused, not a server error");
    });

    it("accepts an RPC with the cookie only together with the CSRF token", async () => {
      const p = await t.seedProject("csrf");
      const r = await login(t, p.owner.email, p.owner.password);
      const cookie = cookieOf(r);
      const { csrfToken } = (await r.json()) as { csrfToken: string };
      const body = { projectName: p.projectName, inventoryOnly: true };
      const without = await rpc(t, "svc.monitoring.v1.MonitoringService/ListVMMonitoring", body, { cookie });
      assert.equal(without.status, 403);
      assert.match(await without.text(), /CSRF_REJECTED/);
      const wrong = await rpc(t, "svc.monitoring.v1.MonitoringService/ListVMMonitoring", body, {
        cookie,
        "x-svc-csrf": `${csrfToken.slice(0, -2)}xx`,
      });
      assert.equal(wrong.status, 403);
      const ok = await rpc(t, "svc.monitoring.v1.MonitoringService/ListVMMonitoring", body, {
        cookie,
        "x-svc-csrf": csrfToken,
      });
      assert.equal(ok.status, 200);
      assert.equal(((await ok.json()) as { vms: unknown[] }).vms.length, 2);
      // A human-only method works from the console: the cookie is a human session.
      const who = await rpc(t, "svc.iam.v1.SessionService/WhoAmI", {}, { cookie, "x-svc-csrf": csrfToken });
      assert.equal(((await who.json()) as { kind: string }).kind, "HUMAN_SESSION");
    });

    it("lets the console read the Prometheus API with the cookie and CSRF token, never the cookie alone", async () => {
      const p = await t.seedProject("promcookie");
      const r = await login(t, p.owner.email, p.owner.password);
      const cookie = cookieOf(r);
      const { csrfToken } = (await r.json()) as { csrfToken: string };
      const query = (headers: Record<string, string>, project = "promcookie") =>
        fetch(`${t.baseUrl}/v1/monitoring/projects/${project}/prometheus/api/v1/query_range`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
          body: new URLSearchParams({ query: "1+1", start: "0", end: "120", step: "60" }),
        });
      const ok = await query({ cookie, "x-svc-csrf": csrfToken });
      assert.equal(ok.status, 200, await ok.clone().text());
      assert.equal(((await ok.json()) as { data: { resultType: string } }).data.resultType, "matrix");
      const without = await query({ cookie });
      assert.equal(without.status, 403);
      assert.match(await without.text(), /CSRF/);
      const wrong = await query({ cookie, "x-svc-csrf": `${csrfToken.slice(0, -2)}xx` });
      assert.equal(wrong.status, 403);
      assert.equal((await query({})).status, 401);
      // The session reaches only its own projects, as over Connect.
      await t.seedProject("promcookie-other");
      assert.equal((await query({ cookie, "x-svc-csrf": csrfToken }, "promcookie-other")).status, 403);
    });

    it("ignores an API key placed in the cookie", async () => {
      const p = await t.seedProject("keycookie");
      const sa = await t.clients(p.owner.session).serviceAccounts.createServiceAccount({
        parent: p.projectName,
        displayName: "s",
        template: "Metrics scraper",
      });
      const { secret } = await t.clients(p.owner.session).keys.createKey({
        parent: sa.name,
        displayName: "k",
        capabilities: ["monitoring.read"],
        requestId: crypto.randomUUID(),
      });
      const r = await rpc(
        t,
        "svc.monitoring.v1.MonitoringService/ListVMMonitoring",
        { projectName: p.projectName, inventoryOnly: true },
        { cookie: `svc_session=${secret}` },
      );
      assert.equal(r.status, 401);
    });

    it("signs out: the session is revoked and the cookie cleared", async () => {
      const p = await t.seedProject("logout");
      const r = await login(t, p.owner.email, p.owner.password);
      const cookie = cookieOf(r);
      const { csrfToken } = (await r.json()) as { csrfToken: string };
      const noCsrf = await fetch(`${t.baseUrl}/console/api/session`, {
        method: "DELETE",
        headers: { cookie },
      });
      assert.equal(noCsrf.status, 403, "logout needs the CSRF token too");
      const out = await fetch(`${t.baseUrl}/console/api/session`, {
        method: "DELETE",
        headers: { cookie, "x-svc-csrf": csrfToken },
      });
      assert.equal(out.status, 204);
      assert.match(out.headers.get("set-cookie") ?? "", /svc_session=;.*Max-Age=0/);
      // The session probe answers "not signed in" as a 200 (no error in a signed-out page's console).
      const after = await fetch(`${t.baseUrl}/console/api/session`, { headers: { cookie } });
      assert.equal(after.status, 200);
      assert.deepEqual(await after.json(), { signedIn: false });
      assert.match(after.headers.get("set-cookie") ?? "", /svc_session=;.*Max-Age=0/);
      const call = await rpc(
        t,
        "svc.iam.v1.SessionService/WhoAmI",
        {},
        {
          cookie,
          "x-svc-csrf": csrfToken,
        },
      );
      assert.equal(call.status, 401);
    });
  });
}

describe("console pages", () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp(dialects[0].dialect, { consoleDir: "/nonexistent-console-dist" });
  });
  after(() => t?.close());

  it("says the console is not built instead of a blank page, with the CSP", async () => {
    const r = await fetch(`${t.baseUrl}/projects/x/vms`, { headers: { accept: "text/html" } });
    assert.equal(r.status, 503);
    assert.match(await r.text(), /npm run build:console/);
    assert.equal(r.headers.get("content-security-policy"), CONTENT_SECURITY_POLICY);
  });

  it("keeps API 404s as JSON and never answers the page for them", async () => {
    const r = await fetch(`${t.baseUrl}/v1/nothing-here`, { headers: { accept: "text/html" } });
    assert.equal(r.status, 404);
    assert.match(r.headers.get("content-type") ?? "", /json/);
  });
});

describe("console files", () => {
  let t: TestApp;
  const dist = mkdtempSync(join(tmpdir(), "svc-console-dist-"));
  before(async () => {
    mkdirSync(join(dist, "assets"));
    writeFileSync(join(dist, "index.html"), "<!doctype html><title>svc</title>");
    writeFileSync(join(dist, "assets", "app-1a2b.js"), "console.log(1);");
    writeFileSync(join(dist, ".build-stamp"), "built\n");
    t = await startTestApp(dialects[0].dialect, { consoleDir: dist });
  });
  after(async () => {
    await t?.close();
    rmSync(dist, { recursive: true, force: true });
  });

  it("serves each built file (GET and HEAD), never a dot file, and the page for the app's paths", async () => {
    const js = await fetch(`${t.baseUrl}/assets/app-1a2b.js`);
    assert.equal(js.status, 200);
    assert.equal(await js.text(), "console.log(1);");
    assert.equal(js.headers.get("cache-control"), "public, max-age=31536000, immutable");
    const head = await fetch(`${t.baseUrl}/assets/app-1a2b.js`, { method: "HEAD" });
    assert.equal(head.status, 200);
    const stamp = await fetch(`${t.baseUrl}/.build-stamp`);
    assert.equal(stamp.status, 404);
    assert.notEqual(await stamp.text(), "built\n");
    const missing = await fetch(`${t.baseUrl}/assets/nope.js`);
    assert.equal(missing.status, 404);
    const page = await fetch(`${t.baseUrl}/projects/x/vms`, { headers: { accept: "text/html" } });
    assert.equal(page.status, 200);
    assert.equal(await page.text(), "<!doctype html><title>svc</title>");
    assert.equal(page.headers.get("cache-control"), "no-cache");
  });
});

describe("sign-in limits per address behind a load balancer (SVC_TRUSTED_PROXIES)", () => {
  /** Sign-ins to unknown accounts (401, each its own account bucket) until one is refused. */
  async function attemptsUntilLimited(t: TestApp, headers: Record<string, string>): Promise<number> {
    for (let i = 1; i <= 30; i++) {
      const r = await login(t, `nobody-${i}-${Math.random()}@example.com`, "pw", headers);
      if (r.status === 429) return i;
      assert.equal(r.status, 401);
    }
    return Number.POSITIVE_INFINITY;
  }
  const from = (ip: string) => ({ "x-forwarded-for": ip });

  it("limits the client X-Forwarded-For names when the request comes from a trusted balancer", async () => {
    const t = await startTestApp(dialects[0].dialect, { trustedProxies: ["127.0.0.1"] });
    try {
      assert.equal(await attemptsUntilLimited(t, from("203.0.113.7")), 21, "20 per address, then refused");
      // Another client behind the same balancer has its own bucket.
      assert.equal((await login(t, "someone@example.com", "pw", from("203.0.113.8"))).status, 401);
    } finally {
      await t.close();
    }
  });

  it("ignores X-Forwarded-For by default: a client cannot pick its own address", async () => {
    const t = await startTestApp(dialects[0].dialect);
    try {
      for (let i = 0; i < 20; i++)
        assert.equal((await login(t, `a-${i}@example.com`, "pw", from(`198.51.100.${i}`))).status, 401);
      assert.equal((await login(t, "b@example.com", "pw", from("198.51.100.99"))).status, 429);
    } finally {
      await t.close();
    }
  });
});
