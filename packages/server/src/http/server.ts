import type { IncomingMessage, ServerResponse } from "node:http";
import { createRequire } from "node:module";
import type { Socket } from "node:net";
import type { ConnectRouter } from "@connectrpc/connect";
import Fastify, {
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyPluginAsync,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from "fastify";
import type { Logger } from "pino";
import { LastUseTracker } from "../audit/last-use.ts";
import type { Db } from "../db/database.ts";
import { permissionDenied, SvcError } from "../errors.ts";
import { authenticate, bearerToken, type TokenResolver } from "../iam/principal.ts";
import type { Registry } from "../instrument.ts";
import { negotiateAcceptEncoding } from "./compression.ts";
import { connectPlugin, type RpcRoute } from "./connect-plugin.ts";
import { instrumentHttp } from "./instrumentation.ts";
import { MAX_RPC_RESPONSE_BYTES } from "./rpc-routes.ts";

/** Keys redacted from every log line: credentials never reach the logs. */
export const redactPaths = [
  "req.headers.authorization",
  "headers.authorization",
  "authorization",
  "*.authorization",
  "*.token",
  "*.secret",
  "*.password",
  "*.assertion",
  "*.accessToken",
  "*.sessionToken",
];

export { MAX_RPC_RESPONSE_BYTES };

export interface ServerDeps {
  readonly db: Db;
  readonly log: Logger;
  readonly registry: Registry;
  readonly operatorToken: string;
  readonly maxRequestBytes: number;
  /** Default {@link MAX_RPC_RESPONSE_BYTES}. */
  readonly maxResponseBytes?: number;
  readonly now: () => number;
  /** Connect services; each domain adds its own. */
  readonly routes: (router: ConnectRouter) => unknown;
  /**
   * The paths and methods of the RPCs `routes` adds, when known without running it (rpc-routes.ts):
   * then `routes`, Connect and protobuf load at the first RPC instead of at start.
   */
  readonly rpcRoutes?: readonly RpcRoute[];
  /** Extra HTTP surfaces (Prometheus API, ingest, export), each registered in its own scope. */
  readonly plugins?: readonly FastifyPluginAsync[];
  /**
   * Answers to errors Fastify raises before routing (a malformed URL escape), tried in order: each
   * answers and returns true for the URLs it owns (the Prometheus API, in its own envelope).
   */
  readonly frameworkErrors?: readonly FrameworkErrorHandler[];
  /** Readiness checks by name (the database, the metrics backend): each resolves or throws. */
  readonly readiness?: Readonly<Record<string, () => Promise<unknown>>>;
  /**
   * Called (once per answer) after /readyz answers 200: the app starts its background work then, off
   * the path to the first ready answer (docs/decisions.md, "Background work starts after ready").
   */
  readonly onReady?: () => void;
  readonly ciTokenResolver?: TokenResolver;
  /** Signs the console's CSRF tokens. */
  readonly consoleKey: Buffer;
  /** Addresses or CIDRs of load balancers whose X-Forwarded-For names the client (req.ip). */
  readonly trustedProxies?: readonly string[];
  /** Record state-changing calls in the audit log (default true; off only to measure its cost). */
  readonly audit?: boolean;
  /** Track keys' last use (default true; off only to measure its cost). */
  readonly lastUse?: boolean;
}

/**
 * Fastify's JSON-schema compilers (ajv for validation, fast-json-stringify for serialization), loaded
 * when a route first declares a schema instead of when Fastify is created: svc's routes declare none
 * (protobuf and the handlers validate), and loading ajv was ~10 % of a start's CPU (docs/performance.md,
 * "Start-up"). Loaded through node's require (not bundled again): from the production bundle they
 * resolve in node_modules, where Fastify's dependencies are. A route with a schema gets the compilers
 * Fastify would have built, with one difference: its headers schema's keys are not lower-cased for it
 * (Fastify does that only for its built-in compiler).
 */
const lazyRequire = createRequire(import.meta.url);
type CompilerBuilder = (externalSchemas: unknown, options: unknown) => unknown;
function lazyBuilder(load: () => CompilerBuilder): CompilerBuilder {
  let built: CompilerBuilder | undefined;
  return (externalSchemas, options) => {
    built ??= load();
    return built(externalSchemas, options);
  };
}
export const schemaCompilers = {
  buildValidator: lazyBuilder(() => lazyRequire("@fastify/ajv-compiler")()),
  buildSerializer: lazyBuilder(() => lazyRequire("@fastify/fast-json-stringify-compiler")()),
};

export type FrameworkErrorHandler = (err: FastifyError, req: FastifyRequest, reply: FastifyReply) => boolean;

export async function buildServer(deps: ServerDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.log as FastifyBaseLogger,
    frameworkErrors: (err, req, res) => {
      const reply = res as unknown as FastifyReply;
      for (const handle of deps.frameworkErrors ?? []) if (handle(err, req, reply)) return;
      // Fastify's own answer (its error serializer), as without this option.
      reply.code(err.statusCode ?? 400).send(err);
    },
    bodyLimit: deps.maxRequestBytes,
    schemaController: { compilersFactory: schemaCompilers as never },
    // Error messages from Fastify's own parsers go to the client; never include request data in them.
    return503OnClosing: true,
    // One debug line per request (below), instead of Fastify's two info lines.
    logController: new LogController({ disableRequestLogging: true }),
    ...(deps.trustedProxies?.length ? { trustProxy: [...deps.trustedProxies] } : {}),
  });
  instrumentHttp(app, deps.registry);
  closeConnectionsOnShutdown(app);
  app.addHook("onResponse", async (req, reply) => {
    req.log.debug(
      {
        method: req.method,
        route: req.routeOptions.url ?? "unmatched",
        statusCode: reply.statusCode,
        ms: Math.round(reply.elapsedTime),
      },
      "request",
    );
  });

  app.get("/healthz", async () => ({ status: "ok" }));
  // Liveness is the process answering; readiness is whether it can serve: each dependency answers
  // within a second. A load balancer takes a replica out while its database or metrics store is away.
  app.get("/readyz", async (_req, reply) => {
    const checks: Record<string, string> = {};
    await Promise.all(
      Object.entries(deps.readiness ?? {}).map(async ([name, check]) => {
        let timer: NodeJS.Timeout | undefined;
        try {
          await Promise.race([
            check(),
            new Promise((_r, reject) => {
              timer = setTimeout(() => reject(new Error("no answer within 1 s")), 1000);
            }),
          ]);
          checks[name] = "ok";
        } catch (err) {
          checks[name] = err instanceof Error ? err.message : String(err);
        } finally {
          clearTimeout(timer);
        }
      }),
    );
    const ready = Object.values(checks).every((v) => v === "ok");
    // After this answer is written: setImmediate runs once the reply's write has been issued.
    if (ready && deps.onReady) setImmediate(deps.onReady);
    return reply
      .code(ready ? 200 : 503)
      .header("cache-control", "no-store")
      .send({ status: ready ? "ready" : "unavailable", checks });
  });
  // svc's own metrics are the provider's, not a tenant's: only the operator token reads them here
  // (SVC_METRICS_LISTEN serves them without auth on a separate, private address).
  app.get("/metrics", async (req, reply) => {
    try {
      const p = await authenticate(deps.db, bearerToken(req.headers.authorization), deps.now(), {
        operatorToken: deps.operatorToken,
      });
      if (p.kind !== "OPERATOR")
        throw permissionDenied("OPERATOR_ONLY", "/metrics needs the operator token (or SVC_METRICS_LISTEN)");
    } catch (err) {
      if (!(err instanceof SvcError)) throw err;
      const code = err.code === "unauthenticated" ? 401 : 403;
      if (code === 401) reply.header("www-authenticate", 'Bearer realm="svc metrics"');
      return reply.code(code).type("text/plain").send(`${err.message}\n`);
    }
    return reply
      .type(deps.registry.contentType)
      .header("cache-control", "no-store")
      .send(await deps.registry.metrics());
  });

  const lastUse = deps.lastUse === false ? undefined : new LastUseTracker(deps.db);
  await app.register(async (scope) => {
    // Refuse oversized bodies up front as invalid_argument (HTTP 400): Connect's own read limit answers
    // resource_exhausted (429), which svc keeps for rate limiting only.
    scope.addHook("onRequest", async (req, reply) => {
      const length = Number(req.headers["content-length"] ?? 0);
      if (length > deps.maxRequestBytes) {
        return reply
          .code(400)
          .type("application/json")
          .send({
            code: "invalid_argument",
            message: `request body of ${length} bytes exceeds the limit of ${deps.maxRequestBytes} bytes [REQUEST_TOO_LARGE]`,
          });
      }
      // Connect reads the raw headers: hand it the client's codings in the order svc should answer.
      const accept = req.headers["accept-encoding"];
      if (accept) {
        const binary = /^application\/(?:connect\+)?proto\b/.test(req.headers["content-type"] ?? "");
        req.headers["accept-encoding"] = negotiateAcceptEncoding(accept, binary);
      }
    });
    await scope.register(connectPlugin, {
      // Connect, protobuf and the services load here (http/rpc.ts): at the first RPC when the routes
      // are known without them (docs/performance.md, "Start-up, third pass").
      load: async (shutdownSignal) => (await import("./rpc.ts")).rpcHandlers(deps, lastUse, shutdownSignal),
      routes: deps.rpcRoutes,
      shutdownTimeoutMs: 10_000,
    });
  });
  for (const plugin of deps.plugins ?? []) await app.register(plugin);
  return app;
}

