/**
 * Immutable on-disk blocks (layout in FORMAT.md): a directory with meta.json, an index file
 * (symbols, series with their chunk references, a CRC32) and a chunks file of XOR chunks.
 * A block is written into `<name>.tmp`, fsynced, then renamed, so a crash leaves either a whole
 * block or a `.tmp` directory that open() deletes.
 */
import { randomBytes } from "node:crypto";
import {
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import { crc32 } from "node:zlib";
import type { Labels } from "../storage/interface.ts";
import { xorDecodeInto } from "./chunk.ts";
import { CorruptionError } from "./errors.ts";
import type { SampleArrays } from "./head.ts";
import { labelsFromSyms, SymbolTable } from "./labels.ts";
import type { PostingsIndex } from "./matchers.ts";
import type { PostingsList } from "./postings.ts";

const INDEX_MAGIC = "SVCIDX01";
const CHUNKS_MAGIC = "SVCCHK01";

export interface BlockMeta {
  readonly version: 1;
  readonly name: string;
  /** First and last sample time, inclusive (ms). */
  readonly minTime: number;
  readonly maxTime: number;
  /** Every sample below this time (ms) that the head held when the block was cut is in a block. */
  readonly coversBefore: number;
  /** The WAL segment that was current when the block was cut (replay skips what blocks hold). */
  readonly walSegment: number;
  readonly numSeries: number;
  readonly numSamples: number;
  readonly numChunks: number;
}

export interface BlockChunk {
  readonly bytes: Uint8Array;
  readonly count: number;
  readonly minT: number;
  readonly maxT: number;
}

export interface BlockSeries {
  readonly labels: Labels;
  /**
   * The series' chunks, time ordered. Called once, while the block is written, so a writer holds
   * one series' chunks at a time; an empty result leaves the series out.
   */
  readonly chunks: () => readonly BlockChunk[];
}

/** Bytes of chunk data gathered before one write to the chunks file. */
const CHUNK_WRITE_BUFFER = 1 << 20;

/**
 * Writes a block from series sorted by labels, streaming their chunks; returns its meta, or
 * undefined when no series had a chunk (nothing is left on disk then). Synchronous (see db.ts).
 */
export function writeBlock(
  dir: string,
  series: readonly BlockSeries[],
  coversBefore: number,
  walSegment: number,
): BlockMeta | undefined {
  const name = `${Date.now().toString(36).padStart(9, "0")}-${randomBytes(4).toString("hex")}`;
  const tmp = join(dir, `${name}.tmp`);
  mkdirSync(tmp, { recursive: true });
  const syms = new SymbolTable();
  for (const s of series) {
    for (const l of s.labels) {
      syms.intern(l.name);
      syms.intern(l.value);
    }
  }
  const chunksFd = openSync(join(tmp, "chunks"), "w");
  const pending = Buffer.allocUnsafe(CHUNK_WRITE_BUFFER);
  let pendingLen = 0;
  const flushChunks = (): void => {
    let off = 0;
    while (off < pendingLen) off += writeSync(chunksFd, pending, off, pendingLen - off);
    pendingLen = 0;
  };
  const ix = new ByteWriter();
  let offset = writeSync(chunksFd, Buffer.from(CHUNKS_MAGIC, "latin1"));
  let minTime = Number.POSITIVE_INFINITY;
  let maxTime = Number.NEGATIVE_INFINITY;
  let numSamples = 0;
  let numChunks = 0;
  let numSeries = 0;
  try {
    for (const s of series) {
      const chunks = s.chunks();
      if (chunks.length === 0) continue;
      numSeries++;
      ix.u16(s.labels.length);
      for (const l of s.labels) {
        ix.u32(syms.get(l.name));
        ix.u32(syms.get(l.value));
      }
      ix.u32(chunks.length);
      for (const c of chunks) {
        if (pendingLen + c.bytes.length > pending.length) flushChunks();
        if (c.bytes.length > pending.length) writeSync(chunksFd, c.bytes);
        else {
          pending.set(c.bytes, pendingLen);
          pendingLen += c.bytes.length;
        }
        ix.f64(c.minT);
        ix.f64(c.maxT);
        ix.f64(offset);
        ix.u32(c.bytes.length);
        ix.u16(c.count);
        offset += c.bytes.length;
        minTime = Math.min(minTime, c.minT);
        maxTime = Math.max(maxTime, c.maxT);
        numSamples += c.count;
        numChunks++;
      }
    }
    flushChunks();
    fsyncSync(chunksFd);
  } finally {
    closeSync(chunksFd);
  }
  if (numSeries === 0) {
    rmSync(tmp, { recursive: true, force: true });
    return undefined;
  }
  const head = new ByteWriter();
  head.str8(INDEX_MAGIC);
  head.u32(syms.size);
  for (let i = 0; i < syms.size; i++) head.bytes32(Buffer.from(syms.str(i), "utf8"));
  head.u32(numSeries);
  const body = Buffer.concat([head.finish(), ix.finish()]);
  const index = Buffer.alloc(body.length + 4);
  body.copy(index);
  index.writeUInt32LE(crc32(body), body.length);
  writeDurable(join(tmp, "index"), index);
  const meta: BlockMeta = {
    version: 1,
    name,
    minTime,
    maxTime,
    coversBefore,
    walSegment,
    numSeries,
    numSamples,
    numChunks,
  };
  writeDurable(join(tmp, "meta.json"), Buffer.from(JSON.stringify(meta, null, 2)));
  renameSync(tmp, join(dir, name));
  fsyncDir(dir);
  return meta;
}

export function writeDurable(path: string, data: Uint8Array): void {
  const fd = openSync(path, "w");
  try {
    writeSync(fd, data);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

export function fsyncDir(dir: string): void {
  const fd = openSync(dir, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** A block opened for reading: index in memory, chunks read on demand with pread. */
export class Block implements PostingsIndex {
  readonly meta: BlockMeta;
  readonly dir: string;
  readonly #syms = new SymbolTable();
  readonly #labelArena: Uint32Array;
  readonly #labelOff: Uint32Array;
  readonly #labelCnt: Uint16Array;
  /** Chunk metas, flat; series i owns chunks [chunkStart[i], chunkStart[i+1]). */
  readonly #chunkStart: Uint32Array;
  readonly #cMinT: Float64Array;
  readonly #cMaxT: Float64Array;
  readonly #cOff: Float64Array;
  readonly #cLen: Uint32Array;
  readonly #cCount: Uint16Array;
  readonly #postings = new Map<string, Map<string, number[]>>();
  readonly #all: Uint32Array;
  #fd: number;

  constructor(dir: string) {
    this.dir = dir;
    this.meta = JSON.parse(readFileSync(join(dir, "meta.json"), "utf8")) as BlockMeta;
    const buf = readFileSync(join(dir, "index"));
    if (buf.length < 12 || buf.readUInt32LE(buf.length - 4) !== crc32(buf.subarray(0, buf.length - 4))) {
      throw new CorruptionError(join(dir, "index"), "checksum mismatch");
    }
    const r = new ByteReader(buf);
    if (r.str8() !== INDEX_MAGIC) throw new CorruptionError(join(dir, "index"), "bad magic");
    const nsyms = r.u32();
    for (let i = 0; i < nsyms; i++) this.#syms.intern(r.bytes32().toString("utf8"));
    const nseries = r.u32();
    this.#labelOff = new Uint32Array(nseries);
    this.#labelCnt = new Uint16Array(nseries);
    this.#chunkStart = new Uint32Array(nseries + 1);
    this.#all = Uint32Array.from({ length: nseries }, (_, i) => i);
    const arena: number[] = [];
    const cmeta: number[][] = [[], [], [], [], []];
    for (let i = 0; i < nseries; i++) {
      const nl = r.u16();
      this.#labelOff[i] = arena.length;
      this.#labelCnt[i] = nl;
      for (let k = 0; k < nl; k++) {
        const n = r.u32();
        const v = r.u32();
        arena.push(n, v);
        const name = this.#syms.str(n);
        let byValue = this.#postings.get(name);
        if (!byValue) {
          byValue = new Map();
          this.#postings.set(name, byValue);
        }
        const value = this.#syms.str(v);
        const p = byValue.get(value);
        if (p) p.push(i);
        else byValue.set(value, [i]);
      }
      const nc = r.u32();
      this.#chunkStart[i] = cmeta[0].length;
      for (let k = 0; k < nc; k++) {
        cmeta[0].push(r.f64());
        cmeta[1].push(r.f64());
        cmeta[2].push(r.f64());
        cmeta[3].push(r.u32());
        cmeta[4].push(r.u16());
      }
    }
    this.#chunkStart[nseries] = cmeta[0].length;
    this.#labelArena = Uint32Array.from(arena);
    this.#cMinT = Float64Array.from(cmeta[0]);
    this.#cMaxT = Float64Array.from(cmeta[1]);
    this.#cOff = Float64Array.from(cmeta[2]);
    this.#cLen = Uint32Array.from(cmeta[3]);
    this.#cCount = Uint16Array.from(cmeta[4]);
    this.#fd = openSync(join(dir, "chunks"), "r");
  }

  get numSeries(): number {
    return this.#labelOff.length;
  }

  labels(id: number): Labels {
    return labelsFromSyms(this.#syms, this.#labelArena, this.#labelOff[id], this.#labelCnt[id]);
  }

  /** Samples of series id with mint ≤ t ≤ maxt; the arrays belong to the caller. */
  samples(id: number, mint: number, maxt: number): SampleArrays {
    let first = -1;
    let last = -1;
    let total = 0;
    for (let c = this.#chunkStart[id]; c < this.#chunkStart[id + 1]; c++) {
      if (this.#cMaxT[c] < mint || this.#cMinT[c] > maxt) continue;
      if (first < 0) first = c;
      last = c;
      total += this.#cCount[c];
    }
    if (first < 0) return { t: new Float64Array(0), v: new Float64Array(0) };
    // A series' chunks are contiguous in the file: one read covers them all.
    const start = this.#cOff[first];
    const buf = Buffer.allocUnsafe(this.#cOff[last] + this.#cLen[last] - start);
    readSync(this.#fd, buf, 0, buf.length, start);
    const t = new Float64Array(total);
    const v = new Float64Array(total);
    let n = 0;
    for (let c = first; c <= last; c++) {
      if (this.#cMaxT[c] < mint || this.#cMinT[c] > maxt) continue;
      n = xorDecodeInto(buf, this.#cOff[c] - start, this.#cCount[c], mint, maxt, t, v, n);
    }
    return n === total ? { t, v } : { t: t.slice(0, n), v: v.slice(0, n) };
  }

  /** Whether series id has a sample in [mint, maxt] (ms, inclusive); decodes only straddling chunks. */
  hasSamplesIn(id: number, mint: number, maxt: number): boolean {
    let straddles = false;
    for (let c = this.#chunkStart[id]; c < this.#chunkStart[id + 1]; c++) {
      if (this.#cMaxT[c] < mint || this.#cMinT[c] > maxt) continue;
      if (this.#cMinT[c] >= mint && this.#cMaxT[c] <= maxt) return true;
      straddles = true;
    }
    return straddles && this.samples(id, mint, maxt).t.length > 0;
  }

  labelValues(name: string): Iterable<string> {
    return this.#postings.get(name)?.keys() ?? [];
  }

  postings(name: string, value: string): PostingsList {
    return this.#postings.get(name)?.get(value) ?? [];
  }

  allPostings(): PostingsList {
    return this.#all;
  }

  sizeBytes(): number {
    let n = 0;
    for (const f of ["meta.json", "index", "chunks"]) n += statSync(join(this.dir, f)).size;
    return n;
  }

  close(): void {
    if (this.#fd >= 0) closeSync(this.#fd);
    this.#fd = -1;
  }

  /** Closes and deletes the block directory. */
  delete(): void {
    this.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Little-endian append buffer. */
export class ByteWriter {
  #buf = Buffer.alloc(4096);
  #n = 0;
  #reserve(k: number): void {
    if (this.#n + k <= this.#buf.length) return;
    const b = Buffer.alloc(Math.max(this.#buf.length * 2, this.#n + k));
    this.#buf.copy(b, 0, 0, this.#n);
    this.#buf = b;
  }
  u8(x: number): void {
    this.#reserve(1);
    this.#buf[this.#n++] = x;
  }
  u16(x: number): void {
    this.#reserve(2);
    this.#n = this.#buf.writeUInt16LE(x, this.#n);
  }
  u32(x: number): void {
    this.#reserve(4);
    this.#n = this.#buf.writeUInt32LE(x >>> 0, this.#n);
  }
  f64(x: number): void {
    this.#reserve(8);
    this.#n = this.#buf.writeDoubleLE(x, this.#n);
  }
  bytes32(b: Uint8Array): void {
    this.u32(b.length);
    this.#reserve(b.length);
    this.#buf.set(b, this.#n);
    this.#n += b.length;
  }
  /** Raw bytes without a length prefix. */
  bytes32Raw(b: Uint8Array): void {
    this.#reserve(b.length);
    this.#buf.set(b, this.#n);
    this.#n += b.length;
  }
  str8(s: string): void {
    this.#reserve(s.length);
    this.#n += this.#buf.write(s, this.#n, "latin1");
  }
  get length(): number {
    return this.#n;
  }
  /** The written bytes (a view; the writer must not be used afterwards). */
  finish(): Buffer {
    return this.#buf.subarray(0, this.#n);
  }
}

export class ByteReader {
  pos = 0;
  constructor(readonly buf: Buffer) {}
  u8(): number {
    return this.buf[this.pos++];
  }
  u16(): number {
    const x = this.buf.readUInt16LE(this.pos);
    this.pos += 2;
    return x;
  }
  u32(): number {
    const x = this.buf.readUInt32LE(this.pos);
    this.pos += 4;
    return x;
  }
  f64(): number {
    const x = this.buf.readDoubleLE(this.pos);
    this.pos += 8;
    return x;
  }
  bytes32(): Buffer {
    const n = this.u32();
    const b = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return b;
  }
  str8(): string {
    const s = this.buf.toString("latin1", this.pos, this.pos + 8);
    this.pos += 8;
    return s;
  }
}
