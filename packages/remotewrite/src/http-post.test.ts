import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, describe, it } from "node:test";
import { RemoteWritePushError } from "./errors.ts";
import { httpPost } from "./http-post.ts";
import { pushRemoteWrite } from "./push.ts";

describe("httpPost (the agent's push through node:http)", () => {
  const server = createServer((req, res) => {
    if (req.url === "/hang") return; // never answers
    let body = 0;
    req.on("data", (c: Buffer) => {
      body += c.length;
    });
    req.on("end", () => {
      res.statusCode = 400;
      res.end(`got ${body} bytes, ${req.headers["content-encoding"]}, ${req.headers.authorization?.length}`);
    });
  });
  const listening = new Promise<string>((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
    ),
  );
  after(() => {
    server.closeAllConnections();
    server.close();
  });

  it("sends the body with the protocol headers and returns the status and answer", async () => {
    const r = await pushRemoteWrite(`${await listening}/write`, "svca_t", new Uint8Array(10), {
      fetch: httpPost,
    });
    assert.equal(r.status, 400);
    assert.equal(r.body, "got 10 bytes, snappy, 13");
  });

  it("fails with the system error's code when nothing listens, and on its deadline", async () => {
    await assert.rejects(
      pushRemoteWrite("http://127.0.0.1:9/write", "svca_secret", new Uint8Array(1), { fetch: httpPost }),
      (e: Error) =>
        e instanceof RemoteWritePushError && /ECONNREFUSED/.test(e.message) && !/secret/.test(e.message),
    );
    await assert.rejects(
      pushRemoteWrite(`${await listening}/hang`, "svca_t", new Uint8Array(1), {
        fetch: httpPost,
        timeoutMs: 200,
      }),
      (e: Error) => e instanceof RemoteWritePushError && /timed out after 200 ms/.test(e.message),
    );
  });
});
