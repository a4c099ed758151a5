/**
 * svc's Connect router: the services, the guard that authenticates and authorizes each call before
 * its body is decoded (auth.ts), the error mapping and the response limit. Loaded by connect-plugin.ts
 * at the first RPC, not at start: it is what brings in Connect, protobuf's runtime and every
 * descriptor (docs/performance.md, "Start-up, third pass").
 */
import { toBinary, toJsonString } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ConnectRouter,
  type ContextValues,
  createConnectRouter,
  createContextValues,
  type Interceptor,
} from "@connectrpc/connect";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import type { FastifyRequest } from "fastify";
import type { Logger } from "pino";
import type { LastUseTracker } from "../audit/last-use.ts";
import { SvcError } from "../errors.ts";
import { errorInterceptor, guardHandlers } from "./auth.ts";
import { connectCompressions } from "./connect-compression.ts";
import type { RpcHandlers, RpcRoute } from "./connect-plugin.ts";
import { remoteAddressKey } from "./context.ts";
import { sizeBoundOf } from "./response-size.ts";
import { JSON_OPTIONS, MAX_RPC_RESPONSE_BYTES } from "./rpc-routes.ts";
import type { ServerDeps } from "./server.ts";

/** The methods an RPC gets its own route for, when Connect allows them on it; the others go through the wildcard. */
const RPC_METHODS = ["GET", "POST"] as const;

/** An RPC's route (connect-plugin.ts) from its handler. */
export function rpcRouteOf(h: UniversalHandler): RpcRoute {
  return { path: h.requestPath, methods: RPC_METHODS.filter((m) => h.allowedMethods.includes(m)) };
}

/** The router of `deps.routes`, guarded, as connect-plugin.ts serves it. */
export async function rpcHandlers(
  deps: ServerDeps,
  lastUse: LastUseTracker | undefined,
  shutdownSignal: AbortSignal,
): Promise<RpcHandlers> {
  const router = createConnectRouter({
    // The error interceptor is outermost: it maps what the response limit throws too.
    interceptors: [
      errorInterceptor(deps.log),
      responseLimit(deps.maxResponseBytes ?? MAX_RPC_RESPONSE_BYTES),
    ],
    // svc speaks the Connect protocol only (docs/api.md); gRPC and gRPC-web are not served.
    grpc: false,
    grpcWeb: false,
    requireConnectProtocolHeader: true,
    readMaxBytes: deps.maxRequestBytes,
    acceptCompression: connectCompressions,
    jsonOptions: JSON_OPTIONS,
    shutdownSignal,
  });
  await deps.routes(router);
  // Every route authenticates and authorizes before its body is decoded (auth.ts).
  guardHandlers(router.handlers, {
    db: deps.db,
    operatorToken: deps.operatorToken,
    now: deps.now,
    log: deps.log,
    ciTokenResolver: deps.ciTokenResolver,
    consoleKey: deps.consoleKey,
    maxRequestBytes: deps.maxRequestBytes,
    audit: deps.audit,
    lastUse,
  });
  return servingHandlers(router, deps.log, (req) => createContextValues().set(remoteAddressKey, req.ip));
}

/** Serves a router's handlers from Fastify's requests, as @connectrpc/connect-fastify does. */
function servingHandlers(
  router: ConnectRouter,
  log: Logger,
  contextValues: (req: FastifyRequest) => ContextValues,
): RpcHandlers {
  const byPath = new Map<string, UniversalHandler>();
  for (const h of router.handlers) byPath.set(h.requestPath, h);
  return {
    routes: router.handlers.map(rpcRouteOf),
    async serve(path, req, reply) {
      const uHandler = byPath.get(path);
      if (!uHandler) return false;
      try {
        const uRes = await uHandler(
          universalRequestFromNodeRequest(req.raw, reply.raw, req.body as undefined, contextValues(req)),
        );
        // Fastify keeps the reply's headers until reply.send, which this route does not use.
        for (const [key, value] of Object.entries(reply.getHeaders())) {
          if (value !== undefined) reply.raw.setHeader(key, value);
        }
        await universalResponseToNodeResponse(uRes, reply.raw);
      } catch (e) {
        if (ConnectError.from(e).code !== Code.Aborted)
          log.error({ err: e, rpc: uHandler.requestPath }, "Connect handler failed");
      }
      return true;
    },
  };
}

/** A bound on JSON size ÷ binary size of svc's messages, with margin (see responseLimit). */
const JSON_TO_BINARY_MAX_RATIO = 32;

/**
 * Refuses an answer larger than `maxBytes` (encoded as the client asked, before compression) with
 * RESPONSE_TOO_LARGE, which the error interceptor around it maps like any domain error. Connect's own
 * `writeMaxBytes` checks the same size, but only after every interceptor has run, and answers a bare
 * resource_exhausted (HTTP 429) that clients read as "retry later"; svc keeps 429 for rate limiting,
 * and a too-large answer is the same on every retry, so it is a request to narrow, like the point budget.
 */
function responseLimit(maxBytes: number): Interceptor {
  return (next) => async (req) => {
    const res = await next(req);
    if (res.stream) return res;
    // A handler's declared bound spares the encode that measures (response-size.ts).
    const bound = sizeBoundOf(res.message);
    if (bound !== undefined && bound <= maxBytes) return res;
    const binary =
      req.requestMethod === "GET"
        ? new URL(req.url).searchParams.get("encoding") === "proto"
        : /^application\/(?:connect\+)?proto\b/.test(req.header.get("content-type") ?? "");
    const binaryBytes = toBinary(res.method.output, res.message).byteLength;
    // JSON is measured only when it could be over the limit: it is at most ~18× the binary size for
    // svc's messages (a bool or one-byte number under a 27-character field name), and encoding it
    // twice (here and in Connect) cost ~0.3 ms of a 7-day QueryVMMonitoring call.
    const bytes =
      binary || binaryBytes * JSON_TO_BINARY_MAX_RATIO <= maxBytes
        ? binaryBytes
        : Buffer.byteLength(toJsonString(res.method.output, res.message, JSON_OPTIONS));
    if (bytes > maxBytes) {
      throw new SvcError(
        "invalid_argument",
        `the answer of ${bytes} bytes exceeds the RPC limit of ${maxBytes} bytes; ask for less: a smaller pageSize, fewer metricIds, a shorter range or a larger stepSeconds`,
        {
          reason: "RESPONSE_TOO_LARGE",
          metadata: { maxBytes: String(maxBytes), responseBytes: String(bytes) },
        },
      );
    }
    return res;
  };
}
