import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { request } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import Database from "better-sqlite3";
import { createReceiver, type Receiver } from "../../../docs/examples/webhook-receiver.ts";
import { generateWebhookSecret, signDelivery } from "../../server/src/notify/signing.ts";

/** docs/examples/webhook-receiver.ts on loopback, fed deliveries signed as svc signs them. */
describe("docs/examples/webhook-receiver.ts", () => {
  const secret = generateWebhookSecret();
  const dir = mkdtempSync(join(tmpdir(), "svc-webhook-receiver-"));
  const dbPath = join(dir, "inbox.sqlite");
  const handled: { deliveryId: string; payload: unknown }[] = [];
  const logged: string[] = [];
  const log = { warn: (m: string) => logged.push(m), error: (m: string) => logged.push(m) };
  let receiver: Receiver;
  let url: string;

  async function start(): Promise<void> {
    receiver = createReceiver({
      secrets: [secret],
      dbPath,
      log,
      handle: (payload, deliveryId) => {
        handled.push({ deliveryId, payload });
      },
    });
    await new Promise<void>((r) => receiver.server.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${(receiver.server.address() as AddressInfo).port}/hooks/svc`;
  }
  before(start);
  after(async () => {
    await receiver.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const body = JSON.stringify({
    type: "incident.opened",
    deliveryId: "dlv_01JGZ3W4N5M6P7Q8R9S0T1V2W3",
    timestamp: Math.floor(Date.now() / 1000),
    project: "projects/demo",
    summary: "FIRING: High CPU utilization on web-2 (96.1 > 90)",
    link: "https://svc.example.com/projects/demo/incidents/inc_1",
  });
  const signed = (attemptId: string) =>
    signDelivery({
      deliveryId: "dlv_01JGZ3W4N5M6P7Q8R9S0T1V2W3",
      attemptId,
      timestampS: Math.floor(Date.now() / 1000),
      body,
      secrets: [secret],
    });
  const post = (headers: Record<string, string>, b: string = body) =>
    fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: b });

  it("accepts and records a delivery, then recognises the same delivery as a duplicate", async () => {
    const first = signed("att_1");
    const r1 = await post(first);
    assert.equal(r1.status, 200);
    assert.deepEqual(await r1.json(), { deliveryId: "dlv_01JGZ3W4N5M6P7Q8R9S0T1V2W3", duplicate: false });
    await receiver.drain();
    assert.deepEqual(handled, [{ deliveryId: "dlv_01JGZ3W4N5M6P7Q8R9S0T1V2W3", payload: JSON.parse(body) }]);

    // The same request again (a replay inside the window), and a retry with a new attempt ID.
    for (const headers of [first, signed("att_2")]) {
      const r = await post(headers);
      assert.equal(r.status, 200);
      assert.deepEqual(await r.json(), { deliveryId: "dlv_01JGZ3W4N5M6P7Q8R9S0T1V2W3", duplicate: true });
    }
    await receiver.drain();
    assert.equal(handled.length, 1);

    const db = new Database(dbPath, { fileMustExist: true });
    const rows = db.prepare("SELECT delivery_id, attempt_id, body, processed_at FROM webhook_inbox").all();
    db.close();
    assert.equal(rows.length, 1);
    assert.deepEqual(
      { ...(rows[0] as object), processed_at: undefined },
      {
        delivery_id: "dlv_01JGZ3W4N5M6P7Q8R9S0T1V2W3",
        attempt_id: "att_1",
        body,
        processed_at: undefined,
      },
    );
  });

  it("still knows the delivery after a restart (the de-duplication is durable)", async () => {
    await receiver.close();
    await start();
    const r = await post(signed("att_3"));
    assert.deepEqual(await r.json(), { deliveryId: "dlv_01JGZ3W4N5M6P7Q8R9S0T1V2W3", duplicate: true });
    await receiver.drain();
    assert.equal(handled.length, 1);
  });

  it("refuses a tampered delivery with 400 and stores nothing", async () => {
    const r = await post(signed("att_4"), body.replace("96.1", "16.1"));
    assert.equal(r.status, 400);
    assert.deepEqual(await r.json(), { error: "bad_signature" });
    const r2 = await post({ ...signed("att_5"), "webhook-id": "dlv_other" });
    assert.equal(r2.status, 400);
    assert.equal(handled.length, 1);
    assert.equal(logged.length, 2);
    assert.match(logged[0], /^refused a webhook: no svc-signature-v2 signature matches/);
  });

  it("answers 413 to a declared body over 1 MiB without reading it", async () => {
    const r = await post(signed("att_6"), "x".repeat(1024 * 1024 + 1));
    assert.equal(r.status, 413);
    assert.deepEqual(await r.json(), { error: "body_too_large" });
  });

  it("cuts a chunked body at 1 MiB + 1", async () => {
    const { port } = receiver.server.address() as AddressInfo;
    const outcome = await new Promise<string>((resolve) => {
      const req = request({
        host: "127.0.0.1",
        port,
        method: "POST",
        path: "/hooks/svc",
        headers: signed("att_7"),
      });
      req.on("response", (res) => resolve(`answered ${res.statusCode}`));
      req.on("error", () => resolve("connection closed"));
      req.write(Buffer.alloc(1024 * 1024, 0x61));
      req.end(Buffer.alloc(64 * 1024, 0x61));
    });
    // Node 20 keeps the socket and sends the 413; should a Node close it at once instead, the cut is the same.
    assert.ok(["answered 413", "connection closed"].includes(outcome), outcome);
    assert.equal(handled.length, 1);
  });
});
