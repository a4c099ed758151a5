import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import type { Readable } from "node:stream";

/**
 * HTTP to the engine over node:http with keep-alive agents, instead of fetch: per request, fetch cost
 * ~1.7 ms of CPU more than this with a 150 KB remote-write body (it writes the body through a web
 * stream in small pieces) and ~0.7–1 ms more for a query with a 60 KB answer (measured on loopback,
 * docs/performance.md "Remote backend"); an RPC makes about seven reads and every ingest batch one write.
 *
 * Answers are not compressed (no Accept-Encoding): the engine is expected on the same network, where
 * decompressing cost svc more than the bytes cost the link.
 */
export interface EngineResponse {
  readonly status: number;
  readonly ok: boolean;
  /** The body as it arrives; read it once, by one of the three means. */
  readonly body: Readable;
  text(): Promise<string>;
  bytes(): Promise<Buffer>;
}

export interface EngineRequest {
  readonly method: "GET" | "POST";
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: Uint8Array | string;
  /**
   * Aborts the request, and the reading of its body; the promise (or the body) rejects with the
   * signal's reason, as fetch does (a TimeoutError for AbortSignal.timeout).
   */
  readonly signal?: AbortSignal;
}

// Free keep-alive sockets are unref'd by Node, so they never hold the process open.
const httpAgent = new HttpAgent({ keepAlive: true });
const httpsAgent = new HttpsAgent({ keepAlive: true });

/**
 * Sends one request; resolves at the answer's headers. A failure to connect or send rejects with an
 * Error whose `cause` is the socket's error (`cause.code`: ECONNREFUSED, ECONNRESET…), as fetch's does.
 */
export function engineRequest(url: string, init: EngineRequest): Promise<EngineResponse> {
  const u = new URL(url);
  const https = u.protocol === "https:";
  const signal = init.signal;
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const headers: Record<string, string | number> = { ...init.headers };
    if (init.body !== undefined) headers["Content-Length"] = Buffer.byteLength(init.body);
    const req = (https ? httpsRequest : httpRequest)(
      u,
      { method: init.method, headers, agent: https ? httpsAgent : httpAgent },
      (res) => {
        // From here the abort is the body's: it fails whichever read is under way.
        resolve(response(res, signal, () => signal?.removeEventListener("abort", onAbort)));
      },
    );
    const onAbort = () => {
      const reason = signal?.reason;
      req.destroy(reason);
      reject(reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    req.on("error", (err) => {
      signal?.removeEventListener("abort", onAbort);
      if (signal?.aborted) reject(signal.reason);
      else reject(new Error(`request to ${u.origin} failed`, { cause: err }));
    });
    req.end(init.body);
  });
}

function response(res: IncomingMessage, signal: AbortSignal | undefined, done: () => void): EngineResponse {
  const status = res.statusCode ?? 0;
  const onAbort = () => res.destroy(signal?.reason);
  if (signal) signal.addEventListener("abort", onAbort, { once: true });
  const finished = () => {
    done();
    signal?.removeEventListener("abort", onAbort);
  };
  res.once("close", finished);
  const bytes = () =>
    new Promise<Buffer>((resolve, reject) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.once("end", () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
      res.once("error", (err) => reject(signal?.aborted ? signal.reason : err));
      res.once("close", () => {
        if (!res.complete) reject(signal?.aborted ? signal.reason : new Error("the answer was cut short"));
      });
    });
  return {
    status,
    ok: status >= 200 && status < 300,
    body: res,
    bytes,
    text: async () => (await bytes()).toString("utf8"),
  };
}
