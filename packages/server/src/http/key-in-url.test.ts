import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Writable } from "node:stream";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import { redactPaths } from "./server.ts";

/**
 * A key never travels in a URL (docs/api.md): a key in the query string of an RPC, a Prometheus API
 * or an export route is not a credential. The call is answered 401 as one without a key, and neither
 * the answer nor the server's log (captured at trace level) contains the key.
 */
for (const { dialect, skip } of await testDialects()) {
  describe(`a key in a URL is refused and never logged (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let p: SeededProject;
    let key = "";
    let lines = "";
    before(async () => {
      const sink = new Writable({
        write(chunk, _enc, done) {
          lines += chunk.toString();
          done();
        },
      });
      const logger = pino({ level: "trace", redact: { paths: redactPaths, censor: "[redacted]" } }, sink);
      t = await startTestApp(dialect, {}, { logger });
      p = await t.seedProject("urlkey", ["vm-1"]);
      const owner = t.clients(p.owner.session);
      const sa = await owner.serviceAccounts.createServiceAccount({
        parent: p.projectName,
        displayName: "scraper",
        template: "Metrics scraper",
      });
      key =
        (
          await owner.keys.createKey({
            parent: sa.name,
            displayName: "scraper",
            capabilities: ["monitoring.read"],
            requestId: randomUUID(),
          })
        ).secret ?? "";
      assert.ok(key);
    });
    after(() => t?.close());

    const rpc = "/svc.monitoring.v1.MonitoringService/ListVMMonitoring";
    const routes: { name: string; path: string; init: RequestInit }[] = [
      {
        name: "RPC",
        path: rpc,
        init: {
          method: "POST",
          headers: { "content-type": "application/json", "connect-protocol-version": "1" },
          body: JSON.stringify({ projectName: "projects/urlkey", inventoryOnly: true }),
        },
      },
      {
        name: "Prometheus API",
        path: "/v1/monitoring/projects/urlkey/prometheus/api/v1/query?query=up",
        init: {},
      },
      { name: "scrape discovery", path: "/v1/monitoring/projects/urlkey/scrape-targets", init: {} },
      { name: "export", path: "/v1/monitoring/projects/urlkey/export?shard=0", init: {} },
    ];
    const withParam = (path: string, param: string) =>
      `${t.baseUrl}${path}${path.includes("?") ? "&" : "?"}${param}=${encodeURIComponent(key)}`;

    for (const route of routes) {
      it(`${route.name}: ?token=, ?access_token= and ?api_key= answer 401; the header is served`, async () => {
        for (const param of ["token", "access_token", "api_key"]) {
          const res = await fetch(withParam(route.path, param), route.init);
          const body = await res.text();
          assert.equal(res.status, 401, `${param}: ${body}`);
          assert.ok(!body.includes(key), "the answer does not echo the key");
        }
        // The same call with the key where it belongs is served: the route and the key are good.
        const headers = { ...(route.init.headers as Record<string, string>), authorization: `Bearer ${key}` };
        const ok = await fetch(`${t.baseUrl}${route.path}`, { ...route.init, headers });
        assert.equal(ok.status, 200, await ok.text());
      });
    }

    it("the server's log has each of those requests and never the key", () => {
      const entries = lines
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as { msg: string; statusCode?: number });
      assert.ok(entries.filter((e) => e.msg === "request" && e.statusCode === 401).length >= 12);
      assert.ok(!lines.includes(key), "the key reached the log");
      // Nor its secret part alone (a log that redacted a prefix would still leak it).
      assert.ok(!lines.includes(key.slice(-24)), "part of the key reached the log");
    });
  });
}
