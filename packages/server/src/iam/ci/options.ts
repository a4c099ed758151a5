/**
 * Options of the CI trust and exchange component, with their defaults, validated once by
 * {@link resolveCiOptions}. The app fills overrides from the environment (config.ts).
 */
export interface CiOptions {
  /** Issuer pinned on new trusts when the setup names none. Default GitHub's. */
  readonly defaultIssuer: string;
  /** Issuers a setup may pin (GitHub Enterprise Server, tests). Always contains defaultIssuer. */
  readonly allowedIssuers: readonly string[];
  /** Minimum time between two JWKS fetches of one issuer, ms. Default 60 000. */
  readonly jwksCooldownMs: number;
  /** Age after which a cached JWKS is refreshed in the background of the next lookup, ms. Default 1 h. */
  readonly jwksMaxAgeMs: number;
  /** Timeout of one discovery or JWKS request, ms. Default 5000. */
  readonly fetchTimeoutMs: number;
  /** Clock skew tolerated on exp / iat / nbf, seconds. Default 60. */
  readonly leewaySeconds: number;
  /** Longest accepted assertion lifetime (exp - iat), seconds. Default 1 h (GitHub issues ~5 min+). */
  readonly maxAssertionLifetimeSeconds: number;
  /** How long a used jti is remembered past the assertion's exp, ms. Default 24 h. */
  readonly jtiRetentionMs: number;
  /** Lifetime of an exchanged token, ms. Spec: 15 minutes. */
  readonly tokenTtlMs: number;
  /** Verification window of a setup, ms. Spec: 30 minutes. */
  readonly setupTtlMs: number;
  /** Token bucket per trust (exchange) or setup (verification): burst size and refill per minute. */
  readonly perTrustBurst: number;
  readonly perTrustPerMinute: number;
  /** Token bucket per source address across all trusts. */
  readonly perSourceBurst: number;
  readonly perSourcePerMinute: number;
}

export const GITHUB_ISSUER = "https://token.actions.githubusercontent.com";

export const defaultCiOptions: CiOptions = {
  defaultIssuer: GITHUB_ISSUER,
  allowedIssuers: [GITHUB_ISSUER],
  jwksCooldownMs: 60_000,
  jwksMaxAgeMs: 3_600_000,
  fetchTimeoutMs: 5_000,
  leewaySeconds: 60,
  maxAssertionLifetimeSeconds: 3_600,
  jtiRetentionMs: 24 * 3_600_000,
  tokenTtlMs: 15 * 60_000,
  setupTtlMs: 30 * 60_000,
  perTrustBurst: 10,
  perTrustPerMinute: 10,
  perSourceBurst: 60,
  perSourcePerMinute: 60,
};

/**
 * An issuer is an https origin with an optional path and no trailing slash; plain http only on
 * loopback (tests).
 */
export function validateIssuer(issuer: string): string {
  let u: URL;
  try {
    u = new URL(issuer);
  } catch {
    throw new Error(`CI issuer "${issuer}" is not a URL`);
  }
  const loopback = u.hostname === "127.0.0.1" || u.hostname === "localhost" || u.hostname === "[::1]";
  if (u.protocol !== "https:" && !(u.protocol === "http:" && loopback)) {
    throw new Error(`CI issuer "${issuer}" must use https`);
  }
  if (u.search || u.hash || issuer.endsWith("/")) {
    throw new Error(`CI issuer "${issuer}" must have no query, fragment or trailing slash`);
  }
  return issuer;
}

export function resolveCiOptions(overrides: Partial<CiOptions> = {}): CiOptions {
  const o = { ...defaultCiOptions, ...overrides };
  validateIssuer(o.defaultIssuer);
  const allowed = [...new Set([o.defaultIssuer, ...(overrides.allowedIssuers ?? [])])];
  for (const i of allowed) validateIssuer(i);
  for (const k of [
    "jwksCooldownMs",
    "jwksMaxAgeMs",
    "fetchTimeoutMs",
    "leewaySeconds",
    "maxAssertionLifetimeSeconds",
    "jtiRetentionMs",
    "tokenTtlMs",
    "setupTtlMs",
    "perTrustBurst",
    "perTrustPerMinute",
    "perSourceBurst",
    "perSourcePerMinute",
  ] as const) {
    if (!Number.isFinite(o[k]) || o[k] < 0) throw new Error(`CI option ${k} must be a non-negative number`);
  }
  if (o.leewaySeconds > 300) throw new Error("CI option leewaySeconds must be at most 300");
  return Object.freeze({ ...o, allowedIssuers: Object.freeze(allowed) });
}
