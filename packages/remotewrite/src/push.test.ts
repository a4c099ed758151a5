import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, it } from "node:test";
import { decodeRemoteWriteBody, pushRemoteWrite, RemoteWritePushError, type WriteRequest } from "./index.ts";

const req: WriteRequest = {
  timeseries: [{ labels: [{ name: "__name__", value: "up" }], samples: [{ value: 1, timestampMs: 1000 }] }],
};

async function receiver(status: number, answer: string, delayMs = 0) {
  const got: { headers: IncomingHttpHeaders; body: WriteRequest }[] = [];
  const server = createServer((r, res) => {
    const chunks: Buffer[] = [];
    r.on("data", (c: Buffer) => chunks.push(c));
    r.on("end", () => {
      got.push({ headers: r.headers, body: decodeRemoteWriteBody(Buffer.concat(chunks)) });
      setTimeout(() => res.writeHead(status, { "Content-Type": "text/plain" }).end(answer), delayMs);
    });
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1/write`;
  return { url, got, close: () => new Promise<void>((ok) => server.close(() => ok())) };
}

describe("pushRemoteWrite()", () => {
  it("POSTs a snappy protobuf body with the remote-write headers and bearer token", async () => {
    const r = await receiver(204, "");
    try {
      const res = await pushRemoteWrite(r.url, "tok-123", req, { timeoutMs: 5000 });
      assert.deepEqual({ status: res.status, body: res.body }, { status: 204, body: "" });
      assert.equal(r.got.length, 1);
      const h = r.got[0].headers;
      assert.equal(h["content-encoding"], "snappy");
      assert.equal(h["content-type"], "application/x-protobuf");
      assert.equal(h["x-prometheus-remote-write-version"], "0.1.0");
      assert.equal(h.authorization, "Bearer tok-123");
      assert.deepEqual(r.got[0].body, req);
    } finally {
      await r.close();
    }
  });

  it("returns the receiver's error status and text instead of throwing", async () => {
    const r = await receiver(400, "out of order sample");
    try {
      const res = await pushRemoteWrite(r.url, "t", req);
      assert.deepEqual({ status: res.status, body: res.body }, { status: 400, body: "out of order sample" });
      assert.equal(res.header("Content-Type"), "text/plain", "the receiver's headers are readable");
      assert.equal(res.header("Svc-Ingest-Refused"), null);
    } finally {
      await r.close();
    }
  });

  it("rejects with RemoteWritePushError, without the token, when nothing answers", async () => {
    const r = await receiver(204, "");
    await r.close();
    await assert.rejects(pushRemoteWrite(r.url, "secret-token-value", req), (e: unknown) => {
      assert.ok(e instanceof RemoteWritePushError);
      assert.doesNotMatch(e.message, /secret-token-value/);
      assert.match(e.message, /ECONNREFUSED/);
      return true;
    });
  });

  it("rejects when the receiver does not answer within timeoutMs", async () => {
    const r = await receiver(204, "", 2000);
    try {
      await assert.rejects(pushRemoteWrite(r.url, "t", req, { timeoutMs: 50 }), /timed out after 50 ms/);
    } finally {
      await r.close();
    }
  });
});
