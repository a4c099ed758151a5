import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto";

/**
 * Secrets at rest (webhook secrets, chat webhook URLs): AES-256-GCM under a key derived from
 * SVC_SECRET_KEY, so a copy of the database alone reveals none of them. Format `v1:<base64 iv|tag|ct>`.
 */
export interface Sealer {
  seal(plain: string): string;
  open(sealed: string): string;
}

export function createSealer(secretKey: Buffer): Sealer {
  const key = Buffer.from(hkdfSync("sha256", secretKey, Buffer.alloc(0), "svc destination seal v1", 32));
  return {
    seal(plain) {
      const iv = randomBytes(12);
      const c = createCipheriv("aes-256-gcm", key, iv);
      const ct = Buffer.concat([c.update(plain, "utf8"), c.final()]);
      return `v1:${Buffer.concat([iv, c.getAuthTag(), ct]).toString("base64")}`;
    },
    open(sealed) {
      if (!sealed.startsWith("v1:")) throw new Error("unknown sealed format");
      const raw = Buffer.from(sealed.slice(3), "base64");
      const d = createDecipheriv("aes-256-gcm", key, raw.subarray(0, 12));
      d.setAuthTag(raw.subarray(12, 28));
      return Buffer.concat([d.update(raw.subarray(28)), d.final()]).toString("utf8");
    },
  };
}
