import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { createSvcClients } from "./client.ts";
import { SvcError } from "./errors.ts";
import { ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.ts";

/** One Connect error body per case, as svc's server writes them. */
const cases: Record<string, { status: number; headers?: Record<string, string>; body: unknown }> = {
  budget: {
    status: 400,
    body: {
      code: "invalid_argument",
      message: "stepSeconds: 20,161 points exceed 10,000 [POINT_BUDGET_EXCEEDED]",
      details: [
        {
          type: "google.rpc.ErrorInfo",
          value: Buffer.from(
            toBinary(
              ErrorInfoSchema,
              create(ErrorInfoSchema, {
                reason: "POINT_BUDGET_EXCEEDED",
                domain: "svc",
                metadata: { field: "stepSeconds", maxPoints: "10000", suggestedStepSeconds: "1800" },
              }),
            ),
          ).toString("base64"),
        },
      ],
    },
  },
  busy: {
    status: 429,
    headers: { "Retry-After": "7" },
    body: { code: "resource_exhausted", message: "the project's queries are busy" },
  },
  bare: { status: 404, body: { code: "not_found", message: "projects/x not found" } },
};

describe("SvcError", () => {
  let server: Server;
  let baseUrl: string;
  before(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const c = cases[JSON.parse(Buffer.concat(chunks).toString()).projectName as string];
        res.writeHead(c.status, { "Content-Type": "application/json", ...c.headers });
        res.end(JSON.stringify(c.body));
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((r) => server.close(() => r())));

  const call = async (projectName: string): Promise<SvcError> => {
    const clients = createSvcClients({ baseUrl, maxRetries: 0 });
    try {
      await clients.monitoring.listVMMonitoring({ projectName });
    } catch (e) {
      assert.ok(e instanceof SvcError, "every SDK call throws SvcError");
      assert.ok(e instanceof ConnectError, "which is a ConnectError");
      return e;
    }
    assert.fail("expected an error");
  };

  for (const { name, project, want } of [
    {
      name: "reads reason, field and metadata from ErrorInfo",
      project: "budget",
      want: {
        code: Code.InvalidArgument,
        codeName: "invalid_argument",
        reason: "POINT_BUDGET_EXCEEDED",
        field: "stepSeconds",
        suggested: "1800",
        retryAfterSeconds: undefined,
        retryable: false,
      },
    },
    {
      name: "reads Retry-After and marks rate limiting retryable",
      project: "busy",
      want: {
        code: Code.ResourceExhausted,
        codeName: "resource_exhausted",
        reason: undefined,
        field: undefined,
        suggested: undefined,
        retryAfterSeconds: 7,
        retryable: true,
      },
    },
    {
      name: "leaves reason and field undefined without details",
      project: "bare",
      want: {
        code: Code.NotFound,
        codeName: "not_found",
        reason: undefined,
        field: undefined,
        suggested: undefined,
        retryAfterSeconds: undefined,
        retryable: false,
      },
    },
  ]) {
    it(name, async () => {
      const e = await call(project);
      assert.deepEqual(
        {
          code: e.code,
          codeName: e.codeName,
          reason: e.reason,
          field: e.field,
          suggested: e.info.suggestedStepSeconds,
          retryAfterSeconds: e.retryAfterSeconds,
          retryable: e.retryable,
        },
        want,
      );
      assert.equal(ConnectError.from(e), e);
    });
  }
});
