/**
 * The Prometheus-compatible query API (DESIGN §7) as one Fastify scope: its own bearer-auth
 * `onRequest` hook (monitoring.read on the project in the path, checked before any body is read),
 * its own form-body parser, and a catch-all that answers 404 in Prometheus' envelope for everything
 * it does not serve (write, remote read, admin, status/config, flags, targets, rule management…).
 */
import formbody from "@fastify/formbody";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import type { Logger } from "pino";
import type { Db } from "../db/database.ts";
import { encodeText } from "../http/compression.ts";
import { authorizeBearer, type TokenResolver } from "../iam/principal.ts";
import type { MetricsBackend } from "../metrics/backend.ts";
import type { ProjectLimiter } from "../metrics/concurrency.ts";
import type { EncodedAnswer } from "../promql/index.ts";
import { ApiError, toApiError } from "./errors.ts";
import { errorBody } from "./format.ts";
import * as h from "./handlers.ts";
import { type QueryApi, type QueryMetrics, queryOutcome } from "./instrumentation.ts";
import { type PromApiOptions, resolvePromApiOptions } from "./options.ts";
import { Params } from "./params.ts";

export interface PromApiDeps {
  readonly db: Db;
  readonly metrics: MetricsBackend;
  readonly limiter: ProjectLimiter;
  readonly now: () => number;
  readonly log: Logger;
  readonly operatorToken: string;
  readonly ciTokenResolver?: TokenResolver;
  readonly options?: Partial<PromApiOptions>;
  /** Counts and times PromQL queries (svc_promql_*). */
  readonly queryMetrics?: QueryMetrics;
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

export function promApiRoutes(deps: PromApiDeps): FastifyPluginAsync {
  const options = resolvePromApiOptions(deps.options);
  const hd: h.HandlerDeps = { metrics: deps.metrics, limiter: deps.limiter, now: deps.now, options };
  const logUnknown = (err: unknown) => deps.log.error({ err }, "prometheus api: unexpected error");

  return async (scope) => {
    await scope.register(formbody);

    scope.addHook("onRequest", async (req: Req, reply) => {
      try {
        await authorizeBearer(
          deps.db,
          req.headers.authorization,
          req.params.projectId ?? "",
          "monitoring.read",
          deps.now(),
          {
            operatorToken: deps.operatorToken,
            ciTokenResolver: deps.ciTokenResolver,
          },
        );
      } catch (err) {
        return sendError(reply, toApiError(err, "", "", logUnknown));
      }
    });

    const qm = deps.queryMetrics;
    const run = (handler: h.Handler, api?: QueryApi) => async (req: Req, reply: FastifyReply) => {
      const t0 = api && qm ? performance.now() : 0;
      const form = (req.headers["content-type"] ?? "").startsWith("application/x-www-form-urlencoded");
      // A client that goes away (a dashboard refreshing, a closed tab) stops its evaluation: the
      // response closes before it finished.
      const gone = new AbortController();
      const onClose = () => {
        if (!reply.raw.writableFinished) gone.abort();
      };
      reply.raw.on("close", onClose);
      const ctx: h.RequestContext = {
        projectId: req.params.projectId,
        params: new Params(form ? req.body : undefined, req.query),
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

    const api = `${PROM_PREFIX}/api/v1`;
    const both = (path: string, handler: h.Handler, query?: QueryApi) => {
      scope.get(`${api}/${path}`, run(handler, query));
      scope.post(`${api}/${path}`, run(handler, query));
    };
    both("query", h.query, "query");
    both("query_range", h.queryRange, "query_range");
    both("series", h.series);
    both("labels", h.labelNames);
    both("query_exemplars", h.queryExemplars);
    both("format_query", h.formatQuery);
    both("parse_query", h.parseQuery);
    scope.get(`${api}/label/:name/values`, run(h.labelValues));
    scope.get(`${api}/metadata`, run(h.metadata));
    scope.get(`${api}/status/buildinfo`, run(h.buildInfo));
    scope.get(`${api}/rules`, run(h.rules));
    scope.get(`${api}/alerts`, run(h.alerts));

    const notServed = async (_req: Req, reply: FastifyReply) =>
      sendError(
        reply,
        new ApiError("not_found", "not found: svc serves a read-only subset of the Prometheus API"),
      );
    scope.all(PROM_PREFIX, notServed);
    scope.all(`${PROM_PREFIX}/*`, notServed);
  };
}
