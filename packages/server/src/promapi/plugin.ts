/**
 * The Prometheus-compatible query API (docs/api.md#prometheus-compatible-query-api) as one Fastify scope: its own auth `onRequest`
 * hook (a bearer credential, or the console's session cookie with its CSRF header; monitoring.read
 * on the project in the path, checked before any body is read), requests read as Prometheus reads them (form.ts: a form body and the URL query; any other body
 * ignored, whatever its Content-Type), 405 for a served path's other methods, and a catch-all that
 * answers 404 for everything it does not serve (write, remote read, admin, status/config, flags,
 * targets, rule management…). Every answer under the prefix, Fastify's own errors included, is in
 * Prometheus' envelope.
 */
import { Readable } from "node:stream";
import type { FastifyError, FastifyPluginAsync, FastifyReply, FastifyRequest, HTTPMethods } from "fastify";
import type { Logger } from "pino";
import { CSRF_HEADER, requestCredential } from "../console/session-cookie.ts";
import type { Db } from "../db/database.ts";
import { encodeText } from "../http/compression.ts";
import { authenticate, authorizeProject, type TokenResolver } from "../iam/principal.ts";
import type { MetricsBackend } from "../metrics/backend.ts";
import type { ProjectLimiter } from "../metrics/concurrency.ts";
import type { EncodedAnswer } from "../promql/index.ts";
import { ApiError, toApiError } from "./errors.ts";
import { drain, formKind, queryParams, readFormBody } from "./form.ts";
import { errorBody } from "./format.ts";
import * as h from "./handlers.ts";
import { type QueryApi, type QueryMetrics, queryOutcome } from "./instrumentation.ts";
import { type PromApiOptions, resolvePromApiOptions } from "./options.ts";
import { Params } from "./params.ts";
import { listAlerts, listRules, type RulesDeps } from "./rules.ts";

export interface PromApiDeps {
  readonly db: Db;
  readonly metrics: MetricsBackend;
  readonly limiter: ProjectLimiter;
  readonly now: () => number;
  readonly log: Logger;
  readonly operatorToken: string;
  readonly ciTokenResolver?: TokenResolver;
  readonly options?: Partial<PromApiOptions>;
  /** The alert evaluator's cycle (the rule group's interval in `rules`); default 30 s. */
  readonly evaluationIntervalMs?: number;
  /** Largest form body read, bytes (the server's request limit). */
  readonly maxRequestBytes?: number;
  /** Counts and times PromQL queries (svc_promql_*). */
  readonly queryMetrics?: QueryMetrics;
  /**
   * Signs the console's CSRF tokens: with it, a signed-in console may read with its session cookie
   * plus the CSRF header (the VM list's sparklines, one range query per page), as its Connect calls do.
   */
  readonly consoleKey?: Buffer;
}

