import { encodeRemoteWriteBody } from "./encode.ts";
import { RemoteWritePushError } from "./errors.ts";
import type { WriteRequest } from "./types.ts";

/** The slice of `fetch` the pusher uses (tests and proxies may hand in their own). */
export type FetchLike = (
  url: string,
  init: { method: string; headers: Record<string, string>; body: Uint8Array; signal: AbortSignal },
) => Promise<{ status: number; headers?: { get(name: string): string | null }; text(): Promise<string> }>;

export interface PushOptions {
  /** Defaults to globalThis.fetch. */
  readonly fetch?: FetchLike;
  /** Whole-request deadline in ms (connect, send, response body). Default 30,000. */
  readonly timeoutMs?: number;
  /** Extra headers (e.g. User-Agent); cannot override the protocol headers or Authorization. */
  readonly headers?: Readonly<Record<string, string>>;
}

export interface PushResult {
  /** HTTP status of the receiver's answer. */
  readonly status: number;
  /** Response body text, cut to the first 4,096 characters (receivers' error messages). */
  readonly body: string;
  /** A response header by name (case-insensitive), or null when absent or the fetch gave no headers. */
  header(name: string): string | null;
}

const MAX_BODY_CHARS = 4096;

/**
 * POSTs one WriteRequest as a remote-write 1.0 body with a bearer token. Resolves with whatever status
 * the receiver answered (the caller decides about retries); rejects with RemoteWritePushError when no
 * answer arrived (connection refused, DNS, timeout). The token is sent only in the Authorization header
 * and appears in no error message. An already-encoded body (Uint8Array) is sent as is.
 */
export async function pushRemoteWrite(
  url: string,
  token: string,
  writeRequest: WriteRequest | Uint8Array,
  options: PushOptions = {},
): Promise<PushResult> {
  const doFetch = options.fetch ?? (globalThis.fetch as unknown as FetchLike);
  const timeoutMs = options.timeoutMs ?? 30_000;
  const body = writeRequest instanceof Uint8Array ? writeRequest : encodeRemoteWriteBody(writeRequest);
  const headers: Record<string, string> = {
    ...options.headers,
    "Content-Encoding": "snappy",
    "Content-Type": "application/x-protobuf",
    "X-Prometheus-Remote-Write-Version": "0.1.0",
    Authorization: `Bearer ${token}`,
  };
  // A timer cleared when the answer is in, rather than AbortSignal.timeout, whose timer fires (and
  // dispatches an abort event) long after every push that succeeded.
  const deadline = new AbortController();
  const signal = deadline.signal;
  const timer = setTimeout(
    () => deadline.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError")),
    timeoutMs,
  );
  timer.unref();
  let res: Awaited<ReturnType<FetchLike>>;
  let text: string;
  try {
    res = await doFetch(url, { method: "POST", headers, body, signal });
    text = await res.text();
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    const why = signal.aborted
      ? `timed out after ${timeoutMs} ms`
      : (e.cause?.code ?? e.name ?? "network error");
    // Only the origin: a URL may carry credentials in userinfo or query.
    throw new RemoteWritePushError(`remote write to ${safeOrigin(url)} failed: ${why}`);
  } finally {
    clearTimeout(timer);
  }
  const answered = res.headers;
  return {
    status: res.status,
    body: text.length > MAX_BODY_CHARS ? text.slice(0, MAX_BODY_CHARS) : text,
    header: (name) => answered?.get(name) ?? null,
  };
}

function safeOrigin(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return "<invalid url>";
  }
}
