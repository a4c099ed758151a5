import { type DecodeLimits, decodeRemoteWriteBodyCompact, RemoteWriteDecodeError } from "@svc/remotewrite";
import type { FastifyPluginAsync } from "fastify";
import type { Db } from "../db/database.ts";
import { ingestPrincipalOr401 } from "./credentials.ts";
import { type DecodedBody, type DecodePool, DecodeWorkerLostError } from "./decode/pool.ts";
import { createGuestSeen, guestSenderName } from "./guest-seen.ts";
import { createGuestSenders } from "./guest-senders.ts";
import { describeRefusals, type Ingester } from "./ingest.ts";
import type { IngestMetrics } from "./instrumentation.ts";
import { otlpRoutes } from "./otlp/routes.ts";
import { registerVmStateRoute } from "./vm-states.ts";

export interface IngestHttpDeps {
  readonly db: Db;
  readonly ingester: Ingester;
  readonly collectorToken: string;
  readonly now: () => number;
  /** Largest compressed body accepted, bytes. */
  readonly maxBodyBytes: number;
  readonly decodeLimits?: Partial<DecodeLimits>;
  readonly metrics?: IngestMetrics;
  /**
   * Decodes large bodies off the event loop (decode/pool.ts); absent, every body is decoded inline. Its
   * limits must be `decodeLimits`.
   */
  readonly decodePool?: DecodePool;
}

/**
 * Prometheus remote-write 1.0 receiver. Answers as Prometheus does, in plain text: 204 when every
 * sample was kept, 400 (do not retry) naming each refusal with its counts while the valid rest of the
 * batch is kept, 401 for a bad credential, 413 for an oversized body.
 *
 * svc's own 400s carry `Svc-Ingest-Refused` (`samples`: these samples are refused, the rest stored;
 * `body`: the body is not a WriteRequest svc can decode), so the guest agent can tell a final answer
 * from a 400 of a proxy in between, which it keeps and retries (docs/agent.md). OTLP/HTTP metrics from a guest
 * agent's own sender are received beside it (otlp/routes.ts).
 */
export const REFUSED_HEADER = "Svc-Ingest-Refused";
export function ingestRoutes(deps: IngestHttpDeps): FastifyPluginAsync {
  const guests = createGuestSenders({ ingester: deps.ingester, metrics: deps.metrics });
  const guestSeen = createGuestSeen(deps.db);
  return async (scope) => {
    scope.addContentTypeParser(
      ["application/x-protobuf", "application/octet-stream"],
      { parseAs: "buffer", bodyLimit: deps.maxBodyBytes },
      (_req, body, done) => done(null, body),
    );
    // Who wrote and when the decoded request started, for the request counter and latency.
    const seen = new WeakMap<object, { source: string; t0: number }>();
    const m = deps.metrics;
    if (m) {
      scope.addHook("onResponse", async (req, reply) => {
        const s = seen.get(req);
        m.requests.inc({ source: s?.source ?? "unknown", code: String(reply.statusCode) });
        if (s && s.t0 > 0) m.duration.observe((performance.now() - s.t0) / 1000);
      });
    }
    registerVmStateRoute(scope, deps);
    await scope.register(
      otlpRoutes({
        db: deps.db,
        guests,
        guestSeen,
        collectorToken: deps.collectorToken,
        now: deps.now,
        mark: m ? (req, source) => seen.set(req, { source, t0: 0 }) : undefined,
      }),
    );
    scope.post("/v1/ingest/prometheus/api/v1/write", async (req, reply) => {
      const principal = await ingestPrincipalOr401(req, reply, deps);
      if (!principal) return reply;
      if (!Buffer.isBuffer(req.body)) {
        return reply
          .code(415)
          .type("text/plain")
          .send("send Content-Type: application/x-protobuf with a snappy-compressed WriteRequest\n");
      }
      const encoding = req.headers["content-encoding"];
      if (encoding !== undefined && encoding !== "snappy") {
        return reply
          .code(415)
          .type("text/plain")
          .send(`Content-Encoding ${String(encoding).slice(0, 40)} is not supported; use snappy\n`);
      }
      const mark = { source: principal.kind, t0: 0 };
      if (m) seen.set(req, mark);
      let writeRequest: ReturnType<typeof decodeRemoteWriteBodyCompact> | undefined;
      let keys: DecodedBody["keys"];
      const pool = deps.decodePool;
      try {
        if (pool?.wants(req.body.length)) {
          // The tenant is the unit of the pool's round-robin: a guest agent's project, or the collector.
          const tenant = principal.kind === "agent" ? principal.vm.projectId : "";
          const body = req.body;
          // Moved to the worker: Fastify must not hold (or read) it any more.
          req.body = undefined;
          const decoded = await pool.decode(body, tenant);
          writeRequest = decoded.req;
          keys = decoded.keys;
        } else writeRequest = decodeRemoteWriteBodyCompact(req.body, deps.decodeLimits);
      } catch (err) {
        if (err instanceof RemoteWriteDecodeError)
          return reply.code(400).header(REFUSED_HEADER, "body").type("text/plain").send(`${err.message}\n`);
        if (err instanceof DecodeWorkerLostError) {
          // Nothing of the body was stored: a retry is safe, and the worker is being replaced.
          return reply.code(503).header("retry-after", "1").type("text/plain").send(`${err.message}\n`);
        }
        throw err;
      }
      // The compressed body is done with: Fastify would hold it until the reply, past the commit's
      // wait for the WAL, long enough to be promoted and kept until a full collection.
      req.body = undefined;
      if (m) mark.t0 = performance.now();
      // A guest-agent token's node_exporter series (vmagent, Prometheus agent…) are mapped first.
      const mapped = principal.kind === "agent" && guests.needsMapping(writeRequest);
      const ingesting = mapped
        ? guests.ingestRemoteWrite(principal, writeRequest)
        : deps.ingester.ingest(principal, writeRequest, keys);
      writeRequest = undefined; // likewise: not held by this frame while the commit waits
      const result = await ingesting;
      if (principal.kind === "agent" && result.acceptedSamples > 0) {
        const sender = guestSenderName(mapped ? "node_exporter" : "svc-agent", req.headers["user-agent"]);
        await guestSeen.record(principal.vm, sender, deps.now(), (err) =>
          req.log.warn({ err }, "could not record the VM's guest sender"),
        );
      }
      if (Object.keys(result.refused).length > 0) {
        return reply
          .code(400)
          .header(REFUSED_HEADER, "samples")
          .type("text/plain")
          .send(`${describeRefusals(result)}\n`);
      }
      return reply.code(204).send();
    });
  };
}
