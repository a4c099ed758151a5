import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import type { IncomingHttpHeaders } from "node:http";
import { createServer, type Server } from "node:https";
import { type AddressInfo, createServer as createNetServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeSelfSignedCertificate } from "../src/net/self-signed.ts";

/** A self-signed certificate for 127.0.0.1 / localhost, made now with openssl. */
export function makeCertificate(): { key: string; cert: string } {
  const dir = mkdtempSync(join(tmpdir(), "svc-cert-"));
  try {
    writeSelfSignedCertificate(join(dir, "key.pem"), join(dir, "cert.pem"), {
      subject: "localhost",
      altNames: "IP:127.0.0.1,DNS:localhost",
      days: 1,
    });
    return {
      key: readFileSync(join(dir, "key.pem"), "utf8"),
      cert: readFileSync(join(dir, "cert.pem"), "utf8"),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface Received {
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
  /** The sender's port (tells which process sent it). */
  readonly remotePort: number;
  /** When its body had arrived (Date.now()): tests measure how long a retry took. */
  readonly atMs: number;
}

/** An answer; `hold` keeps the request waiting until it settles (a receiver that does not answer yet). */
export interface PeerAnswer {
  readonly status: number;
  readonly headers?: Record<string, string>;
  /** The response body (none by default). */
  readonly body?: string;
  readonly delayMs?: number;
  readonly hold?: Promise<unknown>;
}

/** An HTTPS receiver on 127.0.0.1 that records requests and answers what `respond` says (default 204). */
export interface HttpsPeer {
  readonly url: string;
  readonly received: Received[];
  respond: (r: Received) => PeerAnswer;
  close(): Promise<void>;
}

export async function startHttpsPeer(tls: { key: string; cert: string }): Promise<HttpsPeer> {
  const peer = {
    received: [] as Received[],
    respond: (_r: Received): PeerAnswer => ({ status: 204 }),
  };
  const server: Server = createServer(tls, (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const r = {
        path: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks),
        remotePort: req.socket.remotePort ?? 0,
        atMs: Date.now(),
      };
      peer.received.push(r);
      const a = peer.respond(r);
      const answer = () => {
        if (res.destroyed) return;
        res.writeHead(a.status, a.headers ?? {});
        res.end(a.body);
      };
      void Promise.resolve(a.hold).finally(() => setTimeout(answer, a.delayMs ?? 0));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return Object.assign(peer, {
    url: `https://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  });
}

/**
 * A plain TCP server on 127.0.0.1 that writes an SSH banner and closes, as an SSH daemon on a port a
 * notification may reach would: a TLS client reads the banner as a bad record.
 */
export async function startSshLikeServer(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createNetServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => {});
    socket.on("close", () => sockets.delete(socket));
    socket.end("SSH-2.0-OpenSSH_9.6p1 Debian-3\r\n");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}
