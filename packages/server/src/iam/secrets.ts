import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { crc32 } from "node:zlib";

/**
 * Bearer secrets: `<prefix>_<32 base62 random><6 base62 CRC32 checksum>`. The prefix names the kind so
 * secret scanners can find leaked ones; the checksum rejects typos and random strings without a
 * database read. Only the SHA-256 of a secret is stored (the secret has ~190 bits of entropy, so a
 * fast hash is enough).
 */
export type SecretKind = "personal" | "serviceAccount" | "ciToken" | "session" | "agent";

export const secretPrefixes: Readonly<Record<SecretKind, string>> = {
  personal: "svcp_",
  serviceAccount: "svcs_",
  ciToken: "svct_",
  session: "svch_",
  agent: "svca_",
};

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const BODY_LEN = 32;
const CHECK_LEN = 6;

function base62(n: number, width: number): string {
  let s = "";
  for (let i = 0; i < width; i++) {
    s = ALPHABET[n % 62] + s;
    n = Math.floor(n / 62);
  }
  return s;
}

function randomBase62(len: number): string {
  let out = "";
  while (out.length < len) {
    for (const b of randomBytes(len * 2)) {
      // Rejection sampling keeps the alphabet uniform.
      if (b < 248 && out.length < len) out += ALPHABET[b % 62];
    }
  }
  return out;
}

export function generateSecret(kind: SecretKind): string {
  const body = randomBase62(BODY_LEN);
  return `${secretPrefixes[kind]}${body}${base62(crc32(body), CHECK_LEN)}`;
}

/** The kind of a well-formed secret with a valid checksum, or undefined. */
export function parseSecret(secret: string): SecretKind | undefined {
  for (const [kind, prefix] of Object.entries(secretPrefixes) as [SecretKind, string][]) {
    if (!secret.startsWith(prefix)) continue;
    const rest = secret.slice(prefix.length);
    if (rest.length !== BODY_LEN + CHECK_LEN || !/^[0-9A-Za-z]+$/.test(rest)) return undefined;
    const body = rest.slice(0, BODY_LEN);
    const want = base62(crc32(body), CHECK_LEN);
    const got = rest.slice(BODY_LEN);
    return timingSafeEqual(Buffer.from(want), Buffer.from(got)) ? kind : undefined;
  }
  return undefined;
}

export function hashSecret(secret: string): string {
  return createHash("sha256").update(secret).digest("hex");
}

/** A non-secret hint for listings: the prefix and four characters. */
export function secretHint(secret: string): string {
  const i = secret.indexOf("_");
  return `${secret.slice(0, i + 5)}…`;
}
