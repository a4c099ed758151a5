import { QueryEvalError, QueryTimeoutError } from "../../promql/index.ts";
import type { LabelMatcher } from "../../storage/interface.ts";
import { MetricsEngineUnavailableError, safeOrigin } from "./errors.ts";
import { failureStatus, type RemoteMetrics } from "./instrumentation.ts";
import { type ApiSeries, labelsOf, parseMatrixAnswer, sampleValue } from "./matrix-json.ts";
import { type EngineRequest, type EngineResponse, engineRequest } from "./transport.ts";

export { type ApiSeries, labelsOf, sampleValue };

/**
 * A small client of a Prometheus-compatible HTTP API (Prometheus, VictoriaMetrics, Mimir, Thanos):
 * form-encoded requests over node:http (keep-alive, transport.ts), each with a deadline, JSON answers parsed
 * into svc's types and failures turned into svc's errors, so the Connect and Prometheus-API edges
 * answer as they do for the embedded store:
 * no answer, 5xx or 429 → MetricsEngineUnavailableError; `timeout` → QueryTimeoutError; `bad_data`
 * or `execution` → QueryEvalError with the engine's message.
 */
export interface PromApiClient {
  /** Base URL (no trailing slash). */
  readonly baseUrl: string;
  /** `data` of a successful JSON answer to a GET (params in the query string) or a form POST. */
  json(path: string, params: readonly (readonly [string, string])[], req?: RequestOpts): Promise<unknown>;
  /** `/api/v1/query_range`: a matrix. */
  queryRange(
    expr: string,
    startMs: number,
    endMs: number,
    stepMs: number,
    req?: RequestOpts,
  ): Promise<ApiSeries[]>;
  /** The raw answer to a POST (remote read): status, and the body as bytes. */
  post(
    path: string,
    body: Uint8Array,
    headers: Record<string, string>,
    req?: RequestOpts,
  ): Promise<EngineResponse>;
  /** A GET whose body the caller streams (VictoriaMetrics' export). */
  stream(
    path: string,
    params: readonly (readonly [string, string])[],
    req?: RequestOpts,
  ): Promise<EngineResponse>;
}

export interface RequestOpts {
  /** The caller's deadline or cancellation: its firing is a QueryTimeoutError. */
  readonly signal?: AbortSignal;
}

