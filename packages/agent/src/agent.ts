import {
  encodeWriteRequest,
  httpPost,
  type PushResult,
  pushRemoteWrite,
  RemoteWritePushError,
  SendLoop,
  Spool,
  snappyCompress,
  snappyDecompress,
} from "@svc/remotewrite";
import { type AgentOptions, writeUrl } from "./options.ts";
import { collect } from "./procfs/collect.ts";

/** Counters since start; batches are one collection each. */
export interface AgentStats {
  collected: number;
  sentBatches: number;
  /** Batches svc answered with per-sample refusals (the rest stored), or could not decode: dropped. */
  rejectedBatches: number;
  /** Failed pushes that will be retried (network, timeout, any answer but 2xx and svc's final 400s). */
  retries: number;
  spoolPending: number;
  spoolBytes: number;
  droppedOverflow: number;
  droppedExpired: number;
  truncatedTails: number;
}

export interface Agent {
  /** Collects now and then every `intervalMs`; starts sending (and any backlog left from before). */
  start(): void;
  /** Takes one collection now and queues it; returns its timestamp (ms). */
  collectNow(): number;
  /** Resolves when the spool is empty or the next push is waiting on a retry delay. */
  flush(): Promise<void>;
  /** Stops timers, waits for an in-flight push and closes the spool. Queued batches stay on disk. */
  stop(): Promise<void>;
  stats(): AgentStats;
}

/** Creates the guest agent. The spool directory is opened (and recovered) immediately. */
export function createAgent(o: AgentOptions): Agent {
  return new AgentImpl(o);
}

const SAMPLE_MAX_DECOMPRESSED = 64 * 1024 * 1024;

/** svc's header on its own final 400s (packages/server/src/ingest/http.ts): `samples` or `body`. */
const REFUSED_HEADER = "Svc-Ingest-Refused";

/** The log line of an answer that keeps the batches spooled: what to fix, never the token. */
function heldWhy(status: number): string {
  if (status === 401 || status === 403)
    return "server refused the token; batches stay spooled until the token file holds the VM's current token";
  if (status === 404)
    return "nothing receives at the write URL; batches stay spooled (check --server, --write-path, a proxy)";
  if (status === 413)
    return "one collection is too large for the server or a proxy; it stays spooled (raise the proxy's body limit)";
  if (status === 429 || status >= 500) return "server busy or failing; spooling";
  return "server answered without storing the batch; batches stay spooled and are retried";
}

class AgentImpl implements Agent {
  readonly #o: AgentOptions;
  readonly #spool: Spool;
  readonly #url: string;
  #tick: NodeJS.Timeout | undefined;
  readonly #loop: SendLoop;
  /** Set while pushes fail, so the first success after them is logged. */
  #failing = false;
  /** Payload bytes one push may carry; halved while a server or proxy answers 413 to a merged backlog. */
  #sendBytes: number;
  readonly #s = { collected: 0, sentBatches: 0, rejectedBatches: 0 };
  /** Spool drop counters as last logged. */
  #logged = { overflow: 0, expired: 0 };

