import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import type { Logger } from "pino";
import { SvcError } from "../errors.ts";
import { authorizeBearer, type TokenResolver } from "../iam/principal.ts";
import {
  EXPOSITION_CONTENT_TYPE,
  type ExportDeps,
  parseShard,
  renderExportShard,
  scrapeTargets,
} from "../metrics/export.ts";
import { encodeText } from "./compression.ts";

export interface ScrapeHttpDeps extends ExportDeps {
  readonly log: Logger;
  readonly operatorToken: string;
  readonly ciTokenResolver?: TokenResolver;
  /** Public origin (scheme://host[:port]) written into discovery; default: the request's own. */
  readonly baseUrl?: string;
}

type Req = FastifyRequest<{ Params: { projectId: string }; Querystring: Record<string, unknown> }>;

const statusOf: Record<string, number> = {
  invalid_argument: 400,
  unauthenticated: 401,
  permission_denied: 403,
  not_found: 404,
  resource_exhausted: 429,
};

/**
 * Scrape discovery and export shards (docs/prometheus.md) in their own Fastify scope: bearer credential with
 * monitoring.read on the project in the path, checked before anything is read. Errors are JSON
 * `{code, message}` with the HTTP status of the Connect code, and 429 carries Retry-After.
 */
export function scrapeRoutes(deps: ScrapeHttpDeps): FastifyPluginAsync {
  const fail = (reply: FastifyReply, err: unknown) => {
    if (!(err instanceof SvcError)) {
      deps.log.error({ err }, "scrape endpoint: unexpected error");
      return reply.code(500).send({ code: "internal", message: "internal error" });
    }
    if (err.retryAfterSeconds !== undefined) reply.header("retry-after", String(err.retryAfterSeconds));
    return reply
      .code(statusOf[err.code] ?? 500)
      .send({ code: err.code, message: err.reason ? `${err.message} [${err.reason}]` : err.message });
  };
  return async (scope) => {
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
        return fail(reply, err);
      }
    });
    scope.get("/v1/monitoring/projects/:projectId/scrape-targets", async (req: Req, reply) => {
      const origin = deps.baseUrl
        ? new URL(deps.baseUrl)
        : new URL(`${req.protocol}://${req.headers.host ?? "127.0.0.1"}`);
      return reply
        .type("application/json")
        .send(
          scrapeTargets(
            req.params.projectId,
            deps.options.exportShards,
            origin.host,
            origin.protocol.replace(":", ""),
          ),
        );
    });
    scope.get("/v1/monitoring/projects/:projectId/export", async (req: Req, reply) => {
      try {
        const shard = parseShard(req.query.shard, deps.options.exportShards);
        const text = await renderExportShard(deps, req.params.projectId, shard);
        reply.type(EXPOSITION_CONTENT_TYPE).header("vary", "accept-encoding");
        // Prometheus asks for gzip on every scrape: a shard of 10,000 series is ~1.6 MiB of text and
        // ~12× smaller gzipped (level 2: ~4 ms, in the thread pool at this size). Among equally
        // weighted codings gzip comes first (`binary`), the one scrapers decode.
        const { body, encoding } = await encodeText(text, req.headers["accept-encoding"] ?? "", true);
        if (encoding) reply.header("content-encoding", encoding);
        return reply.send(body);
      } catch (err) {
        return fail(reply, err);
      }
    });
  };
}
