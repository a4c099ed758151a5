import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { gzipSync } from "node:zlib";
import { create, toBinary } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ConnectRouter,
  type ConnectRouterOptions,
  createConnectRouter,
  createContextValues,
  type Interceptor,
} from "@connectrpc/connect";
import { createAsyncIterable, type UniversalHandler } from "@connectrpc/connect/protocol";
import { ErrorInfoSchema } from "@svc/sdk/gen/google/rpc/error_details_pb";
import {
  MonitoringService,
  QueryVMMonitoringRequestSchema,
  type QueryVMMonitoringResponse,
} from "@svc/sdk/gen/svc/monitoring/v1/monitoring_pb";
import { connectCompressions } from "./compression.ts";
import { withJsonWriter } from "./unary-json.ts";

/** Answers by the request's `name`: a success, each kind of failure, or a wait for the deadline. */
function register(router: ConnectRouter): void {
  router.service(MonitoringService, {
    async queryVMMonitoring(req, ctx): Promise<Partial<QueryVMMonitoringResponse>> {
      switch (req.name) {
        case "ok":
        case "big": {
          ctx.responseHeader.set("x-answer", "yes");
          ctx.responseTrailer.set("x-trailer", "t");
          const n = req.name === "big" ? 2000 : 3;
          const points = Array.from({ length: n }, (_, i) => ({
            timeUnix: BigInt(1_700_000_000 + i * 60),
            value: i / 7,
          }));
          return {
            startTimeUnix: 1_700_000_000n,
            stepSeconds: 60,
            series: [{ metricId: "cpu_utilization", labels: { device: 'v"da' }, points }],
            quality: {
              stale: true,
              series: [{ metricId: "cpu_utilization", gaps: [{ startTimeUnix: 5n }] }],
            },
          };
        }
        case "connect-error":
          throw new ConnectError("no such VM", Code.NotFound, { "x-meta": "m" }, [
            { desc: ErrorInfoSchema, value: { reason: "VM_NOT_FOUND", metadata: { name: "x" } } },
          ]);
        case "plain-error":
          throw new Error("boom");
        case "wait":
          return new Promise((_, reject) => {
            ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason));
          });
        default:
          return {};
      }
    },
  });
}

const deny: Interceptor = (next) => async (req) => {
  if (req.header.get("x-deny")) throw new ConnectError("denied", Code.PermissionDenied);
  return next(req);
};

const options: ConnectRouterOptions = {
  interceptors: [deny],
  requireConnectProtocolHeader: true,
  readMaxBytes: 4096,
  acceptCompression: connectCompressions,
  jsonOptions: { alwaysEmitImplicit: true, ignoreUnknownFields: false },
};

function handlerOf(router: ConnectRouter): UniversalHandler {
  const h = router.handlers.find((x) => x.method.name === "QueryVMMonitoring");
  assert.ok(h);
  return h;
}

const connectsOwn = createConnectRouter(options);
register(connectsOwn);
const withWriter = createConnectRouter(options);
register(withJsonWriter(withWriter, options));

interface Req {
  method?: string;
  headers?: Record<string, string>;
  body?: Uint8Array | string;
  query?: string;
}

async function call(h: UniversalHandler, r: Req) {
  const body = typeof r.body === "string" ? new TextEncoder().encode(r.body) : (r.body ?? new Uint8Array());
  const res = await h({
    httpVersion: "1.1",
    method: r.method ?? "POST",
    url: `http://127.0.0.1${h.requestPath}${r.query ?? ""}`,
    header: new Headers({
      "Content-Type": "application/json",
      "Connect-Protocol-Version": "1",
      ...r.headers,
    }),
    body: createAsyncIterable([body]),
    signal: new AbortController().signal,
    contextValues: createContextValues(),
  });
  const chunks: Uint8Array[] = [];
  if (res.body) for await (const c of res.body as AsyncIterable<Uint8Array>) chunks.push(c);
  return {
    status: res.status,
    header: [...new Headers(res.header).entries()].sort(),
    trailer: [...new Headers(res.trailer).entries()].sort(),
    body: Buffer.concat(chunks).toString("base64"),
  };
}

const json = (name: string, extra = "") => `{"name":"${name}"${extra}}`;

