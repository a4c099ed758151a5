import type { FastifyPluginAsync, FastifyReply } from "fastify";
import type { Db } from "../../db/database.ts";
import { SvcError } from "../../errors.ts";
import { bearerToken } from "../../iam/principal.ts";
import { authenticateIngest } from "../credentials.ts";
import { newMapResult } from "../guest-map.ts";
import { type GuestSeen, guestSenderName } from "../guest-seen.ts";
import type { GuestSenders } from "../guest-senders.ts";
import { describeRefusals } from "../ingest.ts";
import type { OtlpFormat } from "./otlp.ts";

/** Largest OTLP body taken as sent, and once inflated (host metrics of one VM are a few KiB). */
export const OTLP_MAX_BODY_BYTES = 4 * 1024 * 1024;
export const OTLP_MAX_INFLATED_BYTES = 16 * 1024 * 1024;

export interface OtlpRouteDeps {
  readonly db: Db;
  readonly guests: GuestSenders;
  /** Records the VM's sender and last-seen time (guest-seen.ts). */
  readonly guestSeen: GuestSeen;
  readonly collectorToken: string;
  readonly now: () => number;
  /** Tells the ingest listener's request metrics who wrote (and when decoding finished). */
  readonly mark?: (req: object, source: string) => void;
}

/**
 * OTLP/HTTP metrics receiver (`POST /v1/ingest/otlp/v1/metrics`), answering as the OTLP
 * specification says: 200 with an ExportMetricsServiceResponse, its partial_success counting the data
 * points refused and naming why; 400 with a google.rpc.Status for a body that is not an export request
 * and for delta temporality (the valid rest of the request stored); 401, 413, 415 likewise with a Status.
 * Answers are protobuf or JSON as the request was.
 */