  constructor(o: AgentOptions) {
    this.#o = o;
    this.#url = writeUrl(o);
    this.#sendBytes = o.maxSendBytes;
    this.#spool = Spool.open({
      dir: o.spoolDir,
      maxBytes: o.spoolMaxBytes,
      maxAgeMs: o.spoolMaxAgeMs,
      segmentBytes: Math.max(4096, Math.min(1024 * 1024, Math.floor(o.spoolMaxBytes / 8))),
      now: o.now,
    });
    if (this.#spool.pending > 0) this.#o.logger.info("spool backlog found", { batches: this.#spool.pending });
    this.#loop = new SendLoop(() => this.#drain(), {
      minMs: o.retryMinMs,
      maxMs: o.retryMaxMs,
      // A local failure (disk, corrupt record): keep the backlog and try again later.
      onError: (err) => this.#o.logger.error("sender failed", { reason: (err as Error).message }),
    });
  }

  start(): void {
    this.collectNow();
    this.#tick = setInterval(() => this.collectNow(), this.#o.intervalMs);
  }

  collectNow(): number {
    const ts = Math.round(this.#o.now());
    const { series, errors } = collect(this.#o.vm, ts, this.#o.sources);
    if (errors.length > 0) this.#o.logger.warn("some sources unreadable", { errors });
    this.#s.collected++;
    if (series.length > 0) {
      const payload = snappyCompress(encodeWriteRequest({ timeseries: series }));
      if (!this.#spool.append(payload, ts)) this.#o.logger.error("batch larger than the spool; dropped");
      this.#reportDrops();
      this.#o.logger.debug("collected", { timestampMs: ts, series: series.length });
    }
    this.#loop.kick();
    return ts;
  }

  async flush(): Promise<void> {
    await this.#loop.flush();
  }

  async stop(): Promise<void> {
    clearInterval(this.#tick);
    await this.#loop.stop();
    this.#spool.close();
  }

  stats(): AgentStats {
    return {
      ...this.#s,
      retries: this.#loop.retries,
      spoolPending: this.#spool.pending,
      spoolBytes: this.#spool.bytes,
      ...this.#spool.counters,
    };
  }

  /** Logs batches the spool's bounds dropped since the last call (a long outage or refusal fills it). */
  #reportDrops(): void {
    const { droppedOverflow, droppedExpired } = this.#spool.counters;
    const overflow = droppedOverflow - this.#logged.overflow;
    const expired = droppedExpired - this.#logged.expired;
    if (overflow > 0)
      this.#o.logger.warn("spool full; oldest batches dropped", { batches: overflow, droppedOverflow });
    if (expired > 0)
      this.#o.logger.warn("spooled batches older than the spool's max age dropped", {
        batches: expired,
        droppedExpired,
      });
    this.#logged = { overflow: droppedOverflow, expired: droppedExpired };
  }

  async #drain(): Promise<"done" | "retry"> {
    while (!this.#loop.stopped && this.#spool.pending > 0) {
      const batch = this.#spool.peek(this.#sendBytes);
      this.#reportDrops();
      const body = batch.length === 1 ? batch[0].payload : this.#merge(batch.map((r) => r.payload));
      let token: string;
      try {
        token = this.#o.token();
      } catch (err) {
        this.#o.logger.error("token unavailable; batches stay spooled", { reason: (err as Error).message });
        this.#failing = true;
        return "retry";
      }
      let res: PushResult;
      try {
        res = await pushRemoteWrite(this.#url, token, body, {
          timeoutMs: this.#o.timeoutMs,
          fetch: this.#o.fetch ?? httpPost,
          headers: { "User-Agent": "svc-agent/0.1" },
        });
      } catch (err) {
        if (!(err instanceof RemoteWritePushError)) throw err;
        this.#o.logger.warn("push failed; spooling", { reason: err.message, pending: this.#spool.pending });
        this.#failing = true;
        return "retry";
      }
      const { status } = res;
      const detail = {
        status,
        response: res.body.slice(0, 200),
        batches: batch.length,
        oldestTimestampMs: batch[0].createdMs,
      };
      if (status >= 200 && status < 300) {
        this.#spool.ack(batch.length);
        this.#s.sentBatches += batch.length;
        if (this.#failing) this.#o.logger.info("server accepts batches again", { status });
        this.#failing = false;
        this.#loop.succeeded();
        if (this.#spool.pending === 0) this.#sendBytes = this.#o.maxSendBytes;
        continue;
      }
      const refused = status === 400 ? res.header(REFUSED_HEADER) : null;
      if (refused === "samples") {
        // svc stored the rest and named what it refused: sending these samples again changes nothing.
        this.#spool.ack(batch.length);
        this.#s.rejectedBatches += batch.length;
        this.#o.logger.error("server refused samples; the rest was stored", detail);
        continue;
      }
      const tooLarge = status === 413 || refused === "body";
      if (tooLarge && batch.length > 1) {
        // Merged backlog too large for the server or a proxy: send fewer collections per request.
        this.#sendBytes = Math.max(1, Math.floor(batch.reduce((n, r) => n + r.payload.length, 0) / 2));
        this.#o.logger.warn("batch too large; sending the backlog in smaller requests", {
          ...detail,
          maxRequestBytes: this.#sendBytes,
        });
        continue;
      }
      if (refused === "body") {
        // svc cannot decode one collection: it never will, and it would hold up every newer one.
        this.#spool.ack(1);
        this.#s.rejectedBatches++;
        this.#o.logger.error("server cannot decode this collection; dropped", detail);
        continue;
      }
      // Anything else (a wrong or revoked token, a proxy's 404 or 413, 429, 5xx) may change once the
      // cause is fixed: the batches stay spooled and are retried with backoff.
      this.#o.logger[status === 429 || status >= 500 ? "warn" : "error"](heldWhy(status), {
        ...detail,
        pending: this.#spool.pending,
      });
      this.#failing = true;
      return "retry";
    }
    return "done";
  }

  /** Several spooled bodies as one: concatenated WriteRequest encodings are one WriteRequest in protobuf. */
  #merge(payloads: Uint8Array[]): Uint8Array {
    const parts = payloads.map((p) => snappyDecompress(p, SAMPLE_MAX_DECOMPRESSED));
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let off = 0;
    for (const p of parts) {
      out.set(p, off);
      off += p.length;
    }
    return snappyCompress(out);
  }
}
