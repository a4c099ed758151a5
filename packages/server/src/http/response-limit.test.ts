import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { ConnectRouter } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import { createSvcClients } from "@svc/sdk";
import { ErrorInfoSchema } from "@svc/sdk/gen/google/rpc/error_details_pb";
import { AutomationService } from "@svc/sdk/gen/svc/iam/v1/automation_pb";
import type { FastifyInstance } from "fastify";
import pino from "pino";
import { Registry } from "prom-client";
import type { Db } from "../db/database.ts";
import { buildServer, MAX_RPC_RESPONSE_BYTES } from "./server.ts";

const PATH = "/svc.iam.v1.AutomationService/ExchangeCIToken";

/** A server whose one (public) method answers with an access token of the length the trust name asks for. */
async function serverWith(maxResponseBytes?: number): Promise<FastifyInstance> {
  const routes = (router: ConnectRouter) =>
    router.service(AutomationService, {
      exchangeCIToken: async (req) => ({
        accessToken: "x".repeat(Number(req.trustName)),
        projectName: "projects/demo",
      }),
    });
  const deps = {
    db: {} as Db, // the public method never reaches the database
    log: pino({ level: "silent" }),
    registry: new Registry(),
    operatorToken: "operator-token-for-tests",
    maxRequestBytes: 1024 * 1024,
    maxResponseBytes,
    now: Date.now,
    routes,
    consoleKey: Buffer.alloc(32, 1),
  };
  return buildServer(deps);
}

const post = (app: FastifyInstance, length: number) =>
  app.inject({
    method: "POST",
    url: PATH,
    headers: { "content-type": "application/json", "connect-protocol-version": "1" },
    payload: JSON.stringify({ trustName: String(length), assertion: "a" }),
  });

describe("RPC answer size cap (4 MiB, docs/api.md)", () => {
  let app: FastifyInstance;
  let baseUrl: string;
  before(async () => {
    app = await serverWith();
    baseUrl = (await app.listen({ host: "127.0.0.1", port: 0 })).replace("localhost", "127.0.0.1");
  });
  after(() => app?.close());

  it("answers up to 4 MiB and refuses more with RESPONSE_TOO_LARGE (invalid_argument, not 429)", async () => {
    const ok = await post(app, MAX_RPC_RESPONSE_BYTES - 100);
    assert.equal(ok.statusCode, 200);
    const res = await post(app, MAX_RPC_RESPONSE_BYTES + 1);
    assert.equal(res.statusCode, 400);
    const body = res.json() as { code: string; message: string };
    assert.equal(body.code, "invalid_argument");
    assert.match(body.message, /exceeds the RPC limit of 4194304 bytes; ask for less/);
    assert.match(body.message, /\[RESPONSE_TOO_LARGE\]$/);
    assert.ok(res.payload.length < 2048, "the refusal itself is small");
  });

  for (const useBinaryFormat of [false, true]) {
    it(`gives SDK clients the reason and the limit (${useBinaryFormat ? "binary" : "JSON"})`, async () => {
      const client = createSvcClients({ baseUrl, maxRetries: 0, useBinaryFormat }).client(AutomationService);
      try {
        await client.exchangeCIToken({ trustName: String(MAX_RPC_RESPONSE_BYTES), assertion: "a" });
        assert.fail("expected RESPONSE_TOO_LARGE");
      } catch (e) {
        const err = ConnectError.from(e);
        assert.equal(err.code, Code.InvalidArgument);
        const info = err.findDetails(ErrorInfoSchema)[0];
        assert.equal(info?.reason, "RESPONSE_TOO_LARGE");
        assert.equal(info?.metadata.maxBytes, String(MAX_RPC_RESPONSE_BYTES));
        assert.ok(Number(info?.metadata.responseBytes) > MAX_RPC_RESPONSE_BYTES);
      }
    });
  }

  it("takes a smaller cap from its options", async () => {
    const small = await serverWith(1000);
    try {
      assert.equal((await post(small, 900)).statusCode, 200);
      const res = await post(small, 1000);
      assert.equal(res.statusCode, 400);
      assert.match(res.payload, /RESPONSE_TOO_LARGE/);
    } finally {
      await small.close();
    }
  });
});