export function otlpRoutes(deps: OtlpRouteDeps): FastifyPluginAsync {
  // The decoder, protobuf's runtime and OTLP's descriptors load with the first request, not at start
  // (docs/performance.md, "Start-up, third pass").
  let loading: Promise<Awaited<ReturnType<typeof loadOtlp>>> | undefined;
  const otlp = () => {
    loading ??= loadOtlp();
    return loading;
  };
  return async (scope) => {
    // Bodies as bytes; the size is checked here so the answer can name the limit.
    scope.removeContentTypeParser(["application/json", "application/x-protobuf"]);
    scope.addContentTypeParser(
      ["application/x-protobuf", "application/json"],
      { parseAs: "buffer", bodyLimit: 4 * OTLP_MAX_BODY_BYTES },
      (_req, body, done) => done(null, body),
    );
    scope.post("/v1/ingest/otlp/v1/metrics", async (req, reply) => {
      const type = String(req.headers["content-type"] ?? "")
        .split(";")[0]!
        .trim()
        .toLowerCase();
      const format: OtlpFormat = type === "application/json" ? "json" : "protobuf";
      const fail = (status: number, message: string) => status_(reply, format, status, message);
      if (type !== "application/json" && type !== "application/x-protobuf") {
        return fail(415, "send Content-Type: application/x-protobuf or application/json");
      }
      let principal: Awaited<ReturnType<typeof authenticateIngest>>;
      try {
        principal = await authenticateIngest(
          deps.db,
          bearerToken(req.headers.authorization),
          deps.collectorToken,
          deps.now(),
        );
      } catch (err) {
        if (err instanceof SvcError) return fail(401, err.message);
        throw err;
      }
      if (principal.kind !== "agent") {
        return fail(403, "OTLP takes a VM's guest-agent token; the collector token writes by remote write");
      }
      deps.mark?.(req, "agent");
      const body = req.body as Buffer;
      if (body.length > OTLP_MAX_BODY_BYTES) {
        return fail(
          413,
          `the body is ${body.length} bytes; svc takes at most ${OTLP_MAX_BODY_BYTES} bytes (4 MiB) per OTLP request: export smaller batches`,
        );
      }
      const encoding = req.headers["content-encoding"];
      const {
        decodeOtlp,
        OtlpBodyError,
        otlpParts,
        create,
        toBinary,
        toJson,
        ExportMetricsServiceResponseSchema,
      } = await otlp();
      let parsed: ReturnType<typeof decodeOtlp>;
      try {
        parsed = decodeOtlp(
          body,
          format,
          encoding === undefined ? undefined : String(encoding),
          OTLP_MAX_INFLATED_BYTES,
        );
      } catch (err) {
        if (err instanceof OtlpBodyError) return fail(err.status, err.message);
        throw err;
      }
      req.body = undefined;
      const out = newMapResult();
      const { parts, deltaPoints, deltaExample } = otlpParts(parsed, out);
      const result = await deps.guests.ingestParts(principal, parts, out);
      if (result.acceptedSamples > 0) {
        const sender = guestSenderName("otlp", req.headers["user-agent"]);
        await deps.guestSeen.record(principal.vm, sender, deps.now(), (err) =>
          req.log.warn({ err }, "could not record the VM's guest sender"),
        );
      }
      let rejected = deltaPoints;
      for (const r of Object.values(result.refused)) rejected += r.samples;
      if (deltaPoints > 0) {
        const rest = Object.keys(result.refused).length > 0 ? `; also ${describeRefusals(result)}` : "";
        return fail(
          400,
          `${deltaPoints} data points refused: ${deltaExample} (set the exporter's temporality preference to cumulative); ` +
            `accepted ${result.acceptedSamples} samples${rest}`,
        );
      }
      reply.code(200);
      if (rejected === 0) {
        // Full success: the empty ExportMetricsServiceResponse, i.e. no bytes (protobuf) or `{}`.
        // Sent without a payload, the head and the end go out in one write, as remote write's 204.
        if (format === "json") return reply.type("application/json").send("{}");
        return reply.type("application/x-protobuf").send();
      }
      const answer = create(ExportMetricsServiceResponseSchema, {
        partialSuccess: { rejectedDataPoints: BigInt(rejected), errorMessage: describeRefusals(result) },
      });
      if (format === "json")
        return reply.type("application/json").send(toJson(ExportMetricsServiceResponseSchema, answer));
      return reply
        .type("application/x-protobuf")
        .send(Buffer.from(toBinary(ExportMetricsServiceResponseSchema, answer)));
    });
  };
}

async function loadOtlp() {
  const [otlp, protobuf, gen] = await Promise.all([
    import("./otlp.ts"),
    import("@bufbuild/protobuf"),
    import("./gen/opentelemetry/proto/collector/metrics/v1/metrics_service_pb.ts"),
  ]);
  return {
    decodeOtlp: otlp.decodeOtlp,
    OtlpBodyError: otlp.OtlpBodyError,
    otlpParts: otlp.otlpParts,
    create: protobuf.create,
    toBinary: protobuf.toBinary,
    toJson: protobuf.toJson,
    ExportMetricsServiceResponseSchema: gen.ExportMetricsServiceResponseSchema,
  };
}

/** A google.rpc.Status { code, message } answer, encoded as the request was (OTLP/HTTP's error body). */
function status_(reply: FastifyReply, format: OtlpFormat, http: number, message: string): FastifyReply {
  const code = http === 401 ? 16 : http === 403 ? 7 : http === 413 ? 8 : 3; // UNAUTHENTICATED, PERMISSION_DENIED, RESOURCE_EXHAUSTED, INVALID_ARGUMENT
  reply.code(http);
  if (format === "json") return reply.type("application/json").send({ code, message });
  const msg = Buffer.from(message, "utf8");
  // Status: field 1 (varint) code, field 2 (bytes) message.
  const len: number[] = [];
  for (let n = msg.length; ; n >>>= 7) {
    if (n < 0x80) {
      len.push(n);
      break;
    }
    len.push((n & 0x7f) | 0x80);
  }
  return reply
    .type("application/x-protobuf")
    .send(Buffer.concat([Buffer.from([0x08, code, 0x12, ...len]), msg]));
}
