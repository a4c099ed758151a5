/**
 * The one edge that turns domain errors into Prometheus' error envelope
 * `{status: "error", errorType, error}` with Prometheus' status codes (web/api/v1/api.go returnAPIError).
 * Messages never carry a token; an unknown throwable becomes `internal` and only its class is logged.
 */
import { SvcError } from "../errors.ts";
import {
  PointBudgetError,
  PromQLParseError,
  QueryEvalError,
  QueryOverloadError,
  QueryTimeoutError,
  ResponseTooLargeError,
  TooManySamplesError,
  UnsupportedNodeError,
} from "../promql/index.ts";
import { InvalidMatcherError } from "../tsdb/errors.ts";

/** Prometheus' error types, plus svc's for auth, rate limiting and a method a path does not take. */
export type ErrorType =
  | "bad_data"
  | "execution"
  | "timeout"
  | "canceled"
  | "internal"
  | "unavailable"
  | "not_found"
  | "unauthorized"
  | "forbidden"
  | "method_not_allowed"
  | "too_many_requests";

const statusOf: Readonly<Record<ErrorType, number>> = {
  bad_data: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  execution: 422,
  too_many_requests: 429,
  internal: 500,
  timeout: 503,
  canceled: 503,
  unavailable: 503,
};

/** An error already in wire terms. */
export class ApiError extends Error {
  override readonly name = "ApiError";
  readonly status: number;
  constructor(
    readonly errorType: ErrorType,
    message: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.status = statusOf[errorType];
  }
}

/** `invalid parameter "<name>": <why>`, as Prometheus words a bad parameter. */
export function badParam(name: string, why: string): ApiError {
  return new ApiError("bad_data", `invalid parameter "${name}": ${why}`);
}

/** Prometheus' "line:col: parse error: msg" from a 0-based offset into the expression. */
export function parseErrorMessage(expr: string, err: PromQLParseError): string {
  const upto = expr.slice(0, err.position.start);
  const line = upto.split("\n").length;
  const col = err.position.start - (upto.lastIndexOf("\n") + 1) + 1;
  return `${line}:${col}: parse error: ${err.message}`;
}

/**
 * Removes `project_id="…"` from label sets quoted in engine messages (e.g. "found duplicate series
 * for the match group {…}"): the tenant label never reaches a response, not even the caller's own.
 */
export function scrubTenant(message: string): string {
  if (!message.includes("project_id")) return message;
  return message.replace(/project_id="(?:[^"\\]|\\.)*"(, )?/g, "").replace(/, \}/g, "}");
}

/**
 * Maps anything thrown below the API to an ApiError. `param` names the request parameter an
 * expression came from, for parse errors. `log` receives unknown errors (never sent to the client).
 */
export function toApiError(err: unknown, expr: string, param: string, log: (e: unknown) => void): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof PromQLParseError) return badParam(param, parseErrorMessage(expr, err));
  if (err instanceof UnsupportedNodeError) return badParam(param, err.message);
  if (err instanceof InvalidMatcherError) return badParam(param, err.message);
  if (err instanceof PointBudgetError)
    return new ApiError("bad_data", `${err.message} [POINT_BUDGET_EXCEEDED]`);
  if (err instanceof QueryTimeoutError) return new ApiError("timeout", `${err.message} [QUERY_TIMEOUT]`);
  if (err instanceof TooManySamplesError) {
    const wanted =
      err.loaded === undefined
        ? ""
        : `; it had asked for ${err.loaded.toLocaleString("en-US")} samples when it was stopped`;
    return new ApiError(
      "execution",
      `${err.message}: the limit is ${err.limit.toLocaleString("en-US")} samples per query${wanted} [TOO_MANY_SAMPLES]`,
    );
  }
  if (err instanceof QueryEvalError) return new ApiError("execution", scrubTenant(err.message));
  if (err instanceof ResponseTooLargeError) return new ApiError("execution", err.message);
  if (err instanceof QueryOverloadError)
    return new ApiError("too_many_requests", err.message, err.retryAfterSeconds);
  if (err instanceof SvcError) {
    switch (err.code) {
      case "unauthenticated":
        return new ApiError("unauthorized", err.message);
      case "permission_denied":
        return new ApiError("forbidden", err.reason ? `${err.message} [${err.reason}]` : err.message);
      case "resource_exhausted":
        return new ApiError("too_many_requests", err.message, err.retryAfterSeconds ?? 1);
      case "invalid_argument":
        return new ApiError("bad_data", err.message);
      case "not_found":
        return new ApiError("not_found", err.message);
      case "deadline_exceeded":
        return new ApiError("timeout", err.message);
      case "unavailable":
        return new ApiError("unavailable", err.message);
      default:
        break;
    }
  }
  log(err);
  return new ApiError("internal", "internal error");
}
