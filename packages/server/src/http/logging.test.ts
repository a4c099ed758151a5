import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Writable } from "node:stream";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import { testDialects } from "../testing/dialects.ts";
import { startTestApp, type TestApp } from "../testing/harness.ts";
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
});
