import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { createSvcClients } from "./client.ts";
import { SvcError } from "./errors.ts";

/** A loopback Connect endpoint that answers 429 a set number of times, then succeeds. */
describe("createSvcClients() retry policy", () => {
  let server: Server;
  let baseUrl: string;
  let busy = 0;
  /** The Retry-After header of each 429 (none when undefined). */
  let retryAfter: string | undefined = "3";
  const seen: { path: string; headers: Record<string, string | string[] | undefined> }[] = [];
  before(async () => {
    server = createServer((req, res) => {
      seen.push({ path: req.url ?? "", headers: req.headers });
      req.resume();
      req.on("end", () => {
        if (busy > 0) {
          busy--;
          res.writeHead(429, {
            "Content-Type": "application/json",
            ...(retryAfter === undefined ? {} : { "Retry-After": retryAfter }),
          });
          res.end(JSON.stringify({ code: "resource_exhausted", message: "too many concurrent queries" }));
          return;
        }
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(
          req.url?.endsWith("/CreateKey")
            ? JSON.stringify({ key: { name: "projects/p/keys/k" } })
            : JSON.stringify({ vms: [] }),
        );
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((r) => server.close(() => r())));

  function client(waits: number[], maxRetries = 3) {
    return createSvcClients({
      baseUrl,
      token: "svcs_example",
      maxRetries,
      maxRetryAfterSeconds: 5,
      sleep: async (ms) => {
        waits.push(ms);
      },
    });
  }

  it("sends the bearer token and Connect-Protocol-Version, and retries a read after Retry-After", async () => {
    busy = 2;
    seen.length = 0;
    const waits: number[] = [];
    await client(waits).monitoring.listVMMonitoring({ projectName: "projects/p", inventoryOnly: true });
    assert.equal(seen.length, 3);
    assert.equal(seen[0].headers.authorization, "Bearer svcs_example");
    assert.equal(seen[0].headers["connect-protocol-version"], "1");
    assert.deepEqual(waits, [3000, 3000], "Retry-After 3 s, within the 5 s cap");
  });

  it("never retries early when Retry-After is longer than the cap: the call fails with SvcError carrying the server's time", async () => {
    busy = 1;
    retryAfter = "7";
    seen.length = 0;
    const waits: number[] = [];
    try {
      await assert.rejects(
        client(waits).monitoring.listVMMonitoring({ projectName: "projects/p" }),
        (e: unknown) => {
          assert.ok(e instanceof SvcError);
          assert.equal(e.code, Code.ResourceExhausted);
          assert.equal(e.retryAfterSeconds, 7);
          return true;
        },
      );
      assert.deepEqual([seen.length, waits], [1, []], "one request, no wait");
      // The caller decides: after the 7 s it asks again and is served.
      busy = 0;
      await client(waits).monitoring.listVMMonitoring({ projectName: "projects/p" });
    } finally {
      retryAfter = "3";
      busy = 0;
    }
  });

  it("without Retry-After backs off 1, 2, 4 … s, capped at maxRetryAfterSeconds", async () => {
    busy = 4;
    retryAfter = undefined;
    const waits: number[] = [];
    try {
      await client(waits, 4).monitoring.listVMMonitoring({ projectName: "projects/p" });
      assert.deepEqual(waits, [1000, 2000, 4000, 5000]);
    } finally {
      retryAfter = "3";
      busy = 0;
    }
  });

  it("gives up after maxRetries with resource_exhausted", async () => {
    busy = 10;
    const waits: number[] = [];
    await assert.rejects(
      client(waits, 2).monitoring.listVMMonitoring({ projectName: "projects/p" }),
      (e: unknown) => {
        assert.equal(ConnectError.from(e).code, Code.ResourceExhausted);
        return true;
      },
    );
    assert.equal(waits.length, 2);
    busy = 0;
  });

  it("never retries a mutating call without its requestId, and retries one that has it", async () => {
    busy = 1;
    const waits: number[] = [];
    await assert.rejects(
      client(waits).keys.createKey({
        parent: "projects/p",
        displayName: "k",
        capabilities: ["monitoring.read"],
      }),
    );
    assert.equal(waits.length, 0);
    busy = 1;
    const res = await client(waits).keys.createKey({
      parent: "projects/p",
      displayName: "k",
      capabilities: ["monitoring.read"],
      requestId: "req-12345678",
    });
    assert.equal(res.key?.name, "projects/p/keys/k");
    assert.equal(waits.length, 1);
  });
});
