/**
 * On-disk form of one series' rollups in a block (FORMAT.md, "rollups"): eight columns, each an XOR
 * chunk stream (chunk.ts) whose timestamps are the bucket ends, so a column compresses like a
 * regular series (ends are equally spaced: a bit each) and a read decodes only the buckets in range.
 * Sample times inside a bucket are stored as offsets from the bucket start, small integers that
 * repeat when sampling is regular.
 */
import { RollupColumn, type Rollups } from "../storage/rollups.ts";
import { encodeChunks, xorDecodeInto } from "./chunk.ts";

/** Column order on disk. */
const COLUMNS = ["count", "firstT", "firstV", "lastT", "lastV", "max", "sum", "resets"] as const;
/** Each on-disk column's RollupColumn bit, in COLUMNS order. */
const COLUMN_BITS = COLUMNS.map((c) => RollupColumn[c]);
/** Decoded whatever the reader asked for: the overlap check below and `Rollups.allFinite` use them. */
const ALWAYS_DECODED = RollupColumn.firstT | RollupColumn.lastT | RollupColumn.sum;
/** Buckets per XOR chunk (the chunk count field is a u16). */
const BUCKETS_PER_CHUNK = 1000;

export function encodeRollups(r: Rollups): Uint8Array {
  r.finish();
  const n = r.n;
  const ends = r.end.subarray(0, n);
  const R = r.resolutionMs;
  const firstOff = new Float64Array(n);
  const lastOff = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    firstOff[i] = r.firstT[i] - (ends[i] - R);
    lastOff[i] = r.lastT[i] - (ends[i] - R);
  }
  const cols: Record<(typeof COLUMNS)[number], Float64Array> = {
    count: r.count,
    firstT: firstOff,
    firstV: r.firstV,
    lastT: lastOff,
    lastV: r.lastV,
    max: r.max,
    sum: r.sum,
    resets: r.resets,
  };
  const parts: Uint8Array[] = [];
  let size = 8;
  for (const name of COLUMNS) {
    const chunks = encodeChunks(ends, cols[name], n, BUCKETS_PER_CHUNK);
    const head = new Uint8Array(2);
    new DataView(head.buffer).setUint16(0, chunks.length, true);
    parts.push(head);
    size += 2;
    for (const c of chunks) {
      const h = new Uint8Array(6);
      const dv = new DataView(h.buffer);
      dv.setUint32(0, c.bytes.length, true);
      dv.setUint16(4, c.count, true);
      parts.push(h, c.bytes);
      size += 6 + c.bytes.length;
    }
  }
  const out = new Uint8Array(size);
  const dv = new DataView(out.buffer);
  dv.setUint32(0, n, true);
  dv.setUint32(4, R, true);
  let off = 8;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

function scratchOf(cap: number) {
  const cols = Array.from({ length: COLUMNS.length }, () => new Float64Array(cap));
  return { ends: new Float64Array(cap), cols, bits: cols.map((c) => new Uint32Array(c.buffer)) };
}
let scratch = scratchOf(64);

/**
 * Appends the buckets of an encoded series whose end is in [minEnd, maxEnd] to `out` (merging a
 * bucket split by a block boundary). Only the columns `out.columns` names are decoded (the rest are
 * skipped over and appended as NaN): an average needs two of the eight. Returns false, appending
 * nothing, when the stored resolution is not `out`'s or when the first bucket's first sample is not
 * after every sample `out` holds (the sources overlap; the caller reads raw samples instead).
 */
export function decodeRollupsInto(buf: Uint8Array, minEnd: number, maxEnd: number, out: Rollups): boolean {
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const n = dv.getUint32(0, true);
  const R = dv.getUint32(4, true);
  if (R !== out.resolutionMs) return false;
  if (n === 0) return true;
  if (scratch.ends.length < n) scratch = scratchOf(Math.max(n, 2 * scratch.ends.length));
  // Decoded columns are consumed before this returns, so one scratch set serves every read.
  const { ends, cols, bits } = scratch;
  const wanted = out.columns | ALWAYS_DECODED;
  let off = 8;
  let got = 0;
  for (let c = 0; c < COLUMNS.length; c++) {
    const nchunks = dv.getUint16(off, true);
    off += 2;
    const decode = (wanted & COLUMN_BITS[c]) !== 0;
    let at = 0;
    for (let k = 0; k < nchunks; k++) {
      const len = dv.getUint32(off, true);
      const count = dv.getUint16(off + 4, true);
      off += 6;
      if (decode) at = xorDecodeInto(buf, off, count, minEnd, maxEnd, ends, cols[c], at, bits[c]);
      off += len;
    }
    if (decode) got = at;
  }
  for (let c = 0; c < COLUMNS.length; c++)
    if ((wanted & COLUMN_BITS[c]) === 0) cols[c].fill(Number.NaN, 0, got);
  const [count, firstOff, firstV, lastOff, lastV, max, sum, resets] = cols;
  // Sources overlap (late samples cut into a later block): buckets cannot be merged exactly.
  if (got > 0 && ends[0] - R + firstOff[0] <= out.lastTime) return false;
  for (let i = 0; i < got; i++) {
    const start = ends[i] - R;
    out.addBucket(
      ends[i],
      count[i],
      start + firstOff[i],
      firstV[i],
      start + lastOff[i],
      lastV[i],
      max[i],
      sum[i],
      resets[i],
    );
  }
  return true;
}
