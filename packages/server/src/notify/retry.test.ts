import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { defaultNotifyOptions } from "./options.ts";
import { nextAttempt } from "./retry.ts";

const S = 1000;
const H = 3_600_000;
const at = 1_000_000_000;
const far = at + 100 * H;

describe("nextAttempt", () => {
  // [what, failed attempt, random, next - at, gives up]
  const table: [string, Parameters<typeof nextAttempt>[0], number, number, boolean][] = [
    ["1st failure: 5 s", { attempts: 1, code: 500, atMs: at, expireTime: far }, 0.5, 5 * S, false],
    ["2nd failure: 5 min", { attempts: 2, code: 0, atMs: at, expireTime: far }, 0.5, 300 * S, false],
    ["6th failure: 10 h", { attempts: 6, code: 503, atMs: at, expireTime: far }, 0.5, 10 * H, false],
    [
      "7th failure: the schedule is spent",
      { attempts: 7, code: 503, atMs: at, expireTime: far },
      0.5,
      10 * H,
      true,
    ],
    ["jitter −20 %", { attempts: 1, code: 500, atMs: at, expireTime: far }, 0, 4 * S, false],
    [
      "jitter just under +20 %",
      { attempts: 1, code: 500, atMs: at, expireTime: far },
      0.999_999,
      6 * S,
      false,
    ],
    ["429: at least 60 s", { attempts: 1, code: 429, atMs: at, expireTime: far }, 0.5, 60 * S, false],
    [
      "429: a longer Retry-After wins",
      { attempts: 1, code: 429, retryAfterMs: 120 * S, atMs: at, expireTime: far },
      0.5,
      120 * S,
      false,
    ],
    [
      "429: a longer schedule wins",
      { attempts: 3, code: 429, retryAfterMs: 120 * S, atMs: at, expireTime: far },
      0.5,
      30 * 60 * S,
      false,
    ],
    [
      "Retry-After on another status is not used",
      { attempts: 1, code: 503, retryAfterMs: 120 * S, atMs: at, expireTime: far },
      0.5,
      5 * S,
      false,
    ],
    [
      "the next attempt would come after the expiry",
      { attempts: 4, code: 500, atMs: at, expireTime: at + H },
      0.5,
      2 * H,
      true,
    ],
    [
      "exactly at the expiry is still tried",
      { attempts: 1, code: 500, atMs: at, expireTime: at + 5 * S },
      0.5,
      5 * S,
      false,
    ],
  ];
  for (const [what, failed, random, delay, giveUp] of table)
    it(what, () => {
      assert.deepEqual(nextAttempt(failed, defaultNotifyOptions, random), { next: at + delay, giveUp });
    });

  it("past the end of a short schedule, its last delay", () => {
    const options = { retryDelaysMs: [1_000, 2_000], minRetryAfter429Ms: 60_000 };
    assert.deepEqual(nextAttempt({ attempts: 2, code: 0, atMs: at, expireTime: far }, options, 0.5), {
      next: at + 2_000,
      giveUp: false,
    });
    assert.deepEqual(nextAttempt({ attempts: 3, code: 0, atMs: at, expireTime: far }, options, 0.5), {
      next: at + 2_000,
      giveUp: true,
    });
  });
});
