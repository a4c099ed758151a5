/**
 * A complete svc webhook receiver (docs/webhooks.md): Node's http server, the raw body bounded to 1 MiB,
 * verifyWebhook, and durable de-duplication on the DeliveryID in a SQLite inbox. It answers 2xx as soon as the
 * delivery is on disk; the work runs afterwards, from the inbox, once per DeliveryID.
 *
 *   WEBHOOK_SECRETS="whsec_…" PORT=3000 WEBHOOK_INBOX=./webhook-inbox.sqlite npx tsx docs/examples/webhook-receiver.ts
 *
 * During a rotation overlap put both secrets in WEBHOOK_SECRETS (space-separated). svc only sends to HTTPS
 * endpoints: run this behind your TLS-terminating proxy, which must pass the body and headers through unchanged,
 * or give it a certificate with TLS_CERT and TLS_KEY (PEM files; `npm start`'s demo trusts its own, in
 * .data/demo-tls/, on 127.0.0.1: README.md's "First five minutes").
 */
import { readFileSync, realpathSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { pathToFileURL } from "node:url";
import {
  MAX_WEBHOOK_BODY_BYTES,
  readRawBody,
  type VerifiedWebhook,
  verifyWebhook,
  WebhookVerificationError,
} from "@svc/sdk";
import Database from "better-sqlite3";

export interface ReceiverOptions {
  /** The destination's active secrets (both of them during a rotation overlap). */
  readonly secrets: readonly string[];
  /** The SQLite file that holds the inbox. */
  readonly dbPath: string;
  /**
   * Your work for one delivery. Runs after the 2xx, once per DeliveryID; if it throws (or the process dies
   * before it finishes) it runs again later, so keep its effects idempotent too.
   */
  readonly handle: (payload: unknown, deliveryId: string) => Promise<void> | void;
  /** Clock for verifyWebhook's five-minute window, Unix ms (tests pass their own). */
  readonly now?: () => number;
  /** Where refusals and failures are reported. Default console. */
  readonly log?: Pick<Console, "warn" | "error">;
}

export interface Receiver {
  readonly server: Server;
  /** Resolves when no delivery is left unprocessed in the inbox (for tests and graceful shutdown). */
  drain(): Promise<void>;
  close(): Promise<void>;
}

export function createReceiver(opts: ReceiverOptions): Receiver {
  const log = opts.log ?? console;
  const db = new Database(opts.dbPath);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL"); // the 2xx promises the delivery survives a power cut
  db.exec(`CREATE TABLE IF NOT EXISTS webhook_inbox (
    delivery_id  TEXT PRIMARY KEY,
    attempt_id   TEXT NOT NULL,
    received_at  INTEGER NOT NULL,
    body         TEXT NOT NULL,
    processed_at INTEGER
  )`);
  // The primary key is the de-duplication: a retry or a replay of a stored DeliveryID changes nothing.
  const insert = db.prepare(
    "INSERT INTO webhook_inbox (delivery_id, attempt_id, received_at, body) VALUES (?, ?, ?, ?) " +
      "ON CONFLICT (delivery_id) DO NOTHING",
  );
  const pending = db.prepare<[], { delivery_id: string; body: string }>(
    "SELECT delivery_id, body FROM webhook_inbox WHERE processed_at IS NULL ORDER BY received_at",
  );
  const markDone = db.prepare("UPDATE webhook_inbox SET processed_at = ? WHERE delivery_id = ?");

  let draining: Promise<void> | undefined;
  let again = false;
  function drain(): Promise<void> {
    if (draining) {
      again = true;
      return draining;
    }
    draining = (async () => {
      do {
        again = false;
        for (const row of pending.all()) {
          try {
            await opts.handle(JSON.parse(row.body), row.delivery_id);
            markDone.run(Date.now(), row.delivery_id);
          } catch (err) {
            log.error(`delivery ${row.delivery_id} failed, will retry: ${(err as Error).message}`);
          }
        }
      } while (again);
    })().finally(() => {
      draining = undefined;
    });
    return draining;
  }
  const retryTimer = setInterval(() => void drain(), 60_000).unref();
  void drain(); // whatever a previous run stored but did not finish

  function reply(res: ServerResponse, status: number, body: object, close = false): void {
    res.writeHead(status, { "content-type": "application/json", ...(close ? { connection: "close" } : {}) });
    res.end(JSON.stringify(body));
  }

  async function onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== "POST") return reply(res, 405, { error: "POST only" });
    // Refuse a declared oversize body without reading it; readRawBody bounds chunked or lying senders.
    if (Number(req.headers["content-length"]) > MAX_WEBHOOK_BODY_BYTES)
      return reply(res, 413, { error: "body_too_large" }, true);
    let body: Buffer;
    try {
      body = await readRawBody(req, { maxBytes: MAX_WEBHOOK_BODY_BYTES });
    } catch (err) {
      // Too large: readRawBody stopped reading; the response closes the connection. Otherwise the client left.
      if (err instanceof WebhookVerificationError) return reply(res, 413, { error: err.reason }, true);
      res.destroy();
      return;
    }
    let delivery: VerifiedWebhook;
    try {
      delivery = verifyWebhook(body, req.headers, opts.secrets, { now: opts.now });
    } catch (err) {
      if (!(err instanceof WebhookVerificationError)) throw err;
      log.warn(`refused a webhook: ${err.message}`);
      return reply(res, err.reason === "body_too_large" ? 413 : 400, { error: err.reason });
    }
    const { changes } = insert.run(
      delivery.deliveryId,
      delivery.attemptId,
      Date.now(),
      body.toString("utf8"),
    );
    // 2xx for a duplicate too: svc stops retrying, and the stored copy is (or was) processed.
    reply(res, 200, { deliveryId: delivery.deliveryId, duplicate: changes === 0 });
    if (changes === 1) setImmediate(() => void drain());
  }

  const server = createServer((req, res) => {
    onRequest(req, res).catch((err) => {
      log.error(err);
      if (!res.headersSent) reply(res, 500, { error: "internal" });
    });
  });
  return {
    server,
    drain,
    async close() {
      clearInterval(retryTimer);
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await draining;
      db.close();
    },
  };
}

// Run as a program (not imported); through a symlinked path too, as import.meta.url is the real path.
if (process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  const secrets = (process.env.WEBHOOK_SECRETS ?? "").split(/[\s,]+/).filter(Boolean);
  if (secrets.length === 0) throw new Error("set WEBHOOK_SECRETS to the destination's whsec_… secret(s)");
  const receiver = createReceiver({
    secrets,
    dbPath: process.env.WEBHOOK_INBOX ?? "webhook-inbox.sqlite",
    handle: (payload, deliveryId) => {
      const p = payload as { type?: string; summary?: string };
      console.log(`${deliveryId} ${p.type}: ${p.summary}`);
    },
  });
  const port = Number(process.env.PORT ?? 3000);
  // HTTPS in front of the same handler when given a certificate, else plain HTTP behind your proxy.
  const { TLS_CERT, TLS_KEY } = process.env;
  const server =
    TLS_CERT && TLS_KEY
      ? createHttpsServer({ cert: readFileSync(TLS_CERT), key: readFileSync(TLS_KEY) }, (req, res) =>
          receiver.server.emit("request", req, res),
        )
      : receiver.server;
  server.listen(port, () => console.log(`listening on :${port} (${TLS_CERT ? "HTTPS" : "HTTP"})`));
  process.on("SIGTERM", () => {
    server.close();
    void receiver.close();
  });
}
