/**
 * Connect's routes in Fastify, as @connectrpc/connect-fastify's plugin mounts them but with a route per
 * RPC for the methods Connect answers it with (POST, and GET for an RPC marked free of side effects; svc
 * has none today) instead of every HTTP method Fastify knows (`all`: 34 of them). Inserting 34 routes per RPC into the router was the largest part of
 * the server's start-up after loading its code (docs/performance.md, "Start-up"); any other method on an
 * RPC's path still reaches Connect through one wildcard route, so the answers stay Connect's (405 with
 * `Allow` for a known RPC, Fastify's 404 for an unknown path).
 *
 * This module loads neither Connect nor protobuf: given the RPCs' routes (`routes`, a list kept beside
 * the services: rpc-routes.ts), it registers them at start and loads the router (`load`: Connect, the
 * protobuf descriptors and the services: the largest part of loading the bundle) at the first call
 * (docs/performance.md, "Start-up, third pass"). Without `routes` it loads at registration.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";

/** An RPC's path and the methods Connect serves it by (POST; GET too when it is free of side effects). */
export interface RpcRoute {
  readonly path: string;
  readonly methods: readonly ("GET" | "POST")[];
}

/** The loaded router: its RPCs, and how one request to one of them is answered. */
export interface RpcHandlers {
  readonly routes: readonly RpcRoute[];
  /** Answers a request to `path`; false (nothing sent) when no RPC has that path. */
  serve(path: string, req: FastifyRequest, reply: FastifyReply): Promise<boolean>;
}

export interface ConnectPluginOptions {
  /** Creates the router; its calls are aborted when `shutdownSignal` is (shutdownTimeoutMs). */
  readonly load: (shutdownSignal: AbortSignal) => Promise<RpcHandlers>;
  /** The RPCs `load` serves, known without loading it: then it loads at the first call. */
  readonly routes?: readonly RpcRoute[];
  /** On close, calls still running are aborted this long after Fastify starts closing. */
  readonly shutdownTimeoutMs?: number;
}

/**
 * The content types of Connect, gRPC and gRPC-web (as @connectrpc/connect's protocol modules name them;
 * a test compares): Connect reads the body itself, so each passes Fastify's parsers untouched (the
 * protocols svc does not serve included, so that Connect, not Fastify, refuses them).
 */
export const CONNECT_CONTENT_TYPES = [
  "application/json",
  "application/connect+json",
  "application/grpc-web+proto",
  "application/grpc-web+json",
  "application/grpc+proto",
  "application/grpc+json",
];
export const CONNECT_CONTENT_TYPE_PATTERNS = [
  /^application\/grpc(?:\+(?:(json)(?:; ?charset=utf-?8)?|proto))?$/i,
  /^application\/grpc-web(-text)?(?:\+(?:(json)(?:; ?charset=utf-?8)?|proto))?$/i,
  /^application\/(connect\+)?(?:(json)(?:; ?charset=utf-?8)?|(proto))$/i,
];

export async function connectPlugin(instance: FastifyInstance, opts: ConnectPluginOptions): Promise<void> {
  const shutdown = new AbortController();
  const { shutdownTimeoutMs } = opts;
  if (shutdownTimeoutMs !== undefined) {
    let timer: NodeJS.Timeout | undefined;
    instance.addHook("preClose", (done) => {
      // Unref'd, and cleared once closed: it must not keep a closed server's process alive for
      // shutdownTimeoutMs (docs/decisions.md, "Shutdown closes connections without a request").
      timer = setTimeout(() => shutdown.abort(), shutdownTimeoutMs).unref();
      done();
    });
    instance.addHook("onClose", (_instance, done) => {
      clearTimeout(timer);
      shutdown.abort();
      done();
    });
  }
  let loading: Promise<RpcHandlers> | undefined;
  const handlers = () => {
    loading ??= opts.load(shutdown.signal);
    return loading;
  };
  const routes = opts.routes ?? (await handlers()).routes;
  if (routes.length === 0) return;
  const noop = (_req: unknown, _payload: unknown, done: (err: null, body: undefined) => void) =>
    done(null, undefined);
  instance.addContentTypeParser(CONNECT_CONTENT_TYPES, noop);
  for (const re of CONNECT_CONTENT_TYPE_PATTERNS) instance.addContentTypeParser(re, noop);

  const serve = async (path: string, req: FastifyRequest, reply: FastifyReply) => {
    if (!(await (await handlers()).serve(path, req, reply))) return reply.callNotFound();
  };
  const known = new Set<string>();
  for (const route of routes) {
    known.add(route.path);
    instance.route({
      // Each route costs start-up time in the router (docs/performance.md, "Start-up"): a GET route only
      // where Connect serves GET; elsewhere GET reaches Connect's 405 through the wildcard.
      method: [...route.methods],
      url: route.path,
      exposeHeadRoute: false,
      handler: (req, reply) => serve(route.path, req, reply),
    });
  }
  const prefixes = [...new Set(routes.map((r) => r.path.slice(0, r.path.indexOf(".") + 1)))];
  const others = instance.supportedMethods.filter((m) => m !== "POST");
  for (const prefix of prefixes) {
    instance.route({
      method: others,
      url: `${prefix}*`,
      handler: (req, reply) => {
        const path = req.url.split("?")[0];
        return known.has(path) ? serve(path, req, reply) : reply.callNotFound();
      },
    });
  }
}
