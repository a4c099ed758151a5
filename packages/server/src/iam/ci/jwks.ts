import type { webcrypto } from "node:crypto";
import { importJWK, type JWK } from "jose";
import { CiJwksUnavailableError } from "./errors.ts";

type CryptoKey = webcrypto.CryptoKey;

export interface JwksCacheOptions {
  /** Minimum time between two fetches for one issuer, ms (an unknown kid cannot force a fetch storm). */
  readonly cooldownMs: number;
  /** A set older than this is refetched on the next lookup (after the cooldown), ms. */
  readonly maxAgeMs: number;
  readonly fetchTimeoutMs: number;
  readonly now: () => number;
  readonly fetch?: typeof globalThis.fetch;
}

interface Entry {
  keys: Map<string, CryptoKey>;
  /** When `keys` was fetched successfully; 0 when never. */
  fetchedAt: number;
  /** When the last fetch started, successful or not. */
  attemptAt: number;
  inflight?: Promise<void>;
}

/**
 * RS256 verification keys per issuer, by kid. Discovery (`/.well-known/openid-configuration`) gives the
 * JWKS URL, which must share the issuer's origin. A failed refresh keeps the last good set.
 */
export class JwksCache {
  private readonly entries = new Map<string, Entry>();
  private readonly fetchFn: typeof globalThis.fetch;

  constructor(private readonly opts: JwksCacheOptions) {
    this.fetchFn = opts.fetch ?? globalThis.fetch;
  }

  /** The key for `kid`, or undefined when the issuer does not publish it (after a refetch if allowed). */
  async key(issuer: string, kid: string): Promise<CryptoKey | undefined> {
    let e = this.entries.get(issuer);
    if (!e) {
      e = { keys: new Map(), fetchedAt: 0, attemptAt: Number.NEGATIVE_INFINITY };
      this.entries.set(issuer, e);
    }
    const now = this.opts.now();
    const fresh = e.fetchedAt > 0 && now - e.fetchedAt < this.opts.maxAgeMs;
    if (e.keys.has(kid) && fresh) return e.keys.get(kid);
    if (now - e.attemptAt >= this.opts.cooldownMs || e.inflight) {
      await this.refresh(issuer, e);
    }
    if (e.fetchedAt === 0) throw new CiJwksUnavailableError(issuer);
    return e.keys.get(kid);
  }

  private refresh(issuer: string, e: Entry): Promise<void> {
    if (!e.inflight) {
      e.attemptAt = this.opts.now();
      e.inflight = this.load(issuer)
        .then((keys) => {
          e.keys = keys;
          e.fetchedAt = this.opts.now();
        })
        .catch(() => {
          // Keep the last good set; the cooldown bounds how often a broken issuer is retried.
        })
        .finally(() => {
          e.inflight = undefined;
        });
    }
    return e.inflight;
  }

  private async getJson(url: string): Promise<unknown> {
    const res = await this.fetchFn(url, {
      signal: AbortSignal.timeout(this.opts.fetchTimeoutMs),
      headers: { accept: "application/json" },
      redirect: "error",
    });
    if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
    return res.json();
  }

  private async load(issuer: string): Promise<Map<string, CryptoKey>> {
    const disco = (await this.getJson(`${issuer}/.well-known/openid-configuration`)) as {
      issuer?: unknown;
      jwks_uri?: unknown;
    };
    if (disco.issuer !== issuer || typeof disco.jwks_uri !== "string") {
      throw new Error(`${issuer}: discovery document names another issuer or no jwks_uri`);
    }
    if (new URL(disco.jwks_uri).origin !== new URL(issuer).origin) {
      throw new Error(`${issuer}: jwks_uri is on another origin`);
    }
    const jwks = (await this.getJson(disco.jwks_uri)) as { keys?: unknown };
    if (!Array.isArray(jwks.keys)) throw new Error(`${issuer}: JWKS has no keys array`);
    const keys = new Map<string, CryptoKey>();
    for (const k of jwks.keys as JWK[]) {
      if (k?.kty !== "RSA" || typeof k.kid !== "string" || !k.kid) continue;
      if (k.alg !== undefined && k.alg !== "RS256") continue;
      if (k.use !== undefined && k.use !== "sig") continue;
      try {
        keys.set(k.kid, (await importJWK({ kty: k.kty, n: k.n, e: k.e }, "RS256")) as CryptoKey);
      } catch {
        // One malformed key does not discard the others.
      }
    }
    return keys;
  }
}
