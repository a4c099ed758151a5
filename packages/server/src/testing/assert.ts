import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "@svc/sdk/gen/google/rpc/error_details_pb";

/** Awaits a Connect call that must fail with `code` (and ErrorInfo `reason`, when given); returns the error. */
export async function rejectsWith(p: Promise<unknown>, code: Code, reason?: string): Promise<ConnectError> {
  try {
    await p;
  } catch (e) {
    const err = ConnectError.from(e);
    assert.equal(Code[err.code], Code[code], err.message);
    if (reason) assert.equal(err.findDetails(ErrorInfoSchema)[0]?.reason, reason, err.message);
    return err;
  }
  assert.fail(`expected ${Code[code]}${reason ? ` ${reason}` : ""}`);
}
