import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { freePort } from "../../net/free-port.ts";
import { engineRequest } from "./transport.ts";

describe("engineRequest()", () => {
  // /echo answers the body it got; /slow-body sends half an answer and never ends it.
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.url === "/slow-body") {
        res.writeHead(200, { "content-length": "100" }).write("x".repeat(50));
        return;
      }
      res.writeHead(req.url === "/echo" ? 200 : 404).end(Buffer.concat(chunks));
    });
  });
  let base = "";
  before(async () => {
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });

  it("sends the body and reads the answer whole, twice on one keep-alive socket", async () => {
    for (const body of ["a=1&b=2", new Uint8Array([1, 2, 3])]) {
      const res = await engineRequest(`${base}/echo`, { method: "POST", headers: {}, body });
      assert.equal(res.status, 200);
      assert.ok(res.ok);
      assert.deepEqual(new Uint8Array(await res.bytes()), new Uint8Array(Buffer.from(body)));
    }
    const missing = await engineRequest(`${base}/nothing`, { method: "GET", headers: {} });
    assert.equal(missing.ok, false);
    assert.equal(missing.status, 404);
    assert.equal(await missing.text(), "");
  });

  it("rejects with the signal's reason when the deadline passes while the body is read", async () => {
    const res = await engineRequest(`${base}/slow-body`, {
      method: "GET",
      headers: {},
      signal: AbortSignal.timeout(100),
    });
    await assert.rejects(res.text(), { name: "TimeoutError" });
  });

  it("rejects with the socket's error as cause when nothing listens", async () => {
    const port = await freePort("127.0.0.1");
    await assert.rejects(
      engineRequest(`http://127.0.0.1:${port}/`, { method: "GET", headers: {} }),
      (err: Error & { cause?: { code?: string } }) => err.cause?.code === "ECONNREFUSED",
    );
  });
});
