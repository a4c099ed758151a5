/**
 * Domain errors. Domain folders throw these (or their own subclasses); only the protocol edges
 * (http/errors.ts for Connect, promapi/ for the Prometheus API) turn them into wire errors.
 * Messages never contain a secret, token or assertion.
 */
export type ErrorCode =
  | "invalid_argument"
  | "not_found"
  | "already_exists"
  | "permission_denied"
  | "unauthenticated"
  | "failed_precondition"
  | "aborted"
  | "resource_exhausted"
  | "deadline_exceeded"
  | "unimplemented"
  | "unavailable"
  | "internal";

/**
 * The HTTP status of each code, as the Connect protocol maps it (its `codeToHttpStatus`; a test
 * compares): for the HTTP routes that answer svc's codes without loading Connect (the console's).
 */
export const HTTP_STATUS_OF_CODE: Readonly<Record<ErrorCode, number>> = {
  invalid_argument: 400,
  not_found: 404,
  already_exists: 409,
  permission_denied: 403,
  unauthenticated: 401,
  failed_precondition: 400,
  aborted: 409,
  resource_exhausted: 429,
  deadline_exceeded: 504,
  unimplemented: 501,
  unavailable: 503,
  internal: 500,
};

export interface SvcErrorOptions {
  /** Machine-readable reason (see http/reasons.ts), e.g. POINT_BUDGET_EXCEEDED. */
  readonly reason?: string;
  /** Values a client can act on; string-valued as in google.rpc.ErrorInfo. */
  readonly metadata?: Readonly<Record<string, string>>;
  /** Seconds a rate-limited client should wait. */
  readonly retryAfterSeconds?: number;
  readonly cause?: unknown;
}

export class SvcError extends Error {
  readonly code: ErrorCode;
  readonly reason: string | undefined;
  readonly metadata: Readonly<Record<string, string>>;
  readonly retryAfterSeconds: number | undefined;

  constructor(code: ErrorCode, message: string, opts: SvcErrorOptions = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = "SvcError";
    this.code = code;
    this.reason = opts.reason;
    this.metadata = opts.metadata ?? {};
    this.retryAfterSeconds = opts.retryAfterSeconds;
  }
}

/** A request field is missing or wrong: names the field and why. */
export function invalidArgument(
  field: string,
  why: string,
  opts: { reason?: string; metadata?: Record<string, string> } = {},
): SvcError {
  return new SvcError("invalid_argument", `${field}: ${why}`, {
    reason: opts.reason ?? "INVALID_FIELD",
    metadata: { field, ...opts.metadata },
  });
}

export function notFound(what: string): SvcError {
  return new SvcError("not_found", `${what} not found`, { reason: "NOT_FOUND" });
}

export type DenialReason =
  | "PROJECT_BOUNDARY"
  | "CAPABILITY"
  | "IDENTITY_DISABLED"
  | "GRANT_REMOVED"
  | "HUMAN_ONLY"
  | "OPERATOR_ONLY"
  | "CSRF_REJECTED";

export function permissionDenied(
  reason: DenialReason,
  message: string,
  metadata?: Readonly<Record<string, string>>,
): SvcError {
  return new SvcError("permission_denied", message, { reason, metadata });
}

/** CAPABILITY, naming the capability the call needs (ErrorInfo metadata `capability`). */
export function capabilityDenied(capability: string, message: string): SvcError {
  return permissionDenied("CAPABILITY", message, { capability });
}

export function unauthenticated(message: string, reason = "UNAUTHENTICATED"): SvcError {
  return new SvcError("unauthenticated", message, { reason });
}