export function createPromApiClient(opts: {
  baseUrl: string;
  headers: Readonly<Record<string, string>>;
  timeoutMs: number;
  instruments?: RemoteMetrics;
}): PromApiClient {
  const m = opts.instruments;
  const base = opts.baseUrl.replace(/\/+$/, "");
  const origin = safeOrigin(base);

  async function send(
    path: string,
    init: Omit<EngineRequest, "signal">,
    req?: RequestOpts,
  ): Promise<EngineResponse> {
    const own = AbortSignal.timeout(opts.timeoutMs);
    const signal = req?.signal ? AbortSignal.any([own, req.signal]) : own;
    const t0 = m ? performance.now() : 0;
    try {
      const res = await engineRequest(`${base}${path}`, { ...init, signal });
      if (m) {
        m.readDuration.observe((performance.now() - t0) / 1000);
        if (res.status >= 500 || res.status === 429)
          m.readFailures.inc({ status: failureStatus(res.status) });
      }
      if (res.status >= 500 || res.status === 429) {
        const text = await res.text().catch(() => "");
        if (res.status === 503 && /timeout|timed out|deadline/i.test(text) && !/unavailable/i.test(text))
          throw new QueryTimeoutError(`the metrics engine timed out: ${engineMessage(text)}`);
        throw new MetricsEngineUnavailableError(
          `the metrics engine at ${origin} answered HTTP ${res.status}${text ? `: ${engineMessage(text)}` : ""}`,
        );
      }
      return res;
    } catch (err) {
      if (err instanceof MetricsEngineUnavailableError || err instanceof QueryTimeoutError) throw err;
      if (req?.signal?.aborted) throw new QueryTimeoutError();
      m?.readFailures.inc({ status: failureStatus(undefined, own.aborted) });
      const why = own.aborted
        ? `no answer within ${opts.timeoutMs} ms`
        : ((err as { cause?: { code?: string } }).cause?.code ?? (err as Error).name ?? "network error");
      throw new MetricsEngineUnavailableError(`the metrics engine at ${origin} is unavailable: ${why}`, err);
    }
  }

  async function parse(res: EngineResponse): Promise<unknown> {
    return parseText(res, await res.text());
  }

  function parseText(res: EngineResponse, text: string): unknown {
    let body: { status?: string; data?: unknown; errorType?: string; error?: string };
    try {
      body = JSON.parse(text);
    } catch {
      throw new MetricsEngineUnavailableError(
        `the metrics engine at ${origin} answered HTTP ${res.status} with a body that is not JSON: ${engineMessage(text)}`,
      );
    }
    if (res.ok && body.status === "success") return body.data;
    const message = `the metrics engine refused the query: ${engineMessage(body.error ?? text)}`;
    if (body.errorType === "timeout") throw new QueryTimeoutError(message);
    if (res.status === 401 || res.status === 403 || res.status === 404)
      throw new MetricsEngineUnavailableError(`the metrics engine at ${origin} answered HTTP ${res.status}`);
    throw new QueryEvalError(message);
  }

  const form = (params: readonly (readonly [string, string])[]) =>
    new URLSearchParams(params.map(([k, v]): [string, string] => [k, v]));

  /** Queries, series and label names go as form POSTs (long selectors); the rest only take GET. */
  function request(
    path: string,
    params: readonly (readonly [string, string])[],
    req?: RequestOpts,
  ): Promise<EngineResponse> {
    const isGet = path.includes("/label/") || path.includes("/status/");
    return isGet
      ? send(`${path}?${form(params)}`, { method: "GET", headers: { ...opts.headers } }, req)
      : send(
          path,
          {
            method: "POST",
            headers: { ...opts.headers, "Content-Type": "application/x-www-form-urlencoded" },
            body: form(params).toString(),
          },
          req,
        );
  }

  return {
    baseUrl: base,
    async json(path, params, req) {
      return parse(await request(path, params, req));
    },
    async queryRange(expr, startMs, endMs, stepMs, req) {
      const res = await request(
        "/api/v1/query_range",
        [
          ["query", expr],
          ["start", seconds(startMs)],
          ["end", seconds(endMs)],
          ["step", seconds(stepMs)],
          // VictoriaMetrics: no response cache and no alignment of start/end to the step.
          ["nocache", "1"],
        ],
        req,
      );
      const bytes = await res.bytes();
      const fast = res.ok ? parseMatrixAnswer(bytes) : undefined;
      if (fast) return fast;
      const data = parseText(res, bytes.toString("utf8")) as { resultType?: string; result?: unknown };
      if (data?.resultType !== "matrix" || !Array.isArray(data.result))
        throw new QueryEvalError(`the metrics engine answered a ${data?.resultType} to a range query`);
      return data.result.map(matrixSeries);
    },
    post(path, body, headers, req) {
      return send(path, { method: "POST", headers: { ...opts.headers, ...headers }, body }, req);
    },
    stream(path, params, req) {
      return send(`${path}?${form(params)}`, { method: "GET", headers: { ...opts.headers } }, req);
    },
  };
}

/** Milliseconds as the API's seconds, exactly (three decimals). */
export function seconds(ms: number): string {
  return (ms / 1000).toFixed(3);
}

/** One series of a JSON.parse-d matrix answer (the route for what parseMatrixAnswer does not take). */
export function matrixSeries(s: { metric: Record<string, string>; values: [number, string][] }): ApiSeries {
  const n = s.values.length;
  const timestamps = new Float64Array(n);
  const values = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    timestamps[i] = Math.round(s.values[i][0] * 1000);
    values[i] = sampleValue(s.values[i][1]);
  }
  return { metric: labelsOf(s.metric), timestamps, values };
}

/** A selector for matchers: `{name="value",…}` with PromQL string escapes. */
export function selectorOf(matchers: readonly LabelMatcher[]): string {
  return `{${matchers.map((m) => `${m.name}${m.type}${JSON.stringify(m.value)}`).join(",")}}`;
}

function engineMessage(text: string): string {
  return text.trim().replace(/\s+/g, " ").slice(0, 300);
}
