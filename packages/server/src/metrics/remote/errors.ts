import { SvcError } from "../../errors.ts";

/**
 * The metrics engine did not answer (connection refused, timeout, 5xx, 429): reads answer
 * `unavailable` (Connect) / 503 (Prometheus API), and ingest is not acknowledged (HTTP 503, so the
 * writer retries). The message names the engine's origin and what happened, never a header.
 */
export class MetricsEngineUnavailableError extends SvcError {
  /** Fastify answers with this status when the error reaches it (the remote-write receiver). */
  readonly statusCode = 503;
  constructor(message: string, cause?: unknown) {
    super("unavailable", message, cause === undefined ? {} : { cause });
    this.name = "MetricsEngineUnavailableError";
  }
}

/**
 * The engine refused a remote-write batch with a 4xx other than 429 (retrying the same bytes cannot
 * help). A 400 is about the samples (out of order, too old): the writer gets a 400 too and does not
 * retry, as from the embedded store. Any other status (401, 403, 404, 413…) is about svc's
 * configuration, so the writer gets a 502 and retries once an operator fixed it.
 */
export class RemoteWriteRefusedError extends SvcError {
  readonly statusCode: number;
  /** The engine's HTTP status. */
  readonly engineStatus: number;
  constructor(origin: string, engineStatus: number, body: string) {
    const text = body.trim().slice(0, 300);
    super(
      engineStatus === 400 ? "invalid_argument" : "unavailable",
      `the metrics engine at ${origin} refused the samples: HTTP ${engineStatus}${text ? `: ${text}` : ""}`,
    );
    this.name = "RemoteWriteRefusedError";
    this.engineStatus = engineStatus;
    this.statusCode = engineStatus === 400 ? 400 : 502;
  }
}

/** Scheme, host and path of a URL: never its userinfo or query, which may carry credentials. */
export function safeOrigin(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname === "/" ? "" : u.pathname}`;
  } catch {
    return "<invalid url>";
  }
}
