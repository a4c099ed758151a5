import { decodeProtectedHeader, type JWTPayload, errors as joseErrors, jwtVerify } from "jose";
import { CiAssertionInvalidError, CiClaimMismatchError } from "./errors.ts";
import type { JwksCache } from "./jwks.ts";

/** GitHub Actions OIDC claims svc reads (the token carries more). */
export interface GitHubClaims {
  readonly iss: string;
  readonly aud: string;
  readonly jti: string;
  /** Seconds. */
  readonly exp: number;
  readonly iat: number;
  readonly repository: string;
  readonly repository_id: string;
  readonly repository_owner: string;
  readonly repository_owner_id: string;
  readonly workflow_ref: string;
  readonly job_workflow_ref: string;
  readonly ref: string;
  readonly event_name: string;
  /** Empty when the job has no environment. */
  readonly environment: string;
}

export interface VerifyAssertionOptions {
  readonly issuer: string;
  readonly audience: string;
  readonly nowMs: number;
  readonly leewaySeconds: number;
  readonly maxLifetimeSeconds: number;
}

const MAX_ASSERTION_BYTES = 16 * 1024;

/**
 * Verifies a provider-signed identity token: RS256 only with a kid from the pinned issuer's JWKS,
 * `iss` and a single-string `aud` exactly equal, `exp`/`iat`/`jti` present, times within the leeway.
 * The jti is not consumed here (see exchange.ts).
 */
export async function verifyAssertion(
  jwks: JwksCache,
  assertion: string,
  o: VerifyAssertionOptions,
): Promise<GitHubClaims> {
  if (!assertion) throw new CiAssertionInvalidError("missing", "assertion is required");
  if (assertion.length > MAX_ASSERTION_BYTES)
    throw new CiAssertionInvalidError("too_large", "assertion is too large");
  let header: ReturnType<typeof decodeProtectedHeader>;
  try {
    header = decodeProtectedHeader(assertion);
  } catch {
    throw new CiAssertionInvalidError("malformed", "assertion is not a signed JWT");
  }
  if (header.alg !== "RS256") {
    throw new CiAssertionInvalidError(
      "alg",
      `header "alg" must be RS256, not ${String(header.alg).slice(0, 16)}`,
    );
  }
  if (typeof header.kid !== "string" || header.kid === "") {
    throw new CiAssertionInvalidError("kid", 'header "kid" is required');
  }
  const key = await jwks.key(o.issuer, header.kid);
  if (!key) {
    throw new CiAssertionInvalidError("kid", `the issuer ${o.issuer} publishes no key with this "kid"`);
  }
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(assertion, key, {
      algorithms: ["RS256"],
      currentDate: new Date(o.nowMs),
      clockTolerance: o.leewaySeconds,
      requiredClaims: ["exp", "iat", "jti", "iss", "aud"],
    }));
  } catch (err) {
    if (err instanceof joseErrors.JWTExpired)
      throw new CiAssertionInvalidError("exp", 'claim "exp" has passed');
    if (err instanceof joseErrors.JWTClaimValidationFailed) {
      throw new CiAssertionInvalidError(err.claim, `claim "${err.claim}" is missing or invalid`);
    }
    throw new CiAssertionInvalidError("signature", "the signature does not verify with the issuer's key");
  }
  const nowS = o.nowMs / 1000;
  const iat = payload.iat as number;
  const exp = payload.exp as number;
  if (iat > nowS + o.leewaySeconds) throw new CiAssertionInvalidError("iat", 'claim "iat" is in the future');
  if (exp - iat > o.maxLifetimeSeconds) {
    throw new CiAssertionInvalidError("exp", `lifetime exceeds ${o.maxLifetimeSeconds} seconds`);
  }
  if (typeof payload.jti !== "string" || !payload.jti)
    throw new CiAssertionInvalidError("jti", 'claim "jti" is required');
  if (payload.iss !== o.issuer) throw new CiClaimMismatchError("iss", o.issuer);
  // An array audience is refused even when it contains ours: a token meant for several parties is
  // not a token meant for us.
  if (typeof payload.aud !== "string" || payload.aud !== o.audience)
    throw new CiClaimMismatchError("aud", o.audience);
  const str = (name: string, required: boolean): string => {
    const v = payload[name];
    if (v === undefined && !required) return "";
    if (typeof v !== "string" || (required && v === "")) {
      throw new CiAssertionInvalidError(name, `claim "${name}" is missing`);
    }
    return v;
  };
  return {
    iss: payload.iss,
    aud: payload.aud,
    jti: payload.jti,
    exp,
    iat,
    repository: str("repository", true),
    repository_id: str("repository_id", true),
    repository_owner: str("repository_owner", true),
    repository_owner_id: str("repository_owner_id", true),
    workflow_ref: str("workflow_ref", true),
    job_workflow_ref: str("job_workflow_ref", false),
    ref: str("ref", false),
    event_name: str("event_name", true),
    environment: str("environment", false),
  };
}