/**
 * Lets close() finish once the requests in flight have been answered. Node's server.close() (and
 * Fastify's) destroys only the connections it counts as idle, and it counts a connection that has
 * not yet sent a request as active (so does a keep-alive connection whose request was in flight at
 * close, once answered): close() then waited for the client to hang up, up to its keep-alive
 * timeout (ours advertises 72 s) or forever for a silent client. At close, a connection with no
 * request in flight is destroyed, and one with a request is ended once that answer is sent
 * (docs/decisions.md, "Shutdown closes connections without a request").
 */
function closeConnectionsOnShutdown(app: FastifyInstance): void {
  const inFlight = new Map<Socket, number>();
  let closing = false;
  const server = app.server;
  server.on("connection", (socket: Socket) => {
    if (closing) {
      socket.destroy();
      return;
    }
    inFlight.set(socket, 0);
    socket.once("close", () => inFlight.delete(socket));
  });
  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    inFlight.set(socket, (inFlight.get(socket) ?? 0) + 1);
    res.once("close", () => {
      const was = inFlight.get(socket);
      if (was === undefined) return; // the connection is gone
      const n = Math.max(0, was - 1);
      inFlight.set(socket, n);
      if (closing && n === 0) socket.destroySoon();
    });
  });
  app.addHook("preClose", (done) => {
    closing = true;
    for (const [socket, n] of inFlight) if (n === 0) socket.destroy();
    done();
  });
}