const CASES: [string, Req][] = [
  ["a success with response headers and trailers", { body: json("ok") }],
  [
    "JSON with a charset",
    { body: json("ok"), headers: { "Content-Type": "application/json; charset=utf-8" } },
  ],
  ["a large answer, gzip accepted", { body: json("big"), headers: { "Accept-Encoding": "gzip" } }],
  [
    "a large answer, br then gzip accepted",
    { body: json("big"), headers: { "Accept-Encoding": "br, gzip" } },
  ],
  ["a small answer, gzip accepted", { body: json("ok"), headers: { "Accept-Encoding": "gzip" } }],
  ["a gzipped request", { body: gzipSync(json("ok")), headers: { "Content-Encoding": "gzip" } }],
  ["a request in a coding svc does not read", { body: json("ok"), headers: { "Content-Encoding": "zstd" } }],
  ["no Connect-Protocol-Version", { body: json("ok"), headers: { "Connect-Protocol-Version": "" } }],
  ["Connect-Protocol-Version 2", { body: json("ok"), headers: { "Connect-Protocol-Version": "2" } }],
  ["a malformed timeout", { body: json("ok"), headers: { "Connect-Timeout-Ms": "soon" } }],
  ["a deadline reached in the method", { body: json("wait"), headers: { "Connect-Timeout-Ms": "20" } }],
  ["malformed JSON", { body: "{" }],
  ["an unknown field", { body: json("ok", ',"color":"red"') }],
  ["a field of the wrong type", { body: '{"name":3}' }],
  ["a ConnectError with metadata and details", { body: json("connect-error") }],
  ["an Error", { body: json("plain-error"), headers: { "Accept-Encoding": "gzip" } }],
  ["an interceptor's refusal", { body: json("ok"), headers: { "x-deny": "1" } }],
  ["a body over readMaxBytes", { body: json("x".repeat(5000)) }],
  [
    "a body over readMaxBytes, announced",
    { body: json("x".repeat(5000)), headers: { "Content-Length": "5012" } },
  ],
  [
    "a gzipped body that inflates past readMaxBytes",
    { body: gzipSync(json("x".repeat(9000))), headers: { "Content-Encoding": "gzip" } },
  ],
  ["an empty body", { body: "" }],
  // Not served by the writer: handed to Connect's own handler.
  ["a GET", { method: "GET", query: `?connect=v1&encoding=json&message=${encodeURIComponent(json("ok"))}` }],
  [
    "binary protobuf",
    {
      body: toBinary(QueryVMMonitoringRequestSchema, create(QueryVMMonitoringRequestSchema, { name: "ok" })),
      headers: { "Content-Type": "application/proto" },
    },
  ],
  ["a streaming content type", { body: json("ok"), headers: { "Content-Type": "application/connect+json" } }],
];

describe("withJsonWriter()", () => {
  for (const [name, req] of CASES) {
    it(`answers as Connect's own handler does: ${name}`, async () => {
      const ours = await call(handlerOf(withWriter), req);
      const theirs = await call(handlerOf(connectsOwn), req);
      assert.deepEqual(ours, theirs);
    });
  }

  it("is the handler that answers unary JSON (the comparison above is not Connect against itself)", () => {
    assert.notEqual(handlerOf(withWriter), handlerOf(connectsOwn));
    assert.notEqual(handlerOf(withWriter).name, handlerOf(connectsOwn).name);
  });

  it("answers a success and a refusal with the status and body a client expects", async () => {
    const ok = await call(handlerOf(withWriter), { body: json("ok") });
    assert.equal(ok.status, 200);
    const body = JSON.parse(Buffer.from(ok.body, "base64").toString());
    assert.equal(body.series[0].points[1].timeUnix, "1700000060");
    assert.deepEqual(body.series[0].labels, { device: 'v"da' });
    assert.ok(ok.header.some(([k, v]) => k === "trailer-x-trailer" && v === "t"));
    const refused = await call(handlerOf(withWriter), { body: json("ok"), headers: { "x-deny": "1" } });
    assert.equal(refused.status, 403);
    assert.deepEqual(JSON.parse(Buffer.from(refused.body, "base64").toString()), {
      code: "permission_denied",
      message: "denied",
    });
  });
});
