import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "@svc/sdk/gen/google/rpc/error_details_pb";
import type { Logger } from "pino";
import { type ErrorCode, SvcError } from "../errors.ts";

const codes: Record<ErrorCode, Code> = {
  invalid_argument: Code.InvalidArgument,
  not_found: Code.NotFound,
  already_exists: Code.AlreadyExists,
  permission_denied: Code.PermissionDenied,
  unauthenticated: Code.Unauthenticated,
  failed_precondition: Code.FailedPrecondition,
  aborted: Code.Aborted,
  resource_exhausted: Code.ResourceExhausted,
  deadline_exceeded: Code.DeadlineExceeded,
  unimplemented: Code.Unimplemented,
  unavailable: Code.Unavailable,
  internal: Code.Internal,
};

/**
 * The one place where thrown values become Connect errors. Domain errors keep their message and gain
 * an ErrorInfo detail; Connect errors raised by the framework (decode failures, unknown fields) pass
 * through; anything else is logged with its cause and sent as a bare `internal` error.
 */
export function toConnectError(err: unknown, log: Logger, method: string): ConnectError {
  if (err instanceof SvcError) {
    const headers = new Headers();
    if (err.retryAfterSeconds !== undefined)
      headers.set("Retry-After", String(Math.ceil(err.retryAfterSeconds)));
    const details = err.reason
      ? [
          {
            desc: ErrorInfoSchema,
            value: { reason: err.reason, domain: "svc", metadata: { ...err.metadata } },
          },
        ]
      : [];
    const message = err.reason ? `${err.message} [${err.reason}]` : err.message;
    return new ConnectError(message, codes[err.code], headers, details);
  }
  if (err instanceof ConnectError) {
    if (err.code === Code.Internal || err.code === Code.Unknown) {
      log.error({ err, method }, "rpc failed");
      return new ConnectError("internal error", Code.Internal);
    }
    return err;
  }
  log.error({ err, method }, "rpc failed");
  return new ConnectError("internal error", Code.Internal);
}
