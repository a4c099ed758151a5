import type { GitHubClaims } from "./assertion.ts";
import { CiAssertionReplayedError } from "./errors.ts";
import type { CiContext } from "./trusts.ts";

/**
 * Marks the assertion's jti used, atomically: the primary key (issuer, jti) lets exactly one of
 * concurrent requests insert it. Rows live until well past the assertion's exp, so a replay inside
 * the leeway is still refused; expired rows are pruned on the way.
 */
export async function consumeJti(ctx: CiContext, c: GitHubClaims): Promise<void> {
  const now = ctx.now();
  const keepUntil = Math.max(c.exp * 1000, now) + ctx.options.jtiRetentionMs;
  const res = await ctx.db
    .insertInto("ci_assertion_jtis")
    .values({ issuer: c.iss, jti: c.jti, expire_time: keepUntil })
    .onConflict((oc) => oc.columns(["issuer", "jti"]).doNothing())
    .executeTakeFirst();
  if (Number(res.numInsertedOrUpdatedRows ?? 0n) !== 1) throw new CiAssertionReplayedError();
  await ctx.db.deleteFrom("ci_assertion_jtis").where("expire_time", "<", now).execute();
}
