import { SvcError } from "../errors.ts";
import type { RateLimiterFactory } from "./ci/ratelimit.ts";

/** Failed sign-ins allowed per client address at once, then one every 10 s. */
const BY_ADDRESS = { burst: 20, perMinute: 6 };
/** Failed sign-ins allowed per account (email) at once, then one every 10 s. */
const BY_ACCOUNT = { burst: 10, perMinute: 6 };

/**
 * The one limit on password guessing, for the API's SessionService/Login and the console's sign-in
 * alike (docs/api.md, "Sign-in limits"): failed attempts per client address and per account. Made
 * once per process from the limits' factory (cluster/shared-limits.ts), so both paths take from the
 * same buckets, held in PostgreSQL across replicas.
 */
export interface SignInLimits {
  /**
   * Runs one sign-in attempt under both limits. While either bucket is empty the attempt is refused
   * (resource_exhausted, RATE_LIMITED, Retry-After) before any password is checked, so the right
   * password waits too. Each attempt takes a token from both before it runs (concurrent guesses
   * cannot overtake the limit); a sign-in that succeeds gives them back, so only failures count.
   */
  attempt<T>(address: string, email: string, signIn: () => Promise<T>): Promise<T>;
}

export function createSignInLimits(buckets: RateLimiterFactory): SignInLimits {
  const byAddress = buckets("signin.address", BY_ADDRESS);
  const byAccount = buckets("signin.account", BY_ACCOUNT);
  return {
    async attempt<T>(address: string, email: string, signIn: () => Promise<T>): Promise<T> {
      const account = email.trim().toLowerCase();
      await byAddress.take(address, "sign-in attempts from this address");
      try {
        await byAccount.take(account, "sign-in attempts for this account");
      } catch (err) {
        // Refused before any password was checked: no guess, so the address keeps its token.
        await byAddress.giveBack(address);
        throw err;
      }
      let result: T;
      try {
        result = await signIn();
      } catch (err) {
        // A request the check refused as malformed (an empty field) guessed nothing.
        if (err instanceof SvcError && err.code === "invalid_argument") await giveBack();
        throw err;
      }
      await giveBack();
      return result;

      async function giveBack() {
        await byAddress.giveBack(address);
        await byAccount.giveBack(account);
      }
    },
  };
}
