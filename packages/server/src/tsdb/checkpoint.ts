/**
 * The WAL checkpoint (layout in FORMAT.md): every head series and sample, written as
 * `checkpoint.N/00000000` so that the segments ≤ N can be deleted.
 */
import { mkdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { Batch } from "./appender.ts";
import { BufferedFile, ByteWriter, fsyncDir } from "./block.ts";
import type { Head } from "./head.ts";
import type { Slicer } from "./slicer.ts";
import { frameCompactSamples, frameSeriesRecord, segmentName } from "./wal.ts";

/**
 * Samples per record of a checkpoint: a damaged record loses all of them (docs/operations.md), so
 * records stay about the size of a live commit's (~5–7 KB) rather than 8,192 samples, which put most
 * of a small store's checkpoint in one record. Framing costs ~10 bytes a record.
 */
export const CHECKPOINT_RECORD_SAMPLES = 1024;
/** Series per series record of a checkpoint: a damaged one orphans every sample of its series. */
export const CHECKPOINT_RECORD_SERIES = 128;

/**
 * Writes checkpoint.`upTo` (series + head samples) into `walDir`, durably; yields between series.
 * Appends go on meanwhile: a sample they add lies in a later segment, so whether the checkpoint also
 * holds it or not, replay gets it once (an identical sample is a no-op). Returns false, writing
 * nothing, when the store closes first. The caller then deletes the segments it covers.
 */
export async function writeCheckpoint(
  walDir: string,
  head: Head,
  upTo: number,
  slicer: Slicer,
): Promise<boolean> {
  const name = `checkpoint.${segmentName(upTo)}`;
  const tmp = join(walDir, `${name}.tmp`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp);
  // Streamed to the file through a 1 MB buffer: built whole in memory, the checkpoint (every head
  // sample) doubled a buffer up to tens of MB, garbage held until a full collection.
  const file = new BufferedFile(join(tmp, segmentName(0)));
  let closed = false;
  const abandon = (): false => {
    if (!closed) file.close(false);
    closed = true;
    rmSync(tmp, { recursive: true, force: true });
    return false;
  };
  try {
    const refs = Array.from(head.reg.allPostings());
    for (let i = 0; i < refs.length; i += CHECKPOINT_RECORD_SERIES) {
      const part = refs
        .slice(i, i + CHECKPOINT_RECORD_SERIES)
        .map((ref) => ({ ref, labels: head.reg.labels(ref) }));
      const w = new ByteWriter();
      frameSeriesRecord(w, part);
      file.write(w.finish());
    }
    // Samples of many series go into one record (the format carries a ref per sample): a record,
    // its buffer and its CRC per series cost more than the samples of a series at 30 s.
    const b = new Batch();
    const flush = () => {
      if (b.n > 0) file.write(frameCompactSamples(b.n, b.refs, b.ts, b.his, b.los));
      b.n = 0;
    };
    for (const ref of refs) {
      if (slicer.due() && !(await slicer.yield())) return abandon();
      head.walLogged[ref] = 1;
      const s = head.samples(ref, Number.NEGATIVE_INFINITY, Number.POSITIVE_INFINITY);
      if (s.t.length === 0) continue;
      const u = new Uint32Array(s.v.buffer, s.v.byteOffset, s.v.length * 2);
      for (let k = 0; k < s.t.length; k++) {
        b.push(ref, s.t[k], u[2 * k + 1], u[2 * k]);
        if (b.n >= CHECKPOINT_RECORD_SAMPLES) flush();
      }
    }
    flush();
    closed = true;
    file.close(true);
  } catch (e) {
    abandon();
    throw e;
  }
  renameSync(tmp, join(walDir, name));
  fsyncDir(walDir);
  return true;
}
