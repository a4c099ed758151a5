/**
 * svc target: the embedded tsdb driven in-process (decode body → appender → commit), because the
 * server's HTTP remote-write endpoint does not exist yet. TODO(bench): POST to the server instead.
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeRemoteWriteBody } from "@svc/remotewrite";
import { openTsdb } from "../../packages/server/src/tsdb/index.ts";
import { bodiesFor, type Workload } from "./workload.ts";

export interface TargetResult {
  name: string;
  seconds: number;
  samplesPerSec: number;
  rssMiB: number;
  diskBytes: number;
  notes: string[];
}

export function duBytes(dir: string): number {
  let n = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(e.parentPath ?? dir, e.name);
    n += e.isDirectory() ? duBytes(p) : statSync(p).size;
  }
  return n;
}

export async function runSvc(w: Workload, concurrency: number): Promise<TargetResult> {
  const dir = mkdtempSync(join(tmpdir(), "svc-bench-tsdb-"));
  try {
    globalThis.gc?.();
    const rss0 = process.memoryUsage().rss;
    const db = await openTsdb(dir, { now: () => w.endMs });
    const t0 = performance.now();
    let refused = 0;
    const worker = async (_: unknown, k: number): Promise<void> => {
      for (const i of bodiesFor(w, k, concurrency)) {
        const req = decodeRemoteWriteBody(w.bodies[i]);
        const app = db.appender();
        for (const ts of req.timeseries)
          for (const s of ts.samples) app.append(ts.labels, s.timestampMs, s.value);
        const r = await app.commit();
        for (const v of Object.values(r.refused)) refused += v ?? 0;
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    const seconds = (performance.now() - t0) / 1000;
    globalThis.gc?.();
    const rss = process.memoryUsage().rss - rss0;
    const st = db.stats();
    const disk = duBytes(dir);
    await db.close();
    const r0 = performance.now();
    const db2 = await openTsdb(dir, { now: () => w.endMs, autoCompact: false });
    const replayS = (performance.now() - r0) / 1000;
    const st2 = db2.stats();
    await db2.close();
    const notes = [
      "svc: in-process appender (no HTTP endpoint yet), decode included",
      `svc: head chunks ${(st.headChunkBytes / st.headSamples).toFixed(2)} B/sample, ` +
        `head memory ~${((st.headMemoryBytes / st.headSeries) | 0).toLocaleString()} B/series (typed arrays + pages), ` +
        `RSS delta ${((rss / st.headSeries) | 0).toLocaleString()} B/series (includes decode garbage)`,
      `svc: ${st.walCommits} commits in ${st.walFlushes} fsyncs (group commit), ${refused} samples refused`,
      `svc: WAL replay of ${st2.replayedSamples.toLocaleString()} samples took ${replayS.toFixed(2)} s on reopen`,
    ];
    return {
      name: "svc",
      seconds,
      samplesPerSec: w.samples / seconds,
      rssMiB: rss / 2 ** 20,
      diskBytes: disk,
      notes,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
