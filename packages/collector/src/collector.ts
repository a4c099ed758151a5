import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  httpPost,
  pushRemoteWrite,
  RemoteWritePushError,
  SendLoop,
  Spool,
  snappyCompress,
  type TimeSeries,
} from "@svc/remotewrite";
import { IdentityCache, METADATA_NAMESPACE } from "./identity.ts";
import {
  type DomainStatsRecord,
  GUEST_INFO_FILESYSTEM,
  LibvirtClient,
  STATS_BALLOON,
  STATS_BLOCK,
  STATS_CPU_TOTAL,
  STATS_INTERFACE,
  STATS_STATE,
  STATS_VCPU,
  uuidString,
} from "./libvirt/remote.ts";
import { mapDomainStats, mapGuestFilesystems, type VmState } from "./mapping.ts";
import type { CollectorOptions } from "./options.ts";
import { SeriesEncoder } from "./series-encoder.ts";

export const WRITE_PATH = "/v1/ingest/prometheus/api/v1/write";
export const STATE_PATH = "/v1/ingest/vm-states";

/** A spooled record's first byte: what the rest is. */
const RECORD_SAMPLES = 1; // a snappy-compressed remote-write WriteRequest
const RECORD_STATES = 2; // JSON { events: StateEvent[] }

/** A cycle's record not yet on disk: sent straight from memory while svc takes batches (docs/hypervisor.md). */
interface FreshRecord {
  readonly kind: number;
  readonly body: Uint8Array;
  readonly createdMs: number;
}

export interface StateEvent {
  readonly vm: string;
  readonly state: VmState["state"];
  readonly stopReason: VmState["stopReason"];
  /** When the collector observed it, Unix seconds. */
  readonly timeUnix: number;
}

export interface CollectorStats {
  cycles: number;
  /** Cycles in which libvirt could not be read (connection refused, timeout, error). */
  failedCycles: number;
  /** Domains of the latest cycle that map to no svc VM. */
  unmappedDomains: number;
  /** Domains of the latest cycle reported for an svc VM. */
  mappedDomains: number;
  sentBatches: number;
  /** Batches sent straight from memory, never written to the spool (svc took them at the first try). */
  directBatches: number;
  /** Batches svc answered with per-sample refusals (the rest was stored). */
  partiallyRefusedBatches: number;
  /** Failed sends that stay spooled (network, 5xx, 429, or a 4xx that is not a per-sample refusal). */
  retries: number;
  /** Batches not yet taken by svc: spooled, or in memory while their first send runs. */
  spoolPending: number;
  droppedOverflow: number;
  droppedExpired: number;
  /** CPU time (user + system) of the latest cycle's libvirt read and mapping, ms. */
  lastCycleCpuMs: number;
}

export interface Collector {
  /** Collects now and then every interval; starts sending (and any backlog left from before). */
  start(): void;
  /** One cycle now: reads libvirt, spools what it found. Resolves when spooled (not sent). */
  collectNow(): Promise<void>;
  /** Resolves when the spool is empty or the next send waits on a retry delay. */
  flush(): Promise<void>;
  stop(): Promise<void>;
  stats(): CollectorStats;
}

export function createCollector(o: CollectorOptions): Collector {
  return new CollectorImpl(o);
}

