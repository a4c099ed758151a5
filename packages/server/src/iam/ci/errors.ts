import { SvcError } from "../../errors.ts";

/**
 * Typed denials of the CI trust and exchange flow. Messages name the claim and the expected value;
 * they never contain the assertion, the pairing code or an observed value from an unverified token.
 */

/** A verified claim differs from what the trust approved. */
export class CiClaimMismatchError extends SvcError {
  constructor(claim: string, expected: string, hint = "") {
    super(
      "permission_denied",
      `assertion claim "${claim}" does not match the trust: expected ${expected}${hint}`,
      {
        reason: "CI_CLAIM_MISMATCH",
        metadata: { claim, expected },
      },
    );
    this.name = "CiClaimMismatchError";
  }
}

/** The workflow was triggered by an event the trust can never accept (pull requests, etc.). */
export class CiEventRejectedError extends SvcError {
  constructor(accepted: readonly string[]) {
    super(
      "permission_denied",
      `assertion claim "event_name" is not accepted: expected one of ${accepted.join(", ")}; pull-request events are always refused`,
      { reason: "CI_EVENT_REJECTED", metadata: { claim: "event_name", expected: accepted.join(",") } },
    );
    this.name = "CiEventRejectedError";
  }
}

/** The assertion itself is unusable: bad signature, algorithm, key id, times or missing claims. */
export class CiAssertionInvalidError extends SvcError {
  constructor(problem: string, message: string) {
    super("unauthenticated", `the CI assertion is not valid: ${message}`, {
      reason: "CI_ASSERTION_INVALID",
      metadata: { problem },
    });
    this.name = "CiAssertionInvalidError";
  }
}

/** Assertion problems found before or by the signature check (see {@link CiUnverifiedExchangeError}). */
export const UNVERIFIED_PROBLEMS: ReadonlySet<string> = new Set([
  "missing",
  "too_large",
  "malformed",
  "alg",
  "kid",
  "signature",
]);

/**
 * The exchange's one answer for an unknown (or deleted) trust name and for an assertion whose
 * signature has not verified: code, reason, metadata and message are the same, so the exchange cannot
 * be used to probe which trust names exist. Detailed problems are given only once the signature holds.
 */
export class CiUnverifiedExchangeError extends CiAssertionInvalidError {
  constructor() {
    super(
      "unverified",
      "it could not be verified for this trust name; check the trust name, request the identity token with the connection's audience just before the exchange, and send it unchanged",
    );
    this.name = "CiUnverifiedExchangeError";
  }
}

/** The assertion's jti was used before (a replay, or a second exchange of one token). */
export class CiAssertionReplayedError extends SvcError {
  constructor() {
    super(
      "unauthenticated",
      'the CI assertion was already used (claim "jti"); request a new identity token for every exchange',
      { reason: "CI_ASSERTION_REPLAYED", metadata: { claim: "jti" } },
    );
    this.name = "CiAssertionReplayedError";
  }
}

/** Unknown setup id or wrong pairing code (not told apart). */
export class CiPairingInvalidError extends SvcError {
  constructor() {
    super("permission_denied", "the setup id or the pairing code (SVC_SETUP_CODE) is wrong", {
      reason: "CI_PAIRING_INVALID",
    });
    this.name = "CiPairingInvalidError";
  }
}

export class CiSetupExpiredError extends SvcError {
  constructor(expireTimeMs: number) {
    super(
      "failed_precondition",
      "the 30-minute verification window has ended; start a new setup in the console",
      { reason: "CI_SETUP_EXPIRED", metadata: { expireTimeUnix: String(Math.floor(expireTimeMs / 1000)) } },
    );
    this.name = "CiSetupExpiredError";
  }
}

export class CiTrustDisabledError extends SvcError {
  constructor() {
    super("permission_denied", "the CI trust connection is disabled", { reason: "CI_TRUST_DISABLED" });
    this.name = "CiTrustDisabledError";
  }
}

/** The trust is not in the state the operation needs (e.g. exchange before approval). */
export class CiTrustStateError extends SvcError {
  constructor(state: string, message: string) {
    super("failed_precondition", message, { reason: "CI_TRUST_STATE", metadata: { state } });
    this.name = "CiTrustStateError";
  }
}

/** The issuer's keys could not be fetched and none are cached. */
export class CiJwksUnavailableError extends SvcError {
  constructor(issuer: string) {
    super("unavailable", `the signing keys of ${issuer} could not be fetched; retry later`);
    this.name = "CiJwksUnavailableError";
  }
}
