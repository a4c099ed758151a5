import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Browser } from "playwright-core";
import {
  browserUnavailable,
  buildConsole,
  CONSOLE_DIST,
  launchBrowser,
  openPage,
  signIn,
} from "../../packages/server/testing/browser.ts";
import { testDialects } from "../../packages/server/testing/dialects.ts";
import { startTestApp, type TestApp } from "../../packages/server/testing/harness.ts";

const [sqlite] = await testDialects();
const skip = browserUnavailable();

describe("console in Chromium: sign-in, the VM list, sign-out", { skip }, () => {
  let t: TestApp;
  let browser: Browser;
  before(async () => {
    buildConsole();
    t = await startTestApp(sqlite.dialect, { consoleDir: CONSOLE_DIST }, { wallClock: true });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await t?.close();
  });

  it("signs in with a cookie the page cannot read, lists VMs, and signs out", async () => {
    const p = await t.seedProject("browser", ["web-a", "web-b"]);
    const { page, problems } = await openPage(browser);
    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);
    assert.match(page.url(), /\/projects\/browser\/vms$/);
    const rows = page.getByTestId("vm-table").locator("tbody tr");
    await rows.first().waitFor();
    assert.equal(await rows.count(), 2);
    // No telemetry yet: the latest CPU is a dash, never 0 %.
    const cpu = await rows.first().locator("td").nth(5).textContent(); // after Name, State, Incidents, Location, Monitoring
    assert.equal(cpu, "—");

    const cookies = await page.context().cookies();
    const session = cookies.find((c) => c.name === "svc_session");
    assert.ok(session, "the session cookie is set");
    assert.equal(session.httpOnly, true);
    assert.equal(session.sameSite, "Strict");
    // A string expression: the page's globals are the browser's, not this process's.
    const visible = (await page.evaluate(`({
      cookie: document.cookie,
      local: JSON.stringify(window.localStorage),
      sessionStorage: JSON.stringify(window.sessionStorage),
      html: document.documentElement.outerHTML,
      url: window.location.href,
    })`)) as Record<string, string>;
    for (const [where, text] of Object.entries(visible))
      assert.ok(!text.includes(session.value), `the session token is not in ${where}`);

    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("button", { name: "Sign in" }).waitFor();
    const left = (await page.context().cookies()).find((c) => c.name === "svc_session");
    assert.ok(!left || left.value === "", "the cookie is cleared");
    assert.deepEqual(problems, []);
  });

  it("logs no console error on a signed-out load, and opening a VM that does not exist calls no query for it", async () => {
    const p = await t.seedProject("quiet", ["web-a"]);
    const { page } = await openPage(browser);
    const errors: string[] = [];
    const failed: string[] = [];
    page.on("console", (m) => {
      if (m.type() === "error") errors.push(m.text());
    });
    page.on("response", (r) => {
      if (r.status() >= 400) failed.push(`${r.status()} ${new URL(r.url()).pathname}`);
    });
    const scripts: string[] = [];
    page.on("request", (r) => {
      if (r.resourceType() === "script") scripts.push(new URL(r.url()).pathname);
    });
    await page.goto(`${t.baseUrl}/`);
    await page.getByRole("button", { name: "Sign in" }).waitFor();
    await page.waitForLoadState("networkidle");
    assert.deepEqual(errors, [], "the session probe of a signed-out page is no error");
    assert.deepEqual(failed, []);
    // The sign-in page loads its entry chunk only; the signed-in console comes after sign-in.
    assert.equal(scripts.length, 1, scripts.join(", "));
    assert.match(scripts[0], /^\/assets\/index-/);

    await signIn(page, t.baseUrl, p.owner.email, p.owner.password);
    await page.goto(`${t.baseUrl}/projects/quiet/vms/dc-1/no-such-vm`);
    await page.getByTestId("vm-not-found").waitFor();
    await page.waitForLoadState("networkidle");
    assert.deepEqual(failed, [], "the inventory says the VM is missing; nothing asks its metrics");
    assert.deepEqual(errors, []);
    await page.context().close();
  });

  it("serves hashed assets as immutable and the page with no-cache and a CSP", async () => {
    const html = await fetch(`${t.baseUrl}/projects/browser/vms`, { headers: { accept: "text/html" } });
    assert.equal(html.status, 200);
    assert.equal(html.headers.get("cache-control"), "no-cache");
    assert.match(html.headers.get("content-security-policy") ?? "", /script-src 'self'/);
    const entry = /src="(\/assets\/[^"]+\.js)"/.exec(await html.text())?.[1];
    assert.ok(entry, "the page loads a hashed script");
    const js = await fetch(`${t.baseUrl}${entry}`);
    assert.equal(js.status, 200);
    assert.equal(js.headers.get("cache-control"), "public, max-age=31536000, immutable");
    // The entry is the small sign-in script; the signed-in console it loads (React) shows the compression.
    const app = /assets\/app-[\w-]+\.js/.exec(await js.text())?.[0];
    assert.ok(app, "the entry loads the signed-in console's chunk");
    const asset = `/${app}`;
    // Precompressed by the build, sent by Accept-Encoding (br first), the plain file to anyone else; caches
    // key on Accept-Encoding. node:http's client does not decode, so the bytes are the coded ones.
    const { request } = await import("node:http");
    const { brotliDecompressSync, gunzipSync } = await import("node:zlib");
    const get = (encoding: string) =>
      new Promise<{ headers: Record<string, string | string[] | undefined>; body: Buffer }>(
        (resolve, reject) => {
          const r = request(`${t.baseUrl}${asset}`, { headers: { "accept-encoding": encoding } }, (res) => {
            const chunks: Buffer[] = [];
            res.on("data", (c: Buffer) => chunks.push(c));
            res.on("end", () => resolve({ headers: res.headers, body: Buffer.concat(chunks) }));
          });
          r.on("error", reject);
          r.end();
        },
      );
    const plain = await get("identity");
    assert.equal(plain.headers["content-encoding"], undefined);
    const br = await get("gzip, deflate, br");
    assert.equal(br.headers["content-encoding"], "br");
    assert.equal(br.headers.vary, "Accept-Encoding");
    assert.ok(br.body.length < plain.body.length / 3, `${br.body.length} of ${plain.body.length} bytes`);
    assert.deepEqual(brotliDecompressSync(br.body), plain.body);
    const gz = await get("gzip");
    assert.equal(gz.headers["content-encoding"], "gzip");
    assert.deepEqual(gunzipSync(gz.body), plain.body);
  });
});
