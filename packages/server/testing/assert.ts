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

/**
 * Polls `check` every 200 ms until it returns a value, failing after `ms` (a deadline far beyond what a
 * slow machine needs: tests wait for outcomes, never for a fixed time).
 */
export async function waitFor<T>(what: string, ms: number, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) assert.fail(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
