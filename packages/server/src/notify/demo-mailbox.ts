import { randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { SMTPServer } from "smtp-server";
import { oneLine } from "./channels/format.ts";

/** The demo's local SMTP peer: what the app's mailer is pointed at when no SVC_SMTP_URL is configured. */
export interface DemoMailbox {
  /** `smtp://127.0.0.1:<port>`, for config.notify.smtpUrl. */
  readonly smtpUrl: string;
  /** Where each received message is written as `<time>-<id>.eml` (mode 0600). */
  readonly dir: string;
  close(): Promise<void>;
}

/** A message larger than this is refused (552); svc's emails are a few KB. */
const MAX_MESSAGE_BYTES = 1024 * 1024;

/**
 * Starts an SMTP server on 127.0.0.1 (any free port) that accepts every message without
 * authentication and writes it to `<dataDir>/demo-mail/` (0700) as an .eml file (0600). `out` prints one
 * line per message: its subject and recipients, never its body (a verification email's body holds its
 * code). Loopback only, no TLS: it is the demo's mail catcher, not a relay.
 */
export async function startDemoMailbox(dataDir: string, out: (line: string) => void): Promise<DemoMailbox> {
  const dir = join(dataDir, "demo-mail");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ["AUTH", "STARTTLS"],
    size: MAX_MESSAGE_BYTES,
    banner: "svc demo mail catcher",
    logger: false,
    onData(stream, session, done) {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => {
        if (!stream.sizeExceeded) chunks.push(c);
      });
      stream.on("error", done);
      stream.on("end", () => {
        if (stream.sizeExceeded) return done(new Error("message exceeds the demo mailbox's 1 MiB limit"));
        try {
          const raw = Buffer.concat(chunks);
          const file = `${new Date().toISOString().replace(/[:.]/g, "-")}-${randomBytes(4).toString("hex")}.eml`;
          writeFileSync(join(dir, file), raw, { mode: 0o600 });
          const to = session.envelope.rcptTo.map((r) => r.address).join(", ");
          out(`demo mailbox: "${subjectOf(raw)}" to ${to}, saved as ${join(dir, file)}`);
          done();
        } catch (err) {
          done(err instanceof Error ? err : new Error(String(err)));
        }
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.server.address() as AddressInfo;
  return {
    smtpUrl: `smtp://127.0.0.1:${port}`,
    dir,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** The Subject header of a raw message, unfolded, with RFC 2047 encoded words decoded (UTF-8). */
export function subjectOf(raw: Buffer): string {
  const head = raw
    .toString("utf8")
    .split(/\r?\n\r?\n/, 1)[0]
    .replace(/\r?\n[ \t]+/g, " ");
  const line = /^subject:[ \t]*(.*)$/im.exec(head)?.[1] ?? "";
  const decoded = line.replace(
    /=\?[^?]+\?([BbQq])\?([^?]*)\?=(?:\s+(?==\?))?/g,
    (_, encoding: string, text: string) =>
      (encoding.toUpperCase() === "B"
        ? Buffer.from(text, "base64")
        : Buffer.from(
            text
              .replace(/_/g, " ")
              .replace(/=([0-9A-Fa-f]{2})/g, (_h, h: string) => String.fromCharCode(parseInt(h, 16))),
            "latin1",
          )
      ).toString("utf8"),
  );
  return oneLine(decoded).slice(0, 200);
}
