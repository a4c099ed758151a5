import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.ts";

/**
 * An svc RPC error with what a program acts on, read from the `google.rpc.ErrorInfo` detail and the
 * `Retry-After` header (see docs/errors.md). It is a ConnectError, so `code`, `rawMessage`,
 * `findDetails()` and `ConnectError.from()` keep working.
 */
export class SvcError extends ConnectError {
  /** ConnectError's `instanceof` accepts any ConnectError-shaped value; SvcError checks its own brand. */
  readonly #svc = true;
  static override [Symbol.hasInstance](v: unknown): boolean {
    return typeof v === "object" && v !== null && #svc in v;
  }

  /** The ErrorInfo reason, e.g. "POINT_BUDGET_EXCEEDED", "PROJECT_BOUNDARY"; undefined when none. */
  readonly reason: string | undefined;
  /** The request field at fault (ErrorInfo metadata `field`), e.g. "pageSize". */
  readonly field: string | undefined;
  /** Every ErrorInfo metadata value (string-valued), e.g. {maxPoints, suggestedStepSeconds}. */
  readonly info: Readonly<Record<string, string>>;
  /** Seconds to wait before retrying, from `Retry-After` or the metadata; undefined when not given. */
  readonly retryAfterSeconds: number | undefined;

  constructor(err: ConnectError) {
    super(err.rawMessage, err.code, err.metadata, undefined, err.cause);
    // `name` stays "ConnectError": connect-es recognises its errors by name and shape, and re-wraps others.
    this.details = err.details;
    const info = err.findDetails(ErrorInfoSchema)[0];
    this.reason = info?.reason || undefined;
    this.info = { ...(info?.metadata ?? {}) };
    this.field = this.info.field || undefined;
    const header = err.metadata.get("retry-after");
    const seconds = header !== null && /^\d+$/.test(header) ? header : this.info.retryAfterSeconds;
    this.retryAfterSeconds = seconds !== undefined && /^\d+$/.test(seconds) ? Number(seconds) : undefined;
  }

  /** The error as an SvcError (itself when it already is one). */
  static fromError(err: unknown): SvcError {
    return err instanceof SvcError ? err : new SvcError(ConnectError.from(err));
  }

  /** The code's name as docs/errors.md writes it, e.g. "invalid_argument". */
  get codeName(): string {
    return Code[this.code].replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();
  }

  /**
   * True when the same request may succeed later unchanged: rate limited, unavailable, or a query
   * that ran out of time. A mutating request is retried only with its original requestId.
   */
  get retryable(): boolean {
    return (
      this.code === Code.ResourceExhausted ||
      this.code === Code.Unavailable ||
      this.code === Code.DeadlineExceeded
    );
  }
}

/** Turns every error of a call into an {@link SvcError} (the outermost interceptor of the SDK's transport). */
export const svcErrorInterceptor: Interceptor = (next) => async (req) => {
  try {
    return await next(req);
  } catch (e) {
    throw SvcError.fromError(e);
  }
};