class CollectorImpl implements Collector {
  readonly #o: CollectorOptions;
  readonly #spool: Spool;
  readonly #identity: IdentityCache;
  readonly #statePath: string;
  /** The last state sent per VM ("STATE/REASON"); persisted so a restart does not repeat them. */
  readonly #reported: Record<string, string>;
  /** Unmapped domains already logged (by UUID), so each is logged once. */
  readonly #loggedUnmapped = new Set<string>();
  #client: LibvirtClient | undefined;
  #libvirtDown = false;
  #tick: NodeJS.Timeout | undefined;
  readonly #loop: SendLoop;
  #collecting: Promise<void> | undefined;
  /**
   * Records of the latest cycles, oldest first, kept in memory (not spooled) while their first send
   * runs. Non-empty only while the spool holds nothing: a failed send, a stop, a state change or a
   * backlog writes them to the spool first, in order (#spill).
   */
  readonly #fresh: FreshRecord[] = [];
  readonly #encoder = new SeriesEncoder();
  readonly #s = {
    cycles: 0,
    failedCycles: 0,
    unmappedDomains: 0,
    mappedDomains: 0,
    sentBatches: 0,
    directBatches: 0,
    partiallyRefusedBatches: 0,
    lastCycleCpuMs: 0,
  };

  constructor(o: CollectorOptions) {
    this.#o = o;
    mkdirSync(o.spoolDir, { recursive: true, mode: 0o700 });
    this.#spool = Spool.open({
      dir: o.spoolDir,
      maxBytes: o.spoolMaxBytes,
      maxAgeMs: o.spoolMaxAgeMs,
      segmentBytes: Math.max(4096, Math.min(4 * 1024 * 1024, Math.floor(o.spoolMaxBytes / 8))),
      now: o.now,
    });
    this.#identity = new IdentityCache(o.identityRefreshMs);
    this.#statePath = join(o.spoolDir, "reported-states.json");
    this.#reported = readJson(this.#statePath) ?? {};
    if (this.#spool.pending > 0) o.logger.info("spool backlog found", { batches: this.#spool.pending });
    this.#loop = new SendLoop(() => this.#drain(), {
      minMs: o.retryMinMs,
      maxMs: o.retryMaxMs,
      onError: (err) =>
        o.logger.error("sender failed; batches stay spooled", { reason: (err as Error).message }),
    });
  }

  start(): void {
    const cycle = () => {
      // A slow libvirt must not pile up cycles: skip a tick while the previous one runs.
      if (this.#collecting) return;
      this.#collecting = this.collectNow().finally(() => {
        this.#collecting = undefined;
      });
    };
    cycle();
    this.#tick = setInterval(cycle, this.#o.intervalMs);
  }

  async collectNow(): Promise<void> {
    const cpu0 = process.cpuUsage();
    this.#s.cycles++;
    const client = await this.#connect();
    if (!client) {
      this.#s.failedCycles++;
      return;
    }
    let records: DomainStatsRecord[];
    try {
      records = await client.getAllDomainStats(
        STATS_STATE | STATS_CPU_TOTAL | STATS_BALLOON | STATS_VCPU | STATS_INTERFACE | STATS_BLOCK,
      );
    } catch (err) {
      this.#libvirtFailed(err);
      this.#s.failedCycles++;
      return;
    }
    // The observation time: libvirt read the counters while answering this call.
    const ts = Math.round(this.#o.now());
    const series: TimeSeries[] = [];
    const events: StateEvent[] = [];
    const agentCalls: Promise<void>[] = [];
    const seen = new Set<string>();
    let mapped = 0;
    let unmapped = 0;
    for (const rec of records) {
      const uuid = uuidString(rec.domain.uuid);
      seen.add(uuid);
      const vm = await this.#vmOf(client, rec, ts);
      if (!vm) {
        unmapped++;
        continue;
      }
      mapped++;
      const m = mapDomainStats(vm, rec.params, ts);
      series.push(...m.series);
      if (m.state) {
        const key = `${m.state.state}/${m.state.stopReason}`;
        if (this.#reported[vm] !== key) {
          events.push({ vm, ...m.state, timeUnix: Math.floor(ts / 1000) });
          this.#reported[vm] = key;
        }
      }
      if (m.active && this.#o.guestAgent)
        agentCalls.push(this.#guestFilesystems(client, rec, vm, ts, series));
    }
    await Promise.all(agentCalls);
    this.#identity.retain(seen);
    this.#s.mappedDomains = mapped;
    this.#s.unmappedDomains = unmapped;
    // Samples first, then the state changes seen in the same cycle: svc stores them in this order.
    if (series.length > 0) this.#enqueue(RECORD_SAMPLES, snappyCompress(this.#encoder.encode(series)), ts);
    this.#encoder.endCycle();
    if (events.length > 0) {
      // Written ahead (fsynced) before the state file says they were sent: a state change lost in a
      // crash would never be sent again, as the collector sends only changes.
      this.#spill();
      this.#append(RECORD_STATES, Buffer.from(JSON.stringify({ events })), ts);
      writeJsonAtomic(this.#statePath, this.#reported);
    }
    const cpu = process.cpuUsage(cpu0);
    this.#s.lastCycleCpuMs = (cpu.user + cpu.system) / 1000;
    this.#loop.kick();
  }

  async flush(): Promise<void> {
    if (this.#collecting) await this.#collecting;
    await this.#loop.flush();
  }

  async stop(): Promise<void> {
    clearInterval(this.#tick);
    if (this.#collecting) await this.#collecting;
    await this.#loop.stop();
    this.#spill(); // what was not sent yet waits in the spool for the next start
    this.#client?.close();
    this.#spool.close();
  }

  stats(): CollectorStats {
    return {
      ...this.#s,
      retries: this.#loop.retries,
      spoolPending: this.#spool.pending + this.#fresh.length,
      droppedOverflow: this.#spool.counters.droppedOverflow,
      droppedExpired: this.#spool.counters.droppedExpired,
    };
  }

  async #connect(): Promise<LibvirtClient | undefined> {
    if (this.#client && !this.#client.closed) return this.#client;
    try {
      this.#client = await LibvirtClient.connect({
        socketPath: this.#o.socketPath,
        uri: this.#o.libvirtUri,
        readOnly: !this.#o.guestAgent,
        timeoutMs: this.#o.libvirtTimeoutMs,
      });
    } catch (err) {
      this.#libvirtFailed(err);
      return undefined;
    }
    if (this.#libvirtDown) this.#o.logger.info("libvirt reachable again", { socket: this.#o.socketPath });
    this.#libvirtDown = false;
    return this.#client;
  }

  /** Logged once per outage; the next cycle reconnects. Nothing is sent for the domains meanwhile. */
  #libvirtFailed(err: unknown): void {
    this.#client?.close();
    this.#client = undefined;
    if (!this.#libvirtDown) {
      this.#o.logger.error("libvirt unreadable; no samples or states this cycle, retrying every interval", {
        socket: this.#o.socketPath,
        reason: (err as Error).message,
      });
    }
    this.#libvirtDown = true;
  }

  async #vmOf(client: LibvirtClient, rec: DomainStatsRecord, nowMs: number): Promise<string | undefined> {
    let entry = this.#identity.get(rec.domain, nowMs);
    if (!entry && this.#o.vmOf) {
      const vm = this.#o.vmOf({ name: rec.domain.name, uuid: uuidString(rec.domain.uuid) });
      entry = { vm, problem: vm ? undefined : "not among the VMs this collector was given", readAtMs: nowMs };
    } else if (!entry) {
      let metadata: string | undefined;
      try {
        metadata = await client.getMetadata(rec.domain, METADATA_NAMESPACE);
      } catch (err) {
        // The domain vanished between the two calls, or libvirt failed: skip it this cycle.
        this.#o.logger.debug("metadata unreadable", {
          domain: rec.domain.name,
          reason: (err as Error).message,
        });
        return undefined;
      }
      entry = this.#identity.set(rec.domain, metadata, nowMs);
    }
    const uuid = uuidString(rec.domain.uuid);
    if (!entry.vm) {
      if (!this.#loggedUnmapped.has(uuid)) {
        this.#loggedUnmapped.add(uuid);
        this.#o.logger.warn("domain maps to no svc VM; skipped", {
          domain: rec.domain.name,
          uuid,
          reason: entry.problem,
        });
      }
      return undefined;
    }
    this.#loggedUnmapped.delete(uuid);
    return entry.vm;
  }

  async #guestFilesystems(
    client: LibvirtClient,
    rec: DomainStatsRecord,
    vm: string,
    ts: number,
    out: TimeSeries[],
  ): Promise<void> {
    try {
      const info = await client.getGuestInfo(
        rec.domain,
        GUEST_INFO_FILESYSTEM,
        Math.min(this.#o.libvirtTimeoutMs, Math.floor(this.#o.intervalMs / 3)),
      );
      out.push(...mapGuestFilesystems(vm, info, ts));
    } catch {
      // No agent in the guest, or it does not answer: no filesystem reading (never 0 %).
    }
  }

  /**
   * A cycle's samples: kept in memory and sent from there when nothing waits before them (the spool is
   * empty), else spooled behind the backlog. Skipping the fsynced write in the common case is most of
   * a cycle's system time; what it gives up is stated in docs/hypervisor.md ("Outages").
   */
  #enqueue(kind: number, body: Uint8Array, ts: number): void {
    if (this.#spool.pending > 0 || this.#loop.stopped) {
      this.#spill();
      this.#append(kind, body, ts);
    } else this.#fresh.push({ kind, body, createdMs: ts });
  }

  /** Writes the in-memory records to the spool, oldest first (they are newer than anything in it). */
  #spill(): void {
    for (const r of this.#fresh) this.#append(r.kind, r.body, r.createdMs);
    this.#fresh.length = 0;
  }

  #append(kind: number, body: Uint8Array, ts: number): void {
    const payload = new Uint8Array(body.length + 1);
    payload[0] = kind;
    payload.set(body, 1);
    if (!this.#spool.append(payload, ts))
      this.#o.logger.error("batch larger than the spool; dropped", { bytes: payload.length });
  }

  /**
   * Sends the spooled records, then the in-memory ones, one at a time, oldest first; a record is
   * acknowledged only once svc took it. A drain that does not finish leaves everything in the spool.
   */
  async #drain(): Promise<"done" | "retry"> {
    try {
      const r = await this.#drainOnce();
      if (r === "retry") this.#spill();
      return r;
    } catch (err) {
      this.#spill();
      throw err;
    }
  }

  async #drainOnce(): Promise<"done" | "retry"> {
    while (!this.#loop.stopped) {
      // The spool's head first; in-memory records only when the spool is empty (they are newer).
      let rec: FreshRecord;
      if (this.#spool.pending > 0) {
        const [r] = this.#spool.peek(1);
        rec = { kind: r.payload[0], body: r.payload.subarray(1), createdMs: r.createdMs };
      } else if (this.#fresh.length > 0) rec = this.#fresh[0];
      else break;
      const { kind, body } = rec;
      let token: string;
      try {
        token = this.#o.token();
      } catch (err) {
        this.#o.logger.error("collector token unavailable; batches stay spooled", {
          reason: (err as Error).message,
        });
        return "retry";
      }
      let status: number;
      let text: string;
      try {
        ({ status, text } = await this.#send(kind, body, token));
      } catch (err) {
        if (!(err instanceof RemoteWritePushError)) throw err;
        this.#o.logger.warn("svc unreachable; spooling", {
          reason: err.message,
          pending: this.#spool.pending + this.#fresh.length,
        });
        return "retry";
      }
      if (status >= 200 && status < 300) {
        this.#ack(rec);
        continue;
      }
      // svc's per-item refusal (400 "accepted …; refused …"): the rest was stored; retrying changes nothing.
      if (status === 400 && text.startsWith("accepted ")) {
        this.#s.partiallyRefusedBatches++;
        this.#o.logger.warn("svc refused part of a batch; the rest was stored", {
          response: text.slice(0, 500),
          observedAtMs: rec.createdMs,
        });
        this.#ack(rec);
        continue;
      }
      // Anything else (401 token, 413, 5xx, 429, a proxy's answer) keeps the batch: it is sent again
      // once whatever is wrong is fixed, with its original times.
      this.#o.logger.error("svc did not take a batch; kept in the spool, retrying", {
        status,
        response: text.slice(0, 300),
        pending: this.#spool.pending + this.#fresh.length,
      });
      return "retry";
    }
    return "done";
  }

  /** `rec` was taken: dropped from memory, or acknowledged in the spool (also when spilled during its send). */
  #ack(rec: FreshRecord): void {
    if (this.#fresh[0] === rec) {
      this.#fresh.shift();
      this.#s.directBatches++;
    } else this.#spool.ack(1);
    this.#s.sentBatches++;
    this.#loop.succeeded();
  }

  async #send(kind: number, body: Uint8Array, token: string): Promise<{ status: number; text: string }> {
    const base = this.#o.server.replace(/\/+$/, "");
    const fetch = this.#o.fetch ?? httpPost;
    if (kind === RECORD_SAMPLES) {
      const r = await pushRemoteWrite(`${base}${WRITE_PATH}`, token, body, {
        timeoutMs: this.#o.timeoutMs,
        fetch,
        headers: { "User-Agent": "svc-collector/0.1" },
      });
      return { status: r.status, text: r.body };
    }
    if (kind !== RECORD_STATES) throw new Error(`spool record of unknown kind ${kind}`);
    let res: Awaited<ReturnType<typeof fetch>>;
    try {
      res = await fetch(`${base}${STATE_PATH}`, {
        method: "POST",
        headers: {
          Authorization: `Bearer ${token}`,
          "Content-Type": "application/json",
          "User-Agent": "svc-collector/0.1",
        },
        body,
        signal: AbortSignal.timeout(this.#o.timeoutMs),
      });
    } catch (err) {
      const code = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).name;
      throw new RemoteWritePushError(`state events not delivered: ${code}`);
    }
    return { status: res.status, text: (await res.text()).slice(0, 4096) };
  }
}

function readJson(path: string): Record<string, string> | undefined {
  try {
    const v = JSON.parse(readFileSync(path, "utf8")) as unknown;
    return v && typeof v === "object" ? (v as Record<string, string>) : undefined;
  } catch {
    return undefined;
  }
}

function writeJsonAtomic(path: string, v: unknown): void {
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, JSON.stringify(v), { mode: 0o600 });
  renameSync(tmp, path);
}
