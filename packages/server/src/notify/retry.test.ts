import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { defaultNotifyOptions } from "./options.ts";
import { nextAttempt } from "./retry.ts";

const S = 1000;
const H = 3_600_000;
const at = 1_000_000_000;

describe("nextAttempt", () => {
  /** The n-th attempt failed with `code` at `at`; the message expires `expireIn` ms later. */
  const failed = (attempts: number, code: number, o: { retryAfterMs?: number; expireIn?: number } = {}) => ({
    attempts,
    code,
    retryAfterMs: o.retryAfterMs,
    atMs: at,
    expireTime: at + (o.expireIn ?? 100 * H),
  });
  // [what, the failed attempt, random, next - at, gives up]
  const table: [string, Parameters<typeof nextAttempt>[0], number, number, boolean][] = [
    ["1st failure: 5 s", failed(1, 500), 0.5, 5 * S, false],
    ["2nd failure: 5 min", failed(2, 0), 0.5, 300 * S, false],
    ["6th failure: 10 h", failed(6, 503), 0.5, 10 * H, false],
    ["7th failure: the schedule is spent", failed(7, 503), 0.5, 10 * H, true],
    ["jitter −20 %", failed(1, 500), 0, 4 * S, false],
    ["jitter just under +20 %", failed(1, 500), 0.999_999, 6 * S, false],
    ["429: at least 60 s", failed(1, 429), 0.5, 60 * S, false],
    ["429: a longer Retry-After wins", failed(1, 429, { retryAfterMs: 120 * S }), 0.5, 120 * S, false],
    ["429: a longer schedule wins", failed(3, 429, { retryAfterMs: 120 * S }), 0.5, 30 * 60 * S, false],
    [
      "Retry-After on another status is not used",
      failed(1, 503, { retryAfterMs: 120 * S }),
      0.5,
      5 * S,
      false,
    ],
    ["the next attempt would come after the expiry", failed(4, 500, { expireIn: H }), 0.5, 2 * H, true],
    ["exactly at the expiry is still tried", failed(1, 500, { expireIn: 5 * S }), 0.5, 5 * S, false],
  ];
  for (const [what, failed, random, delay, giveUp] of table)
    it(what, () => {
      assert.deepEqual(nextAttempt(failed, defaultNotifyOptions, random), { next: at + delay, giveUp });
    });

  it("past the end of a short schedule, its last delay", () => {
    const options = { retryDelaysMs: [1_000, 2_000], minRetryAfter429Ms: 60_000 };
    assert.deepEqual(nextAttempt(failed(2, 0), options, 0.5), { next: at + 2_000, giveUp: false });
    assert.deepEqual(nextAttempt(failed(3, 0), options, 0.5), { next: at + 2_000, giveUp: true });
  });
});
