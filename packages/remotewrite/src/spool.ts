import {
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  truncateSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import { crc32 } from "./crc32.ts";

/**
 * An append-only, bounded on-disk queue of batches, oldest first.
 *
 * Layout: numbered segment files `<seq>.seg` holding records
 * `[u32 payload length][u32 crc32 of timestamp+payload][f64 createdMs][payload]`, plus a `cursor`
 * file naming the first record not yet acknowledged. Every append is fsynced before it returns, so a
 * batch the agent has taken survives a crash; a torn tail (power loss mid-write) is cut off on open.
 * Bounds: total size of the segment files (`maxBytes`) and record age (`maxAgeMs`); the oldest records
 * go first and are counted. A crash between a successful send and the cursor write resends that batch
 * once, which a Prometheus-compatible receiver accepts as a duplicate of identical samples.
 */
export interface SpoolOptions {
  readonly dir: string;
  /** Upper bound of the spool's disk use, bytes (inclusive). */
  readonly maxBytes: number;
  /** Records older than this (by their createdMs) are dropped, ms. */
  readonly maxAgeMs: number;
  /** Target size of one segment file, bytes; the bound is enforced by dropping whole oldest segments. */
  readonly segmentBytes: number;
  /** Clock, ms. */
  readonly now: () => number;
}

export interface SpoolRecord {
  /** When the batch was collected, ms. */
  readonly createdMs: number;
  /** The stored bytes; a fresh copy owned by the caller. */
  readonly payload: Uint8Array;
}

export interface SpoolCounters {
  /** Records dropped to stay under maxBytes (including a single record larger than maxBytes). */
  droppedOverflow: number;
  /** Records dropped because they were older than maxAgeMs. */
  droppedExpired: number;
  /** Torn or corrupt tails cut off when opening. */
  truncatedTails: number;
}

const HEADER = 16;

interface RecordRef {
  readonly offset: number;
  readonly size: number;
  readonly createdMs: number;
}

interface Segment {
  readonly seq: number;
  size: number;
  readonly records: RecordRef[];
  /** Records before this index are acknowledged. */
  consumed: number;
}

const segName = (seq: number) => `${String(seq).padStart(16, "0")}.seg`;

export class Spool {
  readonly #o: SpoolOptions;
  readonly #segments: Segment[] = [];
  #nextSeq = 1;
  #fd: number | undefined; // open append fd of the last segment
  #bytes = 0;
  #pending = 0;
  readonly counters: SpoolCounters = { droppedOverflow: 0, droppedExpired: 0, truncatedTails: 0 };

  private constructor(o: SpoolOptions) {
    this.#o = o;
  }

  /** Opens (creating if needed) the spool in `opts.dir`, recovering from a torn tail. */
  static open(opts: SpoolOptions): Spool {
    const s = new Spool(opts);
    s.#load();
    return s;
  }

  /** Records not yet acknowledged. */
  get pending(): number {
    return this.#pending;
  }

  /** Bytes the segment files occupy. */
  get bytes(): number {
    return this.#bytes;
  }

  /**
   * Appends one record and fsyncs it. Drops the oldest segments first when needed to stay within
   * maxBytes. Returns false (and counts it) when the record alone is larger than maxBytes.
   */
  append(payload: Uint8Array, createdMs: number): boolean {
    this.expire();
    const size = HEADER + payload.length;
    if (size > this.#o.maxBytes) {
      this.counters.droppedOverflow++;
      return false;
    }
    while (this.#segments.length > 0 && this.#bytes + size > this.#o.maxBytes) this.#dropOldestSegment();
    let seg = this.#segments.at(-1);
    if (
      seg === undefined ||
      this.#fd === undefined ||
      (seg.size > 0 && seg.size + size > this.#o.segmentBytes)
    ) {
      seg = this.#newSegment();
    }
    const rec = Buffer.allocUnsafe(size);
    rec.writeUInt32LE(payload.length, 0);
    rec.writeDoubleLE(createdMs, 8);
    rec.set(payload, HEADER);
    rec.writeUInt32LE(crc32(rec.subarray(8)), 4);
    writeSync(this.#fd!, rec);
    fsyncSync(this.#fd!);
    seg.records.push({ offset: seg.size, size, createdMs });
    seg.size += size;
    this.#bytes += size;
    this.#pending++;
    return true;
  }

  /**
   * The oldest unacknowledged records, in order: at least one when any is pending, then more while
   * their payloads total at most `maxPayloadBytes`. Does not remove them; call `ack`.
   */
  peek(maxPayloadBytes: number): SpoolRecord[] {
    this.expire();
    const out: SpoolRecord[] = [];
    let total = 0;
    for (const seg of this.#segments) {
      let data: Buffer | undefined;
      for (let i = seg.consumed; i < seg.records.length; i++) {
        const r = seg.records[i];
        const len = r.size - HEADER;
        if (out.length > 0 && total + len > maxPayloadBytes) return out;
        data ??= readFileSync(join(this.#o.dir, segName(seg.seq)));
        out.push({
          createdMs: r.createdMs,
          payload: new Uint8Array(data.subarray(r.offset + HEADER, r.offset + r.size)),
        });
        total += len;
      }
    }
    return out;
  }

  /** Acknowledges the `n` oldest pending records (sent, or dropped by the caller). */
  ack(n: number): void {
    this.#advance(n);
    this.#writeCursor();
  }

  /** Drops pending records older than maxAgeMs (they are at the head: records are appended in time order). */
  expire(): void {
    const cutoff = this.#o.now() - this.#o.maxAgeMs;
    let n = 0;
    outer: for (const seg of this.#segments) {
      for (let i = seg.consumed; i < seg.records.length; i++) {
        if (seg.records[i].createdMs >= cutoff) break outer;
        n++;
      }
    }
    if (n > 0) {
      this.counters.droppedExpired += n;
      this.ack(n);
    }
  }

  close(): void {
    if (this.#fd !== undefined) closeSync(this.#fd);
    this.#fd = undefined;
  }

  #advance(n: number): void {
    while (n > 0 && this.#segments.length > 0) {
      const seg = this.#segments[0];
      const take = Math.min(n, seg.records.length - seg.consumed);
      seg.consumed += take;
      this.#pending -= take;
      n -= take;
      if (seg.consumed < seg.records.length) break;
      this.#removeSegment(seg);
    }
  }

  #dropOldestSegment(): void {
    const seg = this.#segments[0];
    const lost = seg.records.length - seg.consumed;
    this.counters.droppedOverflow += lost;
    this.#pending -= lost;
    this.#removeSegment(seg);
    this.#writeCursor();
  }

  #removeSegment(seg: Segment): void {
    const last = this.#segments.at(-1) === seg;
    if (last && this.#fd !== undefined) {
      closeSync(this.#fd);
      this.#fd = undefined;
    }
    unlinkSync(join(this.#o.dir, segName(seg.seq)));
    this.#segments.shift();
    this.#bytes -= seg.size;
  }

  #newSegment(): Segment {
    if (this.#fd !== undefined) closeSync(this.#fd);
    const seg: Segment = { seq: this.#nextSeq++, size: 0, records: [], consumed: 0 };
    this.#fd = openSync(join(this.#o.dir, segName(seg.seq)), "a");
    this.#syncDir();
    this.#segments.push(seg);
    return seg;
  }

  #syncDir(): void {
    const fd = openSync(this.#o.dir, "r");
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  }

  #writeCursor(): void {
    const head = this.#segments[0];
    const cur = head
      ? { seq: head.seq, offset: head.records[head.consumed]?.offset ?? head.size }
      : { seq: this.#nextSeq, offset: 0 };
    const tmp = join(this.#o.dir, "cursor.tmp");
    const fd = openSync(tmp, "w");
    try {
      writeSync(fd, JSON.stringify(cur));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, join(this.#o.dir, "cursor"));
  }

  #load(): void {
    const dir = this.#o.dir;
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    let cursor = { seq: 0, offset: 0 };
    try {
      const c = JSON.parse(readFileSync(join(dir, "cursor"), "utf8")) as { seq?: unknown; offset?: unknown };
      if (Number.isSafeInteger(c.seq) && Number.isSafeInteger(c.offset)) cursor = c as typeof cursor;
    } catch {
      // no cursor yet (or unreadable): everything on disk is pending
    }
    const seqs = readdirSync(dir)
      .filter((f) => /^\d{16}\.seg$/.test(f))
      .map((f) => Number(f.slice(0, 16)))
      .sort((a, b) => a - b);
    for (const seq of seqs) {
      const path = join(dir, segName(seq));
      if (seq < cursor.seq) {
        unlinkSync(path); // fully acknowledged before a crash
        continue;
      }
      const data = readFileSync(path);
      const seg: Segment = { seq, size: 0, records: [], consumed: 0 };
      let off = 0;
      while (off + HEADER <= data.length) {
        const len = data.readUInt32LE(off);
        if (off + HEADER + len > data.length) break;
        if (crc32(data.subarray(off + 8, off + HEADER + len)) !== data.readUInt32LE(off + 4)) break;
        seg.records.push({ offset: off, size: HEADER + len, createdMs: data.readDoubleLE(off + 8) });
        off += HEADER + len;
      }
      if (off < data.length) {
        truncateSync(path, off);
        this.counters.truncatedTails++;
      }
      seg.size = off;
      if (seq === cursor.seq)
        while (seg.consumed < seg.records.length && seg.records[seg.consumed].offset < cursor.offset)
          seg.consumed++;
      this.#segments.push(seg);
      this.#bytes += seg.size;
      this.#pending += seg.records.length - seg.consumed;
    }
    this.#nextSeq = Math.max(cursor.seq, (seqs.at(-1) ?? 0) + 1, 1);
    // Appends always start a fresh segment after a restart, so a recovered file is never appended to.
    while (this.#segments.length > 0 && this.#segments[0].consumed === this.#segments[0].records.length) {
      this.#removeSegment(this.#segments[0]);
    }
    this.#writeCursor();
  }
}
