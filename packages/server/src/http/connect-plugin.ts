/**
 * Connect's routes in Fastify, as @connectrpc/connect-fastify's plugin mounts them but with a route per
 * RPC for the methods Connect answers it with (POST, and GET for an RPC marked free of side effects; svc
 * has none today) instead of every HTTP method Fastify knows (`all`: 34 of them). Inserting 34 routes per RPC into the router was the largest part of
 * the server's start-up after loading its code (docs/performance.md, "Start-up"); any other method on an
 * RPC's path still reaches Connect through one wildcard route, so the answers stay Connect's (405 with
 * `Allow` for a known RPC, Fastify's 404 for an unknown path).
 */
import {
  Code,
  ConnectError,
  type ConnectRouter,
  type ConnectRouterOptions,
  type ContextValues,
  createConnectRouter,
} from "@connectrpc/connect";
import { createLinkedAbortController, type UniversalHandler } from "@connectrpc/connect/protocol";
import * as protoConnect from "@connectrpc/connect/protocol-connect";
import * as protoGrpc from "@connectrpc/connect/protocol-grpc";
import * as protoGrpcWeb from "@connectrpc/connect/protocol-grpc-web";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";

export interface ConnectPluginOptions extends ConnectRouterOptions {
  readonly routes: (router: ConnectRouter) => void;
  readonly contextValues?: (req: FastifyRequest) => ContextValues;
  /** On close, calls still running are aborted this long after Fastify starts closing. */
  readonly shutdownTimeoutMs?: number;
  /** The abort reason calls get at that timeout. */
  readonly shutdownError?: unknown;
}

/** The methods an RPC gets its own route for, when Connect allows them on it; the others go through the wildcard. */
const RPC_METHODS = ["GET", "POST"];

export async function connectPlugin(instance: FastifyInstance, opts: ConnectPluginOptions): Promise<void> {
  let routerOptions: ConnectRouterOptions = opts;
  const { shutdownTimeoutMs } = opts;
  if (shutdownTimeoutMs !== undefined) {
    const shutdown = createLinkedAbortController(opts.shutdownSignal);
    routerOptions = { ...opts, shutdownSignal: shutdown.signal };
    instance.addHook("preClose", (done) => {
      setTimeout(() => shutdown.abort(opts.shutdownError), shutdownTimeoutMs);
      done();
    });
  }
  const router = createConnectRouter(routerOptions);
  opts.routes(router);
  const handlers = router.handlers;
  if (handlers.length === 0) return;
  // Connect reads the body itself: every content type it knows passes Fastify's parsers untouched (the
  // protocols svc does not serve included, so that Connect, not Fastify, refuses them).
  const noop = (_req: unknown, _payload: unknown, done: (err: null, body: undefined) => void) =>
    done(null, undefined);
  instance.addContentTypeParser(
    [
      protoConnect.contentTypeUnaryJson,
      protoConnect.contentTypeStreamJson,
      protoGrpcWeb.contentTypeProto,
      protoGrpcWeb.contentTypeJson,
      protoGrpc.contentTypeProto,
      protoGrpc.contentTypeJson,
    ],
    noop,
  );
  for (const re of [
    protoGrpc.contentTypeRegExp,
    protoGrpcWeb.contentTypeRegExp,
    protoConnect.contentTypeRegExp,
  ])
    instance.addContentTypeParser(re, noop);

  const serve = async (uHandler: UniversalHandler, req: FastifyRequest, reply: FastifyReply) => {
    try {
      const uRes = await uHandler(
        universalRequestFromNodeRequest(req.raw, reply.raw, req.body as undefined, opts.contextValues?.(req)),
      );
      // Fastify keeps the reply's headers until reply.send, which this route does not use.
      for (const [key, value] of Object.entries(reply.getHeaders())) {
        if (value !== undefined) reply.raw.setHeader(key, value);
      }
      await universalResponseToNodeResponse(uRes, reply.raw);
    } catch (e) {
      if (ConnectError.from(e).code === Code.Aborted) return;
      instance.log.error({ err: e, rpc: uHandler.requestPath }, "Connect handler failed");
    }
  };

  const byPath = new Map<string, UniversalHandler>();
  for (const uHandler of handlers) {
    byPath.set(uHandler.requestPath, uHandler);
    instance.route({
      // Each route costs start-up time in the router (docs/performance.md, "Start-up"): a GET route only
      // where Connect serves GET; elsewhere GET reaches Connect's 405 through the wildcard.
      method: RPC_METHODS.filter((m) => uHandler.allowedMethods.includes(m)),
      url: uHandler.requestPath,
      exposeHeadRoute: false,
      handler: (req, reply) => serve(uHandler, req, reply),
    });
  }
  const prefixes = [...new Set(handlers.map((h) => h.requestPath.slice(0, h.requestPath.indexOf(".") + 1)))];
  const others = instance.supportedMethods.filter((m) => m !== "POST");
  for (const prefix of prefixes) {
    instance.route({
      method: others,
      url: `${prefix}*`,
      handler: (req, reply) => {
        const uHandler = byPath.get(req.url.split("?")[0]);
        return uHandler ? serve(uHandler, req, reply) : reply.callNotFound();
      },
    });
  }
}
