import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import { testDialects } from "../../testing/dialects.ts";
import { startTestApp, type TestApp } from "../../testing/harness.ts";
import { loadConfig } from "../config.ts";
import { redactPaths } from "./server.ts";

const [sqlite] = await testDialects();

describe("logs", () => {
  let t: TestApp;
  let lines = "";
  before(async () => {
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines += chunk.toString();
        done();
      },
    });
    const logger = pino({ level: "trace", redact: { paths: redactPaths, censor: "[redacted]" } }, sink);
    t = await startTestApp(sqlite.dialect, {}, { logger });
  });
  after(() => t?.close());

  it("never contain a key, session token, password or operator token, even at trace level", async () => {
    const p = await t.seedProject("logs");
    const owner = t.clients(p.owner.session);
    const sa = await owner.serviceAccounts.createServiceAccount({
      parent: p.projectName,
      displayName: "s",
      template: "Metrics scraper",
    });
    const { secret } = await owner.keys.createKey({
      parent: sa.name,
      displayName: "k",
      capabilities: ["monitoring.read"],
      requestId: randomUUID(),
    });
    await t.clients(secret).monitoring.listVMMonitoring({ projectName: p.projectName, inventoryOnly: true });
    await t
      .clients(secret)
      .monitoring.listVMMonitoring({ projectName: "projects/nope", inventoryOnly: true })
      .catch(() => {});
    await t
      .clients(`${secret}x`)
      .monitoring.listVMMonitoring({ projectName: p.projectName })
      .catch(() => {});
    await fetch(`${t.baseUrl}/v1/ingest/prometheus/api/v1/write`, {
      method: "POST",
      headers: { Authorization: `Bearer ${secret}` },
    });
    assert.ok(lines.length > 0, "something was logged");
    for (const s of [secret!, p.owner.session, p.owner.password, t.app.config.adminToken]) {
      assert.ok(!lines.includes(s), "a credential reached the logs");
    }
  });

  it("logs each request once, at debug level, without its query string", async () => {
    lines = "";
    await fetch(`${t.baseUrl}/healthz?probe=1`);
    const entries = lines
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { level: number; msg: string; route?: string });
    const requests = entries.filter((e) => e.msg === "request");
    assert.equal(requests.length, 1);
    assert.equal(requests[0].level, 20, "debug");
    assert.equal(requests[0].route, "/healthz");
    assert.ok(
      !entries.some((e) => /incoming request|request completed/.test(e.msg)),
      "no info lines per request",
    );
  });
});

describe("log format", () => {
  it("is json unless asked otherwise off a terminal, and refuses an unknown format by name", () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-logfmt-"));
    assert.throws(() => loadConfig({ SVC_LOG_FORMAT: "xml", SVC_DATA_DIR: dir }), /SVC_LOG_FORMAT/);
    assert.equal(loadConfig({ SVC_LOG_FORMAT: "pretty", SVC_DATA_DIR: dir }).logFormat, "pretty");
    assert.equal(loadConfig({ SVC_LOG_FORMAT: "json", SVC_DATA_DIR: dir }).logFormat, "json");
    rmSync(dir, { recursive: true, force: true });
  });
});
