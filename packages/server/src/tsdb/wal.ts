/**
 * Write-ahead log (layout in FORMAT.md): numbered segment files of framed records
 * `[u32 length][u32 crc32][payload]`. Commits are grouped: every commit queued while a write is
 * pending or within the same event-loop turn (or group-commit window) shares one write + fdatasync,
 * and each commit's apply callback runs, in log order, only after its bytes are durable.
 */
import {
  closeSync,
  fdatasync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  truncateSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { crc32 } from "node:zlib";
import snappy from "snappyjs";
import type { Labels } from "../storage/interface.ts";
import { ByteReader, ByteWriter, fsyncDir } from "./block.ts";
import type { Damage, DamageKind } from "./damage.ts";
import { TsdbClosedError } from "./errors.ts";
import {
  CompactRecordError,
  compactSamplesMaxBytes,
  decodeCompactSamples,
  encodeCompactSamples,
  REC_SAMPLES_COMPACT,
} from "./walsamples.ts";

const fdatasyncAsync = promisify(fdatasync);

export const REC_SERIES = 1;
export const REC_SAMPLES = 2;
/** A series record (type 1 body) snappy-compressed: label sets repeat names and values a lot. */
export const REC_SERIES_SNAPPY = 4;
/** Below this many payload bytes a series record is written plain (compression would not pay). */
const SNAPPY_MIN_BYTES = 256;

/** Appends one framed record built by `body` to w. */
export function frameRecord(w: ByteWriter, body: (p: ByteWriter) => void): void {
  const p = new ByteWriter();
  body(p);
  const payload = p.finish();
  w.u32(payload.length);
  w.u32(crc32(payload));
  w.bytes32Raw(payload);
}

export function encodeSeriesRecord(p: ByteWriter, series: readonly { ref: number; labels: Labels }[]): void {
  p.u8(REC_SERIES);
  p.u32(series.length);
  for (const s of series) {
    p.u32(s.ref);
    p.u16(s.labels.length);
    for (const l of s.labels) {
      p.bytes32(Buffer.from(l.name, "utf8"));
      p.bytes32(Buffer.from(l.value, "utf8"));
    }
  }
}

/** Frames a series record, snappy-compressed (type 4) when that is smaller. */
export function frameSeriesRecord(w: ByteWriter, series: readonly { ref: number; labels: Labels }[]): void {
  const p = new ByteWriter();
  encodeSeriesRecord(p, series);
  let payload: Uint8Array = p.finish();
  if (payload.length >= SNAPPY_MIN_BYTES) {
    const z = snappy.compress(payload.subarray(1));
    if (z.length + 1 < payload.length) {
      const c = Buffer.allocUnsafe(z.length + 1);
      c[0] = REC_SERIES_SNAPPY;
      c.set(z, 1);
      payload = c;
    }
  }
  w.u32(payload.length);
  w.u32(crc32(payload));
  w.bytes32Raw(payload);
}

/**
 * One framed compact sample record (type 3) for samples given as parallel arrays, values as raw bits
 * (hi, lo) so NaN payloads survive. The returned buffer is the caller's.
 */
export function frameCompactSamples(
  n: number,
  refs: ArrayLike<number>,
  ts: ArrayLike<number>,
  his: ArrayLike<number>,
  los: ArrayLike<number>,
): Buffer {
  const buf = Buffer.allocUnsafe(8 + compactSamplesMaxBytes(n));
  const end = encodeCompactSamples(buf, 8, n, refs, ts, his, los);
  const payload = buf.subarray(8, end);
  buf.writeUInt32LE(payload.length, 0);
  buf.writeUInt32LE(crc32(payload), 4);
  return buf.subarray(0, end);
}

/** Type-2 sample record (20 bytes per sample); still read, written only by tests of old logs. */
export function encodeSamplesRecord(
  p: ByteWriter,
  n: number,
  refs: ArrayLike<number>,
  ts: ArrayLike<number>,
  his: ArrayLike<number>,
  los: ArrayLike<number>,
): void {
  p.u8(REC_SAMPLES);
  p.u32(n);
  for (let i = 0; i < n; i++) {
    p.u32(refs[i]);
    p.f64(ts[i]);
    p.u32(los[i]);
    p.u32(his[i]);
  }
}

export interface RecordVisitor {
  series(ref: number, labels: Labels): void;
  sample(ref: number, t: number, hi: number, lo: number): void;
}

/** A run of bytes readRecords skipped: a record failing its checksum, up to the next valid one. */
export interface DamagedRange {
  readonly offset: number;
  readonly bytes: number;
  /** The sample count the record's own (unverified) header gives, when plausible; else undefined. */
  readonly samples: number | undefined;
  readonly detail: string;
}

export interface ReadResult {
  /** Byte length of the prefix that ends with the last valid record (what a torn tail is cut to). */
  readonly end: number;
  /** Damaged runs followed by a valid record: skipped, the records after them read. */
  readonly damaged: DamagedRange[];
  /** Bytes after the last valid record that are not a record: a torn write, or damage at the end. */
  readonly tail: DamagedRange | undefined;
}

const KNOWN_TYPES = new Set([REC_SERIES, REC_SAMPLES, REC_SAMPLES_COMPACT, REC_SERIES_SNAPPY]);

/** Length of the valid record framed at `pos` (length, CRC and a known type), or why it is not one. */
function frameAt(buf: Buffer, pos: number): number | string {
  if (pos + 8 > buf.length) return "incomplete record header";
  const len = buf.readUInt32LE(pos);
  if (len === 0) return "zero record length";
  if (pos + 8 + len > buf.length) return `record length ${len} runs past the end of the file`;
  if (!KNOWN_TYPES.has(buf[pos + 8])) return `unknown record type ${buf[pos + 8]}`;
  if (crc32(buf.subarray(pos + 8, pos + 8 + len)) !== buf.readUInt32LE(pos + 4)) return "checksum mismatch";
  return len;
}

/** The next offset after `from` where a valid record starts, or -1. */
function resync(buf: Buffer, from: number): number {
  for (let p = from; p + 9 <= buf.length; p++) {
    // Cheap tests first: most offsets fail on the length or the type byte, before any CRC.
    const len = buf.readUInt32LE(p);
    if (len === 0 || p + 8 + len > buf.length || !KNOWN_TYPES.has(buf[p + 8])) continue;
    if (typeof frameAt(buf, p) === "number") return p;
  }
  return -1;
}

/** Samples a damaged record at `pos` held, by its own header, when its length matches `bytes`. */
function samplesClaimed(buf: Buffer, pos: number, bytes: number): number | undefined {
  if (pos + 9 > buf.length) return undefined;
  const len = buf.readUInt32LE(pos);
  if (len + 8 !== bytes) return undefined;
  const type = buf[pos + 8];
  if (type === REC_SERIES || type === REC_SERIES_SNAPPY) return 0;
  if (type === REC_SAMPLES && len >= 5) {
    const n = buf.readUInt32LE(pos + 9);
    return 5 + 20 * n === len ? n : undefined;
  }
  if (type === REC_SAMPLES_COMPACT) {
    let n = 0;
    let mul = 1;
    for (let p = pos + 9; p < pos + 8 + len && mul <= 2 ** 49; p++, mul *= 0x80) {
      n += (buf[p] & 0x7f) * mul;
      if (buf[p] < 0x80) {
        // 3 to ~26 bytes a sample (FORMAT.md): a count outside that is itself damaged.
        return n > 0 && 3 * n <= len && 26 * n + 10 >= len ? n : undefined;
      }
    }
  }
  return undefined;
}

/** Decodes one valid record's payload into `v`; false when it is malformed despite its CRC. */
function decodeRecord(payload: Buffer, v: RecordVisitor, sample: RecordVisitor["sample"]): boolean {
  let r = new ByteReader(payload);
  let type = r.u8();
  if (type === REC_SERIES_SNAPPY) {
    try {
      r = new ByteReader(Buffer.from(snappy.uncompress(payload.subarray(1))));
    } catch {
      return false;
    }
    type = REC_SERIES;
  }
  try {
    if (type === REC_SERIES) {
      const n = r.u32();
      for (let i = 0; i < n; i++) {
        const ref = r.u32();
        const nl = r.u16();
        const labels = [];
        for (let k = 0; k < nl; k++) {
          const name = r.str32();
          labels.push({ name, value: r.str32() });
        }
        v.series(ref, labels);
      }
    } else if (type === REC_SAMPLES) {
      const n = r.u32();
      for (let i = 0; i < n; i++) {
        const ref = r.u32();
        const t = r.f64();
        const lo = r.u32();
        v.sample(ref, t, r.u32(), lo);
      }
    } else decodeCompactSamples(payload, 1, sample);
  } catch (e) {
    if (e instanceof CompactRecordError || e instanceof RangeError) return false;
    throw e;
  }
  return true;
}

/**
 * Decodes framed records. A record that fails its checksum (or its decoding) is skipped up to the
 * next valid record, so one damaged record loses only itself; bytes after the last valid record are
 * the tail (a torn write when the file is the newest segment).
 */
export function readRecords(buf: Buffer, v: RecordVisitor): ReadResult {
  const damaged: DamagedRange[] = [];
  // One callback for every record of the file: a new closure per record made decodeCompactSamples'
  // optimized code deoptimize ("wrong call target") early in a replay.
  const sample: RecordVisitor["sample"] = (ref, t, hi, lo) => v.sample(ref, t, hi, lo);
  let pos = 0;
  let end = 0;
  while (pos < buf.length) {
    const f = frameAt(buf, pos);
    if (typeof f === "number" && decodeRecord(buf.subarray(pos + 8, pos + 8 + f), v, sample)) {
      pos += 8 + f;
      end = pos;
      continue;
    }
    const detail = typeof f === "number" ? "malformed record despite its checksum" : f;
    const next = resync(buf, pos + 1);
    const bytes = (next < 0 ? buf.length : next) - pos;
    const range = { offset: pos, bytes, samples: samplesClaimed(buf, pos, bytes), detail };
    if (next < 0) return { end, damaged, tail: range };
    damaged.push(range);
    pos = next;
  }
  return { end, damaged, tail: undefined };
}

export const segmentName = (n: number): string => String(n).padStart(8, "0");

export interface WalLayout {
  /** Numbers of the segment files, ascending. */
  segments: number[];
  /** The newest complete checkpoint, if any: it covers every segment ≤ its number. */
  checkpoint: number | undefined;
  /** Paths scanWal deleted: unfinished checkpoints (a crash while writing one) and superseded ones. */
  removed: string[];
}

/** Lists segments and checkpoints, deleting unfinished checkpoints and superseded files. */
export function scanWal(dir: string): WalLayout {
  mkdirSync(dir, { recursive: true });
  const segments: number[] = [];
  const checkpoints: number[] = [];
  const removed: string[] = [];
  for (const e of readdirSync(dir)) {
    if (/^\d{8}$/.test(e)) segments.push(Number(e));
    else if (/^checkpoint\.\d{8}$/.test(e)) checkpoints.push(Number(e.slice(11)));
    else if (e.startsWith("checkpoint.")) {
      rmSync(join(dir, e), { recursive: true, force: true });
      removed.push(join(dir, e));
    }
  }
  segments.sort((a, b) => a - b);
  checkpoints.sort((a, b) => a - b);
  const checkpoint = checkpoints.at(-1);
  for (const c of checkpoints.slice(0, -1)) {
    rmSync(join(dir, `checkpoint.${segmentName(c)}`), { recursive: true });
    removed.push(join(dir, `checkpoint.${segmentName(c)}`));
  }
  return {
    segments: segments.filter((s) => checkpoint === undefined || s > checkpoint),
    checkpoint,
    removed,
  };
}

/** The newest checkpoint and the segments after it up to `upTo` (scanWal without its deletions). */
export function walFilesUpTo(
  walDir: string,
  upTo: number,
): { checkpoint: number | undefined; segments: number[] } {
  let checkpoint: number | undefined;
  const segments: number[] = [];
  for (const e of readdirSync(walDir)) {
    if (/^checkpoint\.\d{8}$/.test(e)) {
      const n = Number(e.slice(11));
      if (n <= upTo && (checkpoint === undefined || n > checkpoint)) checkpoint = n;
    } else if (/^\d{8}$/.test(e) && Number(e) <= upTo) segments.push(Number(e));
  }
  segments.sort((a, b) => a - b);
  return { checkpoint, segments: segments.filter((s) => checkpoint === undefined || s > checkpoint) };
}

/**
 * The damage readRecords found in one WAL file, as reported: the tail of the newest segment is a torn
 * write; a damaged series record drops no sample itself (`samples` unknown) but orphans its series'
 * samples, which the caller counts (`seriesLost`).
 */
export function walFileDamage(
  r: ReadResult,
  file: string,
  kind: "wal_record" | "checkpoint_record",
  newest: boolean,
): { damage: Damage[]; seriesLost: boolean } {
  const found: (DamagedRange & { kind: DamageKind })[] = r.damaged.map((d) => ({ ...d, kind }));
  if (r.tail) found.push({ ...r.tail, kind: newest ? "wal_torn_tail" : kind });
  return {
    damage: found.map((d) => ({ ...d, file, samples: d.samples === 0 ? undefined : d.samples })),
    seriesLost: found.some((d) => d.samples === 0),
  };
}

/**
 * Reads one WAL file. With `truncateTail`, bytes after the last valid record (a torn write in the
 * newest segment) are cut off; damaged records in the middle are skipped, never rewritten.
 */
export function replayFile(path: string, v: RecordVisitor, truncateTail: boolean): ReadResult {
  const buf = readFileSync(path);
  const r = readRecords(buf, v);
  if (r.tail && truncateTail) truncateSync(path, r.end);
  return r;
}

interface Pending {
  apply: () => unknown;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

export class Wal {
  readonly dir: string;
  #seg: number;
  #fd: number;
  #segBytes = 0;
  #queue: Pending[] = [];
  /**
   * Records queued for the next write, copied in as they are logged: the caller's buffer is free at
   * once, and nothing a commit allocated outlives its fdatasync (which would get it promoted and held
   * until a full collection). Reused from one write to the next; written before each fdatasync, so
   * records logged while one is in flight start it afresh.
   */
  #stage = Buffer.allocUnsafe(64 * 1024);
  #staged = 0;
  #inflight: Promise<void> | null = null;
  #scheduled = false;
  #failed: Error | null = null;
  readonly #maxSegBytes: number;
  readonly #windowMs: number;
  /** Write + fsync rounds, and commits carried by them (group commit figures). */
  flushes = 0;
  commits = 0;
  /** Told of each durable write (bytes, seconds of write + fdatasync) and of the write that failed. */
  observer: { flushed(bytes: number, seconds: number): void; failed(err: Error): void } | undefined;

  /** Opens a new segment numbered `seg` for writing. */
  constructor(dir: string, seg: number, maxSegBytes: number, windowMs: number) {
    this.dir = dir;
    this.#seg = seg;
    this.#maxSegBytes = maxSegBytes;
    this.#windowMs = windowMs;
    this.#fd = openSync(join(dir, segmentName(seg)), "a");
    fsyncDir(dir);
  }

  get segment(): number {
    return this.#seg;
  }

  /**
   * Queues encoded records; after they are written and fdatasync'ed, runs `apply` (in log order) and
   * resolves with its result (or what the promise it returns settles to: the store defers applying
   * a batch across a block cut). Rejects if the write fails; the WAL then refuses further writes.
   */
  log<T>(buf: Buffer, apply: () => T | Promise<T>): Promise<T> {
    if (this.#failed) return Promise.reject(new TsdbClosedError(`WAL failed: ${this.#failed.message}`));
    if (this.#fd < 0) return Promise.reject(new TsdbClosedError());
    return new Promise<T>((resolve, reject) => {
      if (this.#staged + buf.length > this.#stage.length) {
        const grown = Buffer.allocUnsafe(Math.max(this.#stage.length * 2, this.#staged + buf.length));
        this.#stage.copy(grown, 0, 0, this.#staged);
        this.#stage = grown;
      }
      this.#stage.set(buf, this.#staged);
      this.#staged += buf.length;
      this.#queue.push({ apply, resolve: resolve as (v: unknown) => void, reject });
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#scheduled || this.#inflight) return;
    this.#scheduled = true;
    const run = (): void => {
      this.#scheduled = false;
      this.#inflight = this.#flush().finally(() => {
        this.#inflight = null;
        if (this.#queue.length > 0) this.#schedule();
      });
    };
    if (this.#windowMs > 0) setTimeout(run, this.#windowMs);
    else setImmediate(run);
  }

  async #flush(): Promise<void> {
    const batch = this.#queue;
    this.#queue = [];
    if (batch.length === 0) return;
    try {
      if (this.#failed) throw this.#failed;
      if (this.#segBytes >= this.#maxSegBytes) this.rotate();
      const data = this.#stage;
      const length = this.#staged;
      this.#staged = 0;
      // The write only copies into the page cache: done here it saves a thread-pool round trip per
      // group (measurable CPU at ~1,000 commits/s); the fdatasync that makes it durable runs off-thread.
      const t0 = performance.now();
      let off = 0;
      while (off < length) off += writeSync(this.#fd, data, off, length - off, null);
      await fdatasyncAsync(this.#fd);
      this.#segBytes += length;
      this.flushes++;
      this.commits += batch.length;
      this.observer?.flushed(length, (performance.now() - t0) / 1000);
    } catch (e) {
      if (!this.#failed) this.observer?.failed(e as Error);
      this.#failed ??= e as Error;
      for (const p of batch) p.reject(new TsdbClosedError(`WAL write failed: ${(e as Error).message}`));
      return;
    }
    for (const p of batch) {
      try {
        p.resolve(p.apply());
      } catch (e) {
        p.reject(e);
      }
    }
  }

  /** Resolves when no write is in flight (queued, unwritten commits may remain). */
  async idle(): Promise<void> {
    while (this.#inflight) await this.#inflight;
  }

  /**
   * Starts a new segment; returns the number of the one just sealed. Only call when idle(): no
   * write may be in flight on the old descriptor.
   */
  rotate(): number {
    const sealed = this.#seg;
    closeSync(this.#fd);
    this.#seg++;
    this.#fd = openSync(join(this.dir, segmentName(this.#seg)), "a");
    this.#segBytes = 0;
    fsyncDir(this.dir);
    return sealed;
  }

  /** Deletes segments ≤ upTo and checkpoints older than `keepCheckpoint`. */
  truncate(upTo: number, keepCheckpoint: number): void {
    for (const e of readdirSync(this.dir)) {
      if (/^\d{8}$/.test(e) && Number(e) <= upTo) rmSync(join(this.dir, e), { force: true });
      else if (/^checkpoint\.\d{8}$/.test(e) && Number(e.slice(11)) < keepCheckpoint) {
        rmSync(join(this.dir, e), { recursive: true, force: true });
      }
    }
  }

  /** Waits for in-flight and queued commits, then closes the segment. */
  async close(): Promise<void> {
    while (this.#inflight || this.#queue.length > 0 || this.#scheduled) {
      if (this.#inflight) await this.#inflight;
      else await new Promise((r) => setImmediate(r));
    }
    if (this.#fd >= 0) closeSync(this.#fd);
    this.#fd = -1;
  }
}
