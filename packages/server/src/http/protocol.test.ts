import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  ListVMMonitoringRequestSchema,
  ListVMMonitoringResponseSchema,
} from "@svc/sdk/gen/svc/monitoring/v1/monitoring_pb";
import { testDialects } from "../../testing/dialects.ts";
import { ADMIN_TOKEN, startTestApp, type TestApp } from "../../testing/harness.ts";

const [sqlite] = await testDialects();

describe("Connect protocol edge", () => {
  let t: TestApp;
  let key: string;
  let projectName: string;
  before(async () => {
    t = await startTestApp(sqlite.dialect);
    const p = await t.seedProject("proto");
    projectName = p.projectName;
    const owner = t.clients(p.owner.session);
    const sa = await owner.serviceAccounts.createServiceAccount({
      parent: p.projectName,
      displayName: "s",
      template: "Metrics scraper",
    });
    key = (
      await owner.keys.createKey({
        parent: sa.name,
        displayName: "k",
        capabilities: ["monitoring.read"],
        requestId: randomUUID(),
      })
    ).secret!;
  });
  after(() => t?.close());

  const post = (path: string, body: string, headers: Record<string, string> = {}) =>
    fetch(`${t.baseUrl}${path}`, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        "Connect-Protocol-Version": "1",
        Authorization: `Bearer ${key}`,
        ...headers,
      },
      body,
    });
  const LIST = "/svc.monitoring.v1.MonitoringService/ListVMMonitoring";

  it("answers other HTTP methods on an RPC's path as Connect does, and an unknown RPC path 404", async () => {
    // Each RPC has routes for POST and GET only (connect-plugin.ts); the rest reach Connect through a wildcard.
    for (const method of ["PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]) {
      const res = await fetch(`${t.baseUrl}${LIST}`, {
        method,
        headers: { "Connect-Protocol-Version": "1", Authorization: `Bearer ${key}` },
      });
      assert.equal(res.status, 405, method);
    }
    // GET is Connect's for idempotent RPCs only: this one is not, so Connect refuses it, not Fastify.
    const get = await fetch(`${t.baseUrl}${LIST}?connect=v1&encoding=json&message=%7B%7D`, {
      headers: { Authorization: `Bearer ${key}` },
    });
    assert.equal(get.status, 405);
    const unknown = await post("/svc.monitoring.v1.MonitoringService/NoSuchMethod", "{}");
    assert.equal(unknown.status, 404);
    const unknownPut = await fetch(`${t.baseUrl}/svc.nosuch.v1.Service/Method`, { method: "PUT" });
    assert.equal(unknownPut.status, 404);
  });

  it("serves a call written exactly as the spec writes it", async () => {
    const res = await post(LIST, JSON.stringify({ projectName, pageSize: 50, inventoryOnly: true }));
    assert.equal(res.status, 200);
    const body = (await res.json()) as { vms: { name: string; displayName: string; state: string }[] };
    assert.equal(body.vms.length, 2);
    assert.deepEqual(Object.keys(body.vms[0]).slice(0, 3), ["name", "displayName", "state"]);
    assert.equal(body.vms[0].state, "RUNNING");
    assert.equal("nextPageToken" in body, false);
  });

  /** A project of 40 VMs: its ListVMMonitoring answer is well over Connect's 1 KiB compression floor. */
  const bigListing = async (projectId: string) => {
    const big = await t.seedProject(
      projectId,
      Array.from({ length: 40 }, (_, i) => `vm-${i}`),
    );
    return {
      big,
      body: JSON.stringify({ projectName: big.projectName, pageSize: 50, inventoryOnly: true }),
      auth: { Authorization: `Bearer ${big.owner.session}` },
    };
  };

  it("gzips large answers when the client accepts it, and reads gzipped requests", async () => {
    const { body, auth } = await bigListing("gzip-test");
    const plain = await post(LIST, body, { ...auth, "Accept-Encoding": "identity" });
    assert.equal(plain.headers.get("content-encoding"), null);
    const want = await plain.json();
    const zipped = await post(LIST, body, { ...auth, "Accept-Encoding": "gzip" });
    assert.equal(zipped.status, 200);
    assert.equal(zipped.headers.get("content-encoding"), "gzip");
    assert.deepEqual(await zipped.json(), want);
    const { gzipSync } = await import("node:zlib");
    const gzBody = await fetch(`${t.baseUrl}${LIST}`, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        "Connect-Protocol-Version": "1",
        "Content-Encoding": "gzip",
        ...auth,
      },
      body: gzipSync(body, { level: 9 }),
    });
    assert.equal(gzBody.status, 200);
    assert.deepEqual(await gzBody.json(), want);
  });

  it("answers in the coding svc prefers among those the client accepts, weights honoured", async () => {
    const { big, body, auth } = await bigListing("br-test");
    const want = await (await post(LIST, body, { ...auth, "Accept-Encoding": "identity" })).json();
    // A browser lists gzip first without weights: JSON is answered with brotli, cheaper and smaller.
    const browser = await post(LIST, body, { ...auth, "Accept-Encoding": "gzip, deflate, br, zstd" });
    assert.equal(browser.headers.get("content-encoding"), "br");
    assert.deepEqual(await browser.json(), want);
    // Weights decide first; Connect alone matched nothing in "gzip;q=1.0" and sent it uncompressed.
    const weighted = await post(LIST, body, { ...auth, "Accept-Encoding": "gzip;q=1.0, br;q=0.2" });
    assert.equal(weighted.headers.get("content-encoding"), "gzip");
    assert.deepEqual(await weighted.json(), want);
    const refused = await post(LIST, body, { ...auth, "Accept-Encoding": "br;q=0, deflate" });
    assert.equal(refused.headers.get("content-encoding"), null);
    assert.deepEqual(await refused.json(), want);
    // Binary protobuf compresses cheaper with gzip: the same browser header gets gzip.
    const request = create(ListVMMonitoringRequestSchema, {
      projectName: big.projectName,
      pageSize: 50,
      inventoryOnly: true,
    });
    const binary = await fetch(`${t.baseUrl}${LIST}`, {
      method: "POST",
      headers: {
        "Content-Type": "application/proto",
        "Connect-Protocol-Version": "1",
        "Accept-Encoding": "gzip, deflate, br, zstd",
        ...auth,
      },
      body: toBinary(ListVMMonitoringRequestSchema, request),
    });
    assert.equal(binary.status, 200);
    assert.equal(binary.headers.get("content-encoding"), "gzip");
    const decoded = fromBinary(ListVMMonitoringResponseSchema, new Uint8Array(await binary.arrayBuffer()));
    assert.equal(decoded.vms.length, (want as { vms: unknown[] }).vms.length);
  });

  it("refuses a request without Connect-Protocol-Version: 1", async () => {
    const res = await fetch(`${t.baseUrl}${LIST}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${key}` },
      body: JSON.stringify({ projectName, inventoryOnly: true }),
    });
    assert.equal(res.status, 400);
    assert.match(((await res.json()) as { message: string }).message, /Connect-Protocol-Version/);
  });

  it("refuses unknown request fields, naming the field", async () => {
    const res = await post(LIST, JSON.stringify({ projectName, inventoryOnly: true, pageSise: 5 }));
    assert.equal(res.status, 400);
    const body = (await res.json()) as { code: string; message: string };
    assert.equal(body.code, "invalid_argument");
    assert.match(body.message, /pageSise/);
  });

  it("says which field is wrong", async () => {
    const res = await post(LIST, JSON.stringify({ projectName: "demo", inventoryOnly: true }));
    const body = (await res.json()) as { code: string; message: string };
    assert.equal(body.code, "invalid_argument");
    assert.match(body.message, /^projectName: /);
  });

  it("answers an invalid binary protobuf body 400, never 500 (issue 41)", async () => {
    const bad = [
      Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]), // varint too long
      Buffer.from([0x0a, 0x7f, 0x01]), // field 1 says 127 bytes follow, 1 does
      Buffer.from([0x0f]), // wire type 7: no such type
      Buffer.from([0x0a, 0x02, 0xc3, 0x28]), // projectName that is not UTF-8
    ];
    for (const body of bad) {
      for (const [path, token] of [
        [LIST, key],
        ["/svc.monitoring.v1.AlertService/SaveAlertRule", key], // audited: the guard reads the body too
        ["/svc.iam.v1.SessionService/Login", undefined], // public and audited
        ["/svc.admin.v1.OperationsService/Backup", ADMIN_TOKEN],
      ] as const) {
        const res = await fetch(`${t.baseUrl}${path}`, {
          method: "POST",
          headers: {
            "Content-Type": "application/proto",
            "Connect-Protocol-Version": "1",
            ...(token ? { Authorization: `Bearer ${token}` } : {}),
          },
          body,
        });
        const text = await res.text();
        assert.ok(
          res.status === 400 || res.status === 403,
          `${path} ${body.toString("hex")}: ${res.status} ${text}`,
        );
        if (res.status === 400) {
          // Names what is wrong: the body, as the field (docs/api.md "Bad requests").
          const err = JSON.parse(text) as { code: string; message: string };
          assert.equal(err.code, "invalid_argument", `${path} ${body.toString("hex")}: ${text}`);
          assert.match(
            err.message,
            /^body: is not a binary svc\./,
            `${path} ${body.toString("hex")}: ${text}`,
          );
        }
      }
    }
  });

  it("refuses an oversized body without crashing", async () => {
    const res = await post(LIST, JSON.stringify({ projectName, pageToken: "x".repeat(5 * 1024 * 1024) }));
    assert.ok(
      res.status === 413 || res.status === 400 || res.status === 429 || res.status >= 400,
      `status ${res.status}`,
    );
    const again = await post(LIST, JSON.stringify({ projectName, inventoryOnly: true }));
    assert.equal(again.status, 200);
  });

  it("answers 401 with a Connect error body for a bad credential, without echoing it", async () => {
    const secret = "svcs_NOTAREALKEYNOTAREALKEYNOTAREALKE123456";
    const res = await post(LIST, JSON.stringify({ projectName, inventoryOnly: true }), {
      Authorization: `Bearer ${secret}`,
    });
    assert.equal(res.status, 401);
    assert.ok(!(await res.text()).includes(secret));
  });

  it("serves /healthz, /readyz and /metrics", async () => {
    assert.equal((await fetch(`${t.baseUrl}/healthz`)).status, 200);
    assert.equal((await fetch(`${t.baseUrl}/readyz`)).status, 200);
    const m = await (
      await fetch(`${t.baseUrl}/metrics`, { headers: { Authorization: `Bearer ${ADMIN_TOKEN}` } })
    ).text();
    assert.match(
      m,
      /svc_http_requests_total\{route="\/svc\.monitoring\.v1\.MonitoringService\/ListVMMonitoring",code="200"\}/,
    );
    assert.match(m, /process_cpu_seconds_total/);
  });
});
