import { createServer, type Server } from "node:http";
import type { FastifyInstance } from "fastify";
import { counter, histogram, type Registry } from "../instrument.ts";

/** Which surface a route belongs to (a bounded label: never the path with its project id). */
export function surfaceOf(route: string): string {
  if (route.startsWith("/svc.")) return "rpc";
  if (route.startsWith("/v1/monitoring/projects/:projectId/prometheus")) return "prometheus_api";
  if (route.startsWith("/v1/ingest/")) return "ingest";
  if (route.startsWith("/v1/monitoring/")) return "scrape";
  if (route.startsWith("/console/")) return "console";
  if (route === "/metrics") return "metrics";
  return "other";
}

/**
 * Requests of every HTTP surface, their latency, and the refusals an operator watches: failed
 * authentication (401: a missing, unknown, expired or revoked credential; 403: a credential without
 * the right) and rate limiting (429), by surface.
 */
export function instrumentHttp(app: FastifyInstance, registry: Registry): void {
  const requests = counter(registry, "svc_http_requests_total", "HTTP requests by route and status code.", [
    "route",
    "code",
  ]);
  const duration = histogram(
    registry,
    "svc_http_request_duration_seconds",
    "HTTP request latency by route.",
    [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10],
    ["route"],
  );
  const surfaces = ["rpc", "prometheus_api", "ingest", "scrape", "console", "metrics", "other"];
  const authFailures = counter(
    registry,
    "svc_auth_failures_total",
    "Requests refused for their credential, by surface and reason (unauthenticated: 401, permission_denied: 403).",
    ["surface", "reason"],
    surfaces.flatMap((surface) => [
      { surface, reason: "unauthenticated" },
      { surface, reason: "permission_denied" },
    ]),
  );
  const rateLimited = counter(
    registry,
    "svc_rate_limited_requests_total",
    "Requests answered 429 (rate limits, per-project query slots, a saturated query pool), by surface.",
    ["surface"],
    surfaces.map((surface) => ({ surface })),
  );
  app.addHook("onResponse", async (req, reply) => {
    const route = req.routeOptions.url ?? "unmatched";
    const code = reply.statusCode;
    requests.inc({ route, code: String(code) });
    duration.observe({ route }, reply.elapsedTime / 1000);
    if (code === 401 || code === 403) {
      authFailures.inc({
        surface: surfaceOf(route),
        reason: code === 401 ? "unauthenticated" : "permission_denied",
      });
    } else if (code === 429) rateLimited.inc({ surface: surfaceOf(route) });
  });
}

/**
 * SVC_METRICS_LISTEN: a listener that serves only GET /metrics, without auth, for a Prometheus on a
 * private network (bind it to a private or loopback address). Resolves once listening.
 */
export async function startMetricsListener(
  registry: Registry,
  at: { readonly host: string; readonly port: number },
): Promise<{ readonly server: Server; readonly port: number; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    const path = (req.url ?? "").split("?")[0];
    if (path !== "/metrics" || (req.method !== "GET" && req.method !== "HEAD")) {
      res.writeHead(404, { "content-type": "text/plain" }).end("only GET /metrics is served here\n");
      return;
    }
    registry.metrics().then(
      (body) => {
        res.writeHead(200, { "content-type": registry.contentType, "cache-control": "no-store" });
        res.end(req.method === "HEAD" ? undefined : body);
      },
      () => res.writeHead(500, { "content-type": "text/plain" }).end("collecting metrics failed\n"),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(at.port, at.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : at.port;
  return {
    server,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
