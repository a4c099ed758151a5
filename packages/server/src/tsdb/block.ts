/**
 * Immutable on-disk blocks (layout in FORMAT.md): a directory with meta.json, an index file
 * (symbols, series with their chunk references, a CRC32) and a chunks file of XOR chunks.
 * A block is written into `<name>.tmp`, fsynced, then renamed, so a crash leaves either a whole
 * block or a `.tmp` directory that open() deletes.
 */
import { randomBytes } from "node:crypto";
import {
  closeSync,
  fstatSync,
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
import { dirname, join } from "node:path";
import { crc32 } from "node:zlib";
import type { Labels } from "../storage/interface.ts";
import type { Rollups } from "../storage/rollups.ts";
import { xorDecodeInto } from "./chunk.ts";
import type { DamageSink } from "./damage.ts";
import { CorruptionError } from "./errors.ts";
import type { SampleArrays } from "./head.ts";
import { labelsFromSyms, SymbolTable, symsEqual, symsHash } from "./labels.ts";
import type { PostingsIndex } from "./matchers.ts";
import type { PostingsList } from "./postings.ts";
import { decodeRollupsInto } from "./rollup-codec.ts";

/**
 * v1: no rollups (still read); v2 adds each series' rollup reference (still read); v3: every chunk in
 * the chunks file and every series' rollups in the rollups file is followed by its CRC32, so damage
 * is found (and dropped) per chunk.
 */
const INDEX_MAGIC_V1 = "SVCIDX01";
const INDEX_MAGIC_V2 = "SVCIDX02";
const INDEX_MAGIC = "SVCIDX03";
/** Bytes of the CRC32 after each chunk and each series' rollups (index v3). */
const CRC_BYTES = 4;
const CHUNKS_MAGIC = "SVCCHK01";
const ROLLUPS_MAGIC = "SVCRLP01";

export interface BlockMeta {
  /** 1: index v1/v2, no per-chunk CRC; 2: index v3 (TSDB_FORMAT.block). */
  readonly version: 1 | 2;
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
  /** Resolution of the block's rollups (ms); absent in blocks written before rollups. */
  readonly rollupResolutionMs?: number;
  /** Names of the blocks this one was merged from (deleted once it is in place). */
  readonly sources?: readonly string[];
}

export interface BlockChunk {
  readonly bytes: Uint8Array;
  readonly count: number;
  readonly minT: number;
  readonly maxT: number;
}

/** Rollup ranges closer than this are read together (reading the gap is cheaper than a syscall). */
const COALESCE_GAP = 16 * 1024;
/** Upper bound of one coalesced rollup read, bytes. */
const COALESCE_MAX = 1 << 20;

/** Bytes of chunk (or rollup) data gathered before one write to its file. */
const WRITE_BUFFER = 1 << 20;

/** A file written through a buffer, tracking its size. */
export class BufferedFile {
  readonly fd: number;
  readonly #pending = Buffer.allocUnsafe(WRITE_BUFFER);
  #pendingLen = 0;
  size = 0;
  constructor(path: string, magic = "") {
    this.fd = openSync(path, "w");
    if (magic) this.write(Buffer.from(magic, "latin1"));
  }
  /** Appends bytes; returns their offset in the file. */
  write(b: Uint8Array): number {
    const at = this.size;
    if (this.#pendingLen + b.length > this.#pending.length) this.flush();
    if (b.length > this.#pending.length) writeAll(this.fd, b);
    else {
      this.#pending.set(b, this.#pendingLen);
      this.#pendingLen += b.length;
    }
    this.size += b.length;
    return at;
  }
  flush(): void {
    writeAll(this.fd, this.#pending.subarray(0, this.#pendingLen));
    this.#pendingLen = 0;
  }
  close(sync: boolean): void {
    try {
      if (sync) {
        this.flush();
        fsyncSync(this.fd);
      }
    } finally {
      closeSync(this.fd);
    }
  }
}

function writeAll(fd: number, b: Uint8Array): void {
  let off = 0;
  while (off < b.length) off += writeSync(fd, b, off, b.length - off);
}

/**
 * Writes one block series by series (labels ascending), so a writer holds one series' data at a
 * time; `finish` writes the index and meta and renames the directory into place. Used by the head
 * cut (synchronously) and by block merges (which yield between series).
 */
export class BlockWriter {
  readonly #dir: string;
  readonly #name: string;
  readonly #tmp: string;
  readonly #syms = new SymbolTable();
  readonly #ix = new ByteWriter();
  readonly #chunks: BufferedFile;
  readonly #rollups: BufferedFile;
  #minTime = Number.POSITIVE_INFINITY;
  #maxTime = Number.NEGATIVE_INFINITY;
  #numSamples = 0;
  #numChunks = 0;
  #numSeries = 0;
  #done = false;
  readonly #groupLabel: string;
  /** Rollups held until finish: written grouped by `groupLabel`, their offsets patched into the index. */
  #pendingRollups: { key: string; at: number; bytes: Uint8Array }[] = [];

  /**
   * `groupLabel`: the rollups file stores series with the same value of this label side by side (a
   * VM's series, for `vm`), so a read of one VM's series takes one read per block instead of one per
   * series; "" keeps label order.
   */
  constructor(dir: string, groupLabel = "") {
    this.#dir = dir;
    this.#groupLabel = groupLabel;
    this.#name = `${Date.now().toString(36).padStart(9, "0")}-${randomBytes(4).toString("hex")}`;
    this.#tmp = join(dir, `${this.#name}.tmp`);
    mkdirSync(this.#tmp, { recursive: true });
    this.#chunks = new BufferedFile(join(this.#tmp, "chunks"), CHUNKS_MAGIC);
    this.#rollups = new BufferedFile(join(this.#tmp, "rollups"), ROLLUPS_MAGIC);
  }

  /** Adds a series after every series added so far (by labels); no chunks leaves it out. */
  add(labels: Labels, chunks: readonly BlockChunk[], rollups?: Uint8Array): void {
    if (chunks.length === 0) return;
    const ix = this.#ix;
    this.#numSeries++;
    ix.u16(labels.length);
    for (const l of labels) {
      ix.u32(this.#syms.intern(l.name));
      ix.u32(this.#syms.intern(l.value));
    }
    ix.u32(chunks.length);
    for (const c of chunks) {
      ix.f64(c.minT);
      ix.f64(c.maxT);
      ix.f64(this.#chunks.write(c.bytes));
      this.#chunks.write(crcBytes(c.bytes));
      ix.u32(c.bytes.length);
      ix.u16(c.count);
      if (c.minT < this.#minTime) this.#minTime = c.minT;
      if (c.maxT > this.#maxTime) this.#maxTime = c.maxT;
      this.#numSamples += c.count;
      this.#numChunks++;
    }
    if (rollups) {
      let key = "";
      for (const l of labels) if (l.name === this.#groupLabel) key = l.value;
      this.#pendingRollups.push({ key, at: ix.length, bytes: rollups });
    }
    ix.f64(0);
    ix.u32(rollups ? rollups.length : 0);
  }

  /**
   * Makes the block durable and visible; returns its meta, or undefined when no series was added
   * (nothing is left on disk then).
   */
  finish(extra: {
    coversBefore: number;
    walSegment: number;
    rollupResolutionMs: number;
    sources?: readonly string[];
  }): BlockMeta | undefined {
    this.#done = true;
    const empty = this.#numSeries === 0;
    // Stable sort: within a group, series stay in label order.
    this.#pendingRollups.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    for (const r of this.#pendingRollups) {
      this.#ix.setF64(r.at, this.#rollups.write(r.bytes));
      this.#rollups.write(crcBytes(r.bytes));
    }
    this.#pendingRollups = [];
    this.#chunks.close(!empty);
    this.#rollups.close(!empty);
    if (empty) {
      rmSync(this.#tmp, { recursive: true, force: true });
      return undefined;
    }
    const head = new ByteWriter();
    head.str8(INDEX_MAGIC);
    head.u32(this.#syms.size);
    for (let i = 0; i < this.#syms.size; i++) head.bytes32(Buffer.from(this.#syms.str(i), "utf8"));
    head.u32(this.#numSeries);
    const body = Buffer.concat([head.finish(), this.#ix.finish()]);
    const index = Buffer.alloc(body.length + 4);
    body.copy(index);
    index.writeUInt32LE(crc32(body), body.length);
    writeDurable(join(this.#tmp, "index"), index);
    const meta: BlockMeta = {
      version: 2,
      name: this.#name,
      minTime: this.#minTime,
      maxTime: this.#maxTime,
      coversBefore: extra.coversBefore,
      walSegment: extra.walSegment,
      numSeries: this.#numSeries,
      numSamples: this.#numSamples,
      numChunks: this.#numChunks,
      ...(extra.rollupResolutionMs > 0 ? { rollupResolutionMs: extra.rollupResolutionMs } : {}),
      ...(extra.sources ? { sources: extra.sources } : {}),
    };
    writeDurable(join(this.#tmp, "meta.json"), Buffer.from(JSON.stringify(meta, null, 2)));
    renameSync(this.#tmp, join(this.#dir, this.#name));
    fsyncDir(this.#dir);
    return meta;
  }

  /** Drops an unfinished block (a failed merge). */
  abort(): void {
    if (this.#done) return;
    this.#done = true;
    this.#chunks.close(false);
    this.#rollups.close(false);
    rmSync(this.#tmp, { recursive: true, force: true });
  }
}

/** The CRC32 written after a chunk or a series' rollups (index v3). */
function crcBytes(b: Uint8Array): Buffer {
  const c = Buffer.allocUnsafe(CRC_BYTES);
  c.writeUInt32LE(crc32(b), 0);
  return c;
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
  /** symsHash of each series' labels, NaN until first asked (8 bytes per series). */
  readonly #labelHash: Float64Array;
  /** Chunk metas, flat; series i owns chunks [chunkStart[i], chunkStart[i+1]). */
  readonly #chunkStart: Uint32Array;
  readonly #cMinT: Float64Array;
  readonly #cMaxT: Float64Array;
  readonly #cOff: Float64Array;
  readonly #cLen: Uint32Array;
  readonly #cCount: Uint16Array;
  /** Each series' encoded rollups in the rollups file (length 0: none); empty in v1 blocks. */
  readonly #rOff: Float64Array;
  readonly #rLen: Uint32Array;
  readonly #postings = new Map<string, Map<string, number[]>>();
  readonly #all: Uint32Array;
  readonly #withRollups: boolean;
  /** Owned descriptors of the chunks and rollups files (-1: not open); see `lend`. */
  #fd = -1;
  #rfd = -1;
  /** A reader in another thread: reads go to a descriptor the store lends it (`lend`), never its own. */
  readonly #borrower: boolean;
  /** The whole rollups file while it is held in memory (holdRollups), else reads go to the file. */
  #rbuf: Buffer | undefined;
  /** Index v3: each chunk and each series' rollups is followed by its CRC32 (else 0). */
  readonly #crc: number;
  /** Told of a damaged chunk or rollup, once per unit (a borrower has none: it only drops it). */
  readonly #onDamage: DamageSink | undefined;
  readonly #reported = new Set<string>();

  /**
   * `borrower`: this thread only parses the index and reads chunks through descriptors the store's
   * thread lends it (a query worker): it opens no file it would have to close, so a worker terminated
   * at a query's deadline leaks none.
   */
  constructor(dir: string, opts: { borrower?: boolean; onDamage?: DamageSink } = {}) {
    this.dir = dir;
    this.#borrower = opts.borrower === true;
    this.#onDamage = opts.onDamage;
    this.meta = JSON.parse(readFileSync(join(dir, "meta.json"), "utf8")) as BlockMeta;
    const buf = readFileSync(join(dir, "index"));
    if (buf.length < 12 || buf.readUInt32LE(buf.length - 4) !== crc32(buf.subarray(0, buf.length - 4))) {
      throw new CorruptionError(join(dir, "index"), "checksum mismatch");
    }
    const r = new ByteReader(buf);
    const magic = r.str8();
    if (magic !== INDEX_MAGIC && magic !== INDEX_MAGIC_V2 && magic !== INDEX_MAGIC_V1)
      throw new CorruptionError(join(dir, "index"), "bad magic");
    const withRollups = magic !== INDEX_MAGIC_V1;
    this.#crc = magic === INDEX_MAGIC ? CRC_BYTES : 0;
    const nsyms = r.u32();
    for (let i = 0; i < nsyms; i++) this.#syms.intern(r.str32());
    const nseries = r.u32();
    this.#labelOff = new Uint32Array(nseries);
    this.#labelCnt = new Uint16Array(nseries);
    this.#labelHash = new Float64Array(nseries).fill(Number.NaN);
    this.#chunkStart = new Uint32Array(nseries + 1);
    this.#all = Uint32Array.from({ length: nseries }, (_, i) => i);
    const arena: number[] = [];
    const cmeta: number[][] = [[], [], [], [], []];
    this.#rOff = new Float64Array(withRollups ? nseries : 0);
    this.#rLen = new Uint32Array(withRollups ? nseries : 0);
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
      if (withRollups) {
        this.#rOff[i] = r.f64();
        this.#rLen[i] = r.u32();
      }
    }
    this.#chunkStart[nseries] = cmeta[0].length;
    this.#labelArena = Uint32Array.from(arena);
    this.#cMinT = Float64Array.from(cmeta[0]);
    this.#cMaxT = Float64Array.from(cmeta[1]);
    this.#cOff = Float64Array.from(cmeta[2]);
    this.#cLen = Uint32Array.from(cmeta[3]);
    this.#cCount = Uint16Array.from(cmeta[4]);
    this.#withRollups = withRollups;
    if (this.#borrower) return;
    this.#fd = openSync(join(dir, "chunks"), "r");
    if (withRollups) this.#rfd = openSync(join(dir, "rollups"), "r");
    const head = Buffer.alloc(CHUNKS_MAGIC.length);
    readSync(this.#fd, head, 0, head.length, 0);
    if (head.toString("latin1") !== CHUNKS_MAGIC)
      this.#damaged("block_chunk", "chunks", 0, head.length, 0, "bad chunks file header");
  }

  #damaged(
    kind: "block_chunk" | "block_rollups",
    file: string,
    offset: number,
    bytes: number,
    samples: number,
    detail: string,
  ): void {
    const key = `${file}@${offset}`;
    if (this.#reported.has(key)) return;
    this.#reported.add(key);
    this.#onDamage?.({ kind, file: join(this.dir, file), offset, bytes, samples, detail });
  }

  /** Whether chunk c (at `at` in `buf`) matches its CRC (always, before index v3); reports it if not. */
  #chunkOk(buf: Buffer, at: number, c: number): boolean {
    if (this.#crc === 0) return true;
    const len = this.#cLen[c];
    if (
      at + len + CRC_BYTES <= buf.length &&
      crc32(buf.subarray(at, at + len)) === buf.readUInt32LE(at + len)
    )
      return true;
    const samples = this.#cCount[c];
    this.#damaged(
      "block_chunk",
      "chunks",
      this.#cOff[c],
      len + CRC_BYTES,
      samples,
      "chunk checksum mismatch",
    );
    return false;
  }

  /** Reads chunks first..last (and the last one's CRC) with one pread. */
  #readChunks(first: number, last: number): Buffer {
    const start = this.#cOff[first];
    const buf = Buffer.allocUnsafe(this.#cOff[last] + this.#cLen[last] + this.#crc - start);
    const got = readSync(this.#chunksFd(), buf, 0, buf.length, start);
    // A chunks file cut short: the missing bytes fail their CRC instead of decoding stale memory.
    if (got < buf.length) buf.fill(0, got);
    return buf;
  }

  /**
   * Checks every chunk's and every rollup's CRC (index v3; earlier blocks have none to check),
   * reporting each damaged one to the block's sink; returns how many were damaged.
   */
  verify(): number {
    let bad = 0;
    for (let id = 0; id < this.numSeries; id++) {
      const first = this.#chunkStart[id];
      const last = this.#chunkStart[id + 1] - 1;
      if (last >= first) {
        const buf = this.#readChunks(first, last);
        for (let c = first; c <= last; c++)
          if (!this.#chunkOk(buf, this.#cOff[c] - this.#cOff[first], c)) bad++;
      }
      if (this.#withRollups && this.#rLen[id] > 0 && this.#crc > 0) {
        const buf = Buffer.alloc(this.#rLen[id] + this.#crc);
        readSync(this.#rollupsFd(), buf, 0, buf.length, this.#rOff[id]);
        if (!this.#rollupOk(buf, 0, id)) bad++;
      }
    }
    return bad;
  }

  /** Whether series id's rollups (at `at` in `buf`) match their CRC; reports them if not. */
  #rollupOk(buf: Buffer, at: number, id: number): boolean {
    if (this.#crc === 0) return true;
    const len = this.#rLen[id];
    if (
      at + len + CRC_BYTES <= buf.length &&
      crc32(buf.subarray(at, at + len)) === buf.readUInt32LE(at + len)
    )
      return true;
    const detail = "rollups checksum mismatch (reads use the raw samples)";
    this.#damaged("block_rollups", "rollups", this.#rOff[id], len + CRC_BYTES, 0, detail);
    return false;
  }

  /** The chunks file's descriptor, for `lend` in another thread's Block of the same directory. */
  get chunksFd(): number {
    return this.#fd;
  }

  /**
   * A borrower's reads go to `fd` (the store's chunksFd of this block, valid while the store holds
   * the block for the borrower's query) until `lend(-1)`.
   */
  lend(fd: number): void {
    if (!this.#borrower) throw new Error(`block ${this.meta.name}: lend is for a borrower's Block`);
    this.#fd = fd;
  }

  #chunksFd(): number {
    if (this.#fd < 0) throw new Error(`block ${this.meta.name}: chunks read with no open file`);
    return this.#fd;
  }

  /** The rollups file, or -1 when the block has none. */
  #rollupsFd(): number {
    if (this.#withRollups && this.#rfd < 0)
      throw new Error(`block ${this.meta.name}: rollups read with no open file`);
    return this.#rfd;
  }

  get numSeries(): number {
    return this.#labelOff.length;
  }

  labels(id: number): Labels {
    return labelsFromSyms(this.#syms, this.#labelArena, this.#labelOff[id], this.#labelCnt[id]);
  }

  /** symsHash of series id's labels, computed once per series (the block never changes). */
  labelsHash(id: number): number {
    let h = this.#labelHash[id];
    if (Number.isNaN(h)) {
      h = symsHash(this.#syms, this.#labelArena, this.#labelOff[id], this.#labelCnt[id]);
      this.#labelHash[id] = h;
    }
    return h;
  }

  /** Whether series id's labels are exactly `labels`, without building them. */
  hasLabels(id: number, labels: Labels): boolean {
    return symsEqual(this.#syms, this.#labelArena, this.#labelOff[id], this.#labelCnt[id], labels);
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
    const buf = this.#readChunks(first, last);
    const t = new Float64Array(total);
    const v = new Float64Array(total);
    let n = 0;
    for (let c = first; c <= last; c++) {
      if (this.#cMaxT[c] < mint || this.#cMinT[c] > maxt) continue;
      // A damaged chunk loses only its own samples (index v3 blocks; see docs/operations.md).
      if (!this.#chunkOk(buf, this.#cOff[c] - start, c)) continue;
      n = xorDecodeInto(buf, this.#cOff[c] - start, this.#cCount[c], mint, maxt, t, v, n);
    }
    return n === total ? { t, v } : { t: t.slice(0, n), v: v.slice(0, n) };
  }

  /** First and last sample time of series id (ms). */
  timeRange(id: number): { minT: number; maxT: number } {
    return { minT: this.#cMinT[this.#chunkStart[id]], maxT: this.#cMaxT[this.#chunkStart[id + 1] - 1] };
  }

  /**
   * Series id's chunks as stored (one read), for copying into a merged block; a damaged chunk is
   * left out (copied, it would get a fresh CRC in the merged block and pass as sound).
   */
  rawChunks(id: number): BlockChunk[] {
    const first = this.#chunkStart[id];
    const last = this.#chunkStart[id + 1] - 1;
    if (last < first) return [];
    const start = this.#cOff[first];
    const buf = this.#readChunks(first, last);
    const out: BlockChunk[] = [];
    for (let c = first; c <= last; c++) {
      const at = this.#cOff[c] - start;
      if (!this.#chunkOk(buf, at, c)) continue;
      out.push({
        bytes: buf.subarray(at, at + this.#cLen[c]),
        count: this.#cCount[c],
        minT: this.#cMinT[c],
        maxT: this.#cMaxT[c],
      });
    }
    return out;
  }

  /**
   * Appends series id's rollup buckets ending in [minEnd, maxEnd] to `out`; false (nothing appended)
   * when the block has no rollups of `out`'s resolution for it.
   */
  rollups(id: number, minEnd: number, maxEnd: number, out: Rollups): boolean {
    return this.rollupsMany([id], minEnd, maxEnd, [out])[0];
  }

  /**
   * `rollups` for several series at once: ranges of the rollups file that lie close together are
   * read with one pread (a VM's series, stored side by side). `outs[k]` receives series ids[k]'s
   * buckets; the result says, per series, whether it had rollups that could be appended.
   */
  rollupsMany(ids: readonly number[], minEnd: number, maxEnd: number, outs: readonly Rollups[]): boolean[] {
    const ok = ids.map(() => false);
    if (!this.#withRollups || ids.length === 0) return ok;
    const order = ids
      .map((_, k) => k)
      .filter((k) => this.#rLen[ids[k]] > 0 && this.meta.rollupResolutionMs === outs[k].resolutionMs)
      .sort((a, b) => this.#rOff[ids[a]] - this.#rOff[ids[b]]);
    for (let i = 0; i < order.length; ) {
      // One run: following ranges less than COALESCE_GAP apart, up to COALESCE_MAX bytes.
      const start = this.#rOff[ids[order[i]]];
      let end = start + this.#rLen[ids[order[i]]] + this.#crc;
      let j = i + 1;
      while (j < order.length) {
        const off = this.#rOff[ids[order[j]]];
        const e = off + this.#rLen[ids[order[j]]] + this.#crc;
        if (off - end > COALESCE_GAP || e - start > COALESCE_MAX) break;
        end = Math.max(end, e);
        j++;
      }
      let buf: Buffer;
      let base = start;
      if (this.#rbuf) {
        buf = this.#rbuf;
        base = 0;
      } else {
        buf = Buffer.allocUnsafe(end - start);
        readSync(this.#rollupsFd(), buf, 0, buf.length, start);
      }
      for (let k = i; k < j; k++) {
        const id = ids[order[k]];
        const at = this.#rOff[id] - base;
        // Damaged rollups: the caller reads the series' raw samples instead (nothing lost).
        if (!this.#rollupOk(buf, at, id)) continue;
        ok[order[k]] = decodeRollupsInto(
          buf.subarray(at, at + this.#rLen[id]),
          minEnd,
          maxEnd,
          outs[order[k]],
        );
      }
      i = j;
    }
    return ok;
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

  /** Bytes of the chunks file held by the series `ids` (their chunks and each one's CRC). */
  chunkBytesOf(ids: PostingsList): number {
    let n = 0;
    for (let i = 0; i < ids.length; i++)
      for (let c = this.#chunkStart[ids[i]]; c < this.#chunkStart[ids[i] + 1]; c++)
        n += this.#cLen[c] + this.#crc;
    return n;
  }

  /** Size of the rollups file (0 when the block has none). */
  rollupsBytes(): number {
    return this.#withRollups ? fstatSync(this.#rollupsFd()).size : 0;
  }

  /** Whether the rollups file is held in memory. */
  get rollupsHeld(): boolean {
    return this.#rbuf !== undefined;
  }

  /**
   * Reads the rollups file into memory once, so rollup reads no longer touch the file: no syscall
   * per read, and no stall when the OS has dropped the pages (see TsdbOptions.rollupMemoryBytes).
   */
  holdRollups(): void {
    if (this.#rbuf || !this.#withRollups) return;
    const fd = this.#rollupsFd();
    const size = fstatSync(fd).size;
    const buf = Buffer.allocUnsafeSlow(size);
    let got = 0;
    while (got < size) {
      const n = readSync(fd, buf, got, size - got, got);
      if (n === 0) throw new CorruptionError(join(this.dir, "rollups"), "file shrank while read");
      got += n;
    }
    this.#rbuf = buf;
  }

  /** Drops the in-memory copy of the rollups file; reads go to the file again. */
  releaseRollups(): void {
    this.#rbuf = undefined;
  }

  sizeBytes(): number {
    let n = 0;
    const files = ["meta.json", "index", "chunks", ...(this.#withRollups ? ["rollups"] : [])];
    for (const f of files) n += statSync(join(this.dir, f)).size;
    return n;
  }

  close(): void {
    this.#rbuf = undefined;
    if (!this.#borrower) {
      if (this.#fd >= 0) closeSync(this.#fd);
      if (this.#rfd >= 0) closeSync(this.#rfd);
    }
    this.#fd = -1;
    this.#rfd = -1;
  }

  /** Closes and deletes the block directory. */
  delete(): void {
    this.close();
    // Renamed out of sight first (durably): a crash in the middle of the recursive removal must not
    // leave a block directory with meta.json but without its chunks. Open removes `*.tmp` leftovers.
    const doomed = `${this.dir}.deleting.tmp`;
    renameSync(this.dir, doomed);
    fsyncDir(dirname(this.dir));
    rmSync(doomed, { recursive: true, force: true });
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
  /** Overwrites the f64 written at byte `pos`. */
  setF64(pos: number, x: number): void {
    this.#buf.writeDoubleLE(x, pos);
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
  /** bytes32 decoded as UTF-8, without a Buffer view in between (the WAL's replay reads every label so). */
  str32(): string {
    const n = this.u32();
    const s = this.buf.toString("utf8", this.pos, this.pos + n);
    this.pos += n;
    return s;
  }
  str8(): string {
    const s = this.buf.toString("latin1", this.pos, this.pos + 8);
    this.pos += 8;
    return s;
  }
}
