import {
  encodeWriteRequest,
  httpPost,
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
  /** Batches the server refused with a 4xx other than 429 (dropped, not retried). */
  rejectedBatches: number;
  /** Failed pushes that will be retried (network, timeout, 5xx, 429). */
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

class AgentImpl implements Agent {
  readonly #o: AgentOptions;
  readonly #spool: Spool;
  readonly #url: string;
  #tick: NodeJS.Timeout | undefined;
  readonly #loop: SendLoop;
  readonly #s = { collected: 0, sentBatches: 0, rejectedBatches: 0 };

  constructor(o: AgentOptions) {
    this.#o = o;
    this.#url = writeUrl(o);
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

  async #drain(): Promise<"done" | "retry"> {
    while (!this.#loop.stopped && this.#spool.pending > 0) {
      const batch = this.#spool.peek(this.#o.maxSendBytes);
      const body = batch.length === 1 ? batch[0].payload : this.#merge(batch.map((r) => r.payload));
      let token: string;
      try {
        token = this.#o.token();
      } catch (err) {
        this.#o.logger.error("token unavailable; batches stay spooled", { reason: (err as Error).message });
        return "retry";
      }
      let status: number;
      let text: string;
      try {
        ({ status, body: text } = await pushRemoteWrite(this.#url, token, body, {
          timeoutMs: this.#o.timeoutMs,
          fetch: this.#o.fetch ?? httpPost,
          headers: { "User-Agent": "svc-agent/0.1" },
        }));
      } catch (err) {
        if (!(err instanceof RemoteWritePushError)) throw err;
        this.#o.logger.warn("push failed; spooling", { reason: err.message, pending: this.#spool.pending });
        return "retry";
      }
      if (status >= 200 && status < 300) {
        this.#spool.ack(batch.length);
        this.#s.sentBatches += batch.length;
        this.#loop.succeeded();
        continue;
      }
      if (status === 429 || status >= 500) {
        this.#o.logger.warn("server busy or failing; spooling", {
          status,
          response: text.slice(0, 200),
          pending: this.#spool.pending,
        });
        return "retry";
      }
      // Any other answer will not change on retry: drop these batches, count them, go on.
      this.#spool.ack(batch.length);
      this.#s.rejectedBatches += batch.length;
      this.#o.logger.error("server refused batch; dropped", {
        status,
        response: text.slice(0, 200),
        batches: batch.length,
        oldestTimestampMs: batch[0].createdMs,
      });
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