function header(req: FastifyRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Base of the API; a dashboard's "query base URL" is `{base_url}/v1/monitoring/projects/<id>/prometheus`. */
export const PROM_PREFIX = "/v1/monitoring/projects/:projectId/prometheus";

type Req = FastifyRequest<{ Params: { projectId: string; name?: string } }>;

function send(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply.code(status).type("application/json").send(body);
}

/**
 * An answer compressed as the client accepts (Grafana and Prometheus' own clients ask for gzip, as
 * Prometheus compresses its API): a range query's JSON shrinks ~10×, and writing it to the socket
 * was the largest cost of a heavy query's answer on the event loop.
 */
async function sendCompressed(
  req: FastifyRequest,
  reply: FastifyReply,
  body: string | EncodedAnswer,
): Promise<FastifyReply> {
  // A query's answer may come encoded already, from the worker that ran it.
  const encoded =
    typeof body === "string"
      ? await encodeText(body, req.headers["accept-encoding"] ?? "", false)
      : {
          body: Buffer.from(body.body.buffer, body.body.byteOffset, body.body.byteLength),
          encoding: body.coding,
        };
  reply.code(200).type("application/json").header("vary", "accept-encoding");
  if (encoded.encoding) reply.header("content-encoding", encoded.encoding);
  return reply.send(encoded.body);
}

function sendError(reply: FastifyReply, e: ApiError): FastifyReply {
  if (e.retryAfterSeconds !== undefined) reply.header("retry-after", String(e.retryAfterSeconds));
  return send(reply, e.status, errorBody(e.errorType, e.message));
}

/** An error Fastify raised itself (a hook, the router), in Prometheus' terms; never echoes input. */
function frameworkError(err: unknown): ApiError | undefined {
  const status = (err as { statusCode?: unknown }).statusCode;
  if (typeof status !== "number" || status < 400) return undefined;
  if (status === 404) return new ApiError("not_found", "not found");
  if (status >= 500) return undefined;
  const code = (err as { code?: unknown }).code;
  return new ApiError("bad_data", `bad request${typeof code === "string" ? ` [${code}]` : ""}`);
}

/** Every method Prometheus routes, and the ones svc answers 405 to on a served path. */
const METHODS: readonly HTTPMethods[] = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"];

const UNDER_PREFIX = /^\/v1\/monitoring\/projects\/[^/?]+\/prometheus(?:[/?]|$)/;

/**
 * Fastify's errors before routing (a malformed escape in the path) under the prefix, in Prometheus'
 * envelope (server.ts `frameworkErrors`); false for every other URL. Nothing of the URL is echoed.
 */
export function promApiFrameworkError(err: FastifyError, req: FastifyRequest, reply: FastifyReply): boolean {
  if (!UNDER_PREFIX.test(req.raw.url ?? "")) return false;
  const status = err.statusCode ?? 400;
  const e =
    status >= 500
      ? new ApiError("internal", "internal error")
      : new ApiError("bad_data", `malformed request path [${err.code}]`);
  sendError(reply, e);
  return true;
}

export function promApiRoutes(deps: PromApiDeps): FastifyPluginAsync {
  const options = resolvePromApiOptions(deps.options);
  const hd: h.HandlerDeps = { metrics: deps.metrics, limiter: deps.limiter, now: deps.now, options };
  const rulesDeps: RulesDeps = {
    db: deps.db,
    evaluationIntervalMs: deps.evaluationIntervalMs ?? 30_000,
    maxExpressionBytes: options.maxExpressionBytes,
  };
  const logUnknown = (err: unknown) => deps.log.error({ err }, "prometheus api: unexpected error");

  const maxBodyBytes = deps.maxRequestBytes ?? 4 * 1024 * 1024;
  // The request's own Content-Type, taken off the request before Fastify picks a body parser.
  const contentTypes = new WeakMap<FastifyRequest, string>();

  const api: FastifyPluginAsync = async (scope) => {
    // One parser for every body: it hands the unread stream to the handler, which reads a form and
    // drains anything else, so no Content-Type (or a missing, empty or malformed one) is refused.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser("*", (_req, payload, done) => done(null, payload));
    scope.setErrorHandler((err, _req, reply) =>
      sendError(reply, frameworkError(err) ?? toApiError(err, "", "", logUnknown)),
    );

    scope.addHook("onRequest", async (req: Req, reply) => {
      try {
        const credential = requestCredential(
          {
            authorization: req.headers.authorization,
            cookie: req.headers.cookie,
            csrf: header(req, CSRF_HEADER),
          },
          deps.consoleKey,
        );
        const principal = await authenticate(deps.db, credential, deps.now(), {
          operatorToken: deps.operatorToken,
          ciTokenResolver: deps.ciTokenResolver,
        });
        await authorizeProject(deps.db, principal, req.params.projectId ?? "", "monitoring.read");
      } catch (err) {
        return sendError(reply, toApiError(err, "", "", logUnknown));
      }
      const type = req.headers["content-type"];
      if (type !== undefined) {
        // Fastify refuses a malformed media type (415) before any parser: the handler decides.
        contentTypes.set(req, type);
        delete req.headers["content-type"];
      }
    });

    /** Body (a form's values) first, then the URL query, as Go's Request.Form. */
    async function params(req: Req): Promise<Params> {
      const type = contentTypes.get(req) ?? "";
      const kind = formKind(type);
      const body = req.body instanceof Readable ? req.body : undefined;
      if (!body) return new Params(queryParams(req.url));
      if (kind === "ignored") {
        await drain(body);
        return new Params(queryParams(req.url));
      }
      // The query string is checked before the body is read: a bad escape there is answered at once.
      const query = queryParams(req.url);
      return new Params(await readFormBody(body, type, kind, maxBodyBytes), query);
    }

    const qm = deps.queryMetrics;
    const run = (handler: h.Handler, api?: QueryApi) => async (req: Req, reply: FastifyReply) => {
      const t0 = api && qm ? performance.now() : 0;
      let merged: Params;
      try {
        merged = await params(req);
      } catch (err) {
        return sendError(reply, toApiError(err, "", "", logUnknown));
      }
      // A client that goes away (a dashboard refreshing, a closed tab) stops its evaluation: the
      // response closes before it finished.
      const gone = new AbortController();
      const onClose = () => {
        if (!reply.raw.writableFinished) gone.abort();
      };
      reply.raw.on("close", onClose);
      const ctx: h.RequestContext = {
        projectId: req.params.projectId,
        params: merged,
        labelName: req.params.name,
        signal: gone.signal,
        acceptEncoding: req.headers["accept-encoding"],
        expr: "",
      };
      try {
        const answer = await handler(hd, ctx);
        if (t0) {
          qm!.queries.inc({ api: api!, outcome: "ok" });
          qm!.duration.observe({ api: api! }, (performance.now() - t0) / 1000);
        }
        return await sendCompressed(req, reply, answer);
      } catch (err) {
        const e = toApiError(err, ctx.expr, "query", logUnknown);
        if (t0) {
          qm!.queries.inc({ api: api!, outcome: queryOutcome(e) });
          qm!.duration.observe({ api: api! }, (performance.now() - t0) / 1000);
        }
        return sendError(reply, e);
      } finally {
        reply.raw.off("close", onClose);
      }
    };

    // Served paths (as patterns under the prefix) and their Allow header, for methods no route takes.
    const served: { re: RegExp; allow: string; path: string }[] = [];
    const notAllowed = (req: FastifyRequest, reply: FastifyReply, path: string, allow: string) =>
      sendError(
        reply.header("allow", allow),
        new ApiError(
          "method_not_allowed",
          `method ${req.method} not allowed on api/v1/${path.replace(":name", "…")}: use ${allow}`,
        ),
      );
    const serve = (path: string, handler: h.Handler, methods: readonly HTTPMethods[], query?: QueryApi) => {
      const url = `/api/v1/${path}`;
      scope.route({ method: [...methods], url, handler: run(handler, query) });
      const allow = [...methods, "OPTIONS"].join(", ");
      served.push({ re: new RegExp(`/prometheus${url.replace(":name", "[^/]+")}/?(?:\\?|$)`), allow, path });
      // Prometheus answers OPTIONS (CORS preflight) with 204 on every path it serves.
      scope.options(url, async (_req, reply) => reply.code(204).header("allow", allow).send());
      const others = METHODS.filter((m) => m !== "OPTIONS" && !methods.includes(m));
      scope.route({
        method: others,
        url,
        handler: async (req, reply) => notAllowed(req, reply, path, allow),
      });
    };
    const both = (path: string, handler: h.Handler, query?: QueryApi) =>
      serve(path, handler, ["GET", "POST"], query);
    both("query", h.query, "query");
    both("query_range", h.queryRange, "query_range");
    both("series", h.series);
    both("labels", h.labelNames);
    both("query_exemplars", h.queryExemplars);
    both("format_query", h.formatQuery);
    both("parse_query", h.parseQuery);
    serve("label/:name/values", h.labelValues, ["GET"]);
    serve("metadata", h.metadata, ["GET"]);
    serve("status/buildinfo", h.buildInfo, ["GET"]);
    serve("rules", async (_hd, ctx) => listRules(rulesDeps, ctx.projectId, ctx.params), ["GET"]);
    serve("alerts", async (_hd, ctx) => listAlerts(rulesDeps, ctx.projectId), ["GET"]);

    const notServed = async (req: Req, reply: FastifyReply) => {
      // A method Fastify routes nowhere (PROPFIND…) on a served path: 405, as Prometheus' router.
      const path = served.find((p) => p.re.test(req.url));
      if (path) return notAllowed(req, reply, path.path, path.allow);
      return sendError(
        reply,
        new ApiError("not_found", "not found: svc serves a read-only subset of the Prometheus API"),
      );
    };
    // Routes, not only the not-found handler: the console's `/*` would otherwise take these GETs.
    scope.all("/", notServed);
    scope.all("/*", notServed);
    // Under the prefix only: methods `all` does not cover (PROPFIND…), after the auth hook too.
    scope.setNotFoundHandler(notServed);
  };
  return async (app) => {
    await app.register(api, { prefix: PROM_PREFIX });
  };
}
