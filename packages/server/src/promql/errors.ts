/**
 * Typed errors of the PromQL package. Callers map them to wire errors at one edge
 * (promapi / http); nothing here knows about HTTP.
 */

/** The expression does not parse or does not type-check. `position` is a 0-based UTF-16 offset. */
export class PromQLParseError extends Error {
  override readonly name = "PromQLParseError";
  constructor(
    message: string,
    readonly position: { readonly start: number; readonly end: number },
  ) {
    super(message);
  }
}

/** A syntax tree node the package does not understand; callers answer 400 (fail closed). */
export class UnsupportedNodeError extends Error {
  override readonly name = "UnsupportedNodeError";
  constructor(readonly nodeKind: string) {
    super(`unsupported PromQL node: ${nodeKind}`);
  }
}

/** Evaluation failed for a reason inherent to the query and data (Prometheus' "execution" errors). */
export class QueryEvalError extends Error {
  override readonly name = "QueryEvalError";
}

/** The query ran past its deadline or its AbortSignal fired. */
export class QueryTimeoutError extends Error {
  override readonly name = "QueryTimeoutError";
  constructor(message = "query timed out in expression evaluation") {
    super(message);
  }
}

/** The query would hold more samples in memory than `maxSamples`. */
export class TooManySamplesError extends Error {
  override readonly name = "TooManySamplesError";
  /**
   * `loaded`: the samples the query had asked for when it was stopped (more than `limit`; it
   * would have wanted at least as many), or undefined where unknown.
   */
  constructor(
    readonly limit: number,
    readonly loaded?: number,
  ) {
    super("query processing would load too many samples into memory in query execution");
  }
}

/** A range query would return more points per series than allowed. */
export class PointBudgetError extends Error {
  override readonly name = "PointBudgetError";
  constructor(
    readonly requestedPoints: number,
    readonly maxPoints: number,
  ) {
    super(
      `exceeded maximum resolution of ${maxPoints} points per timeseries. Try decreasing the query resolution (?step=XX)`,
    );
  }
}

/**
 * Every query worker the project may use is busy and none came free within the wait: a load
 * refusal (HTTP 429 with Retry-After), never a server error.
 */
export class QueryOverloadError extends Error {
  override readonly name = "QueryOverloadError";
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super(message);
  }
}

/** An answer would be larger than the API's limit (`maxResponseBytes`); Prometheus' "execution" error. */
export class ResponseTooLargeError extends Error {
  override readonly name = "ResponseTooLargeError";
  constructor(
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(
      `response of more than ${limit.toLocaleString("en-US")} bytes (at least ${bytes.toLocaleString("en-US")}) exceeds the limit; narrow the selector, the range or raise the step`,
    );
  }
}
