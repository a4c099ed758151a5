import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { CRASH_STEP_MS, CRASH_T0, crashBatch, crashOptions, crashValue } from "./crash-workload.ts";
import { openTsdb } from "./index.ts";
import { tempDir } from "./testutil.ts";

const CYCLES = Number(process.env.TSDB_CRASH_CYCLES ?? 15);
const child = fileURLToPath(new URL("./crash-child.ts", import.meta.url));
const f64 = new Float64Array(1);
const u32 = new Uint32Array(f64.buffer);
const bitsOf = (v: number): string => {
  f64[0] = v;
  return `${u32[1]}:${u32[0]}`;
};

/** Runs the child from batch `first`, SIGKILLs it after `killAfterMs` of ingesting; returns acked ids. */
function runChild(
  dir: string,
  first: number,
  killAfterMs: number,
): Promise<{ acked: number[]; bad: string[] }> {
  return new Promise((resolve, reject) => {
    const p: ChildProcess = spawn(process.execPath, ["--import", "tsx", child, dir, String(first)], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    const acked: number[] = [];
    const bad: string[] = [];
    let buf = "";
    let stderr = "";
    p.stderr!.on("data", (d) => (stderr += d));
    p.stdout!.on("data", (d: Buffer) => {
      buf += d.toString();
      let i = buf.indexOf("\n");
      while (i >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (line === "ready") setTimeout(() => p.kill("SIGKILL"), killAfterMs);
        else if (line.startsWith("ack ")) acked.push(Number(line.slice(4)));
        else bad.push(line);
        i = buf.indexOf("\n");
      }
    });
    p.on("error", reject);
    p.on("exit", (_code, signal) => {
      if (signal !== "SIGKILL") reject(new Error(`child exited unexpectedly: ${stderr}`));
      else resolve({ acked, bad });
    });
  });
}

describe("tsdb crash safety", () => {
  const { dir, cleanup } = tempDir();
  after(cleanup);

  it(`keeps every acknowledged sample across ${CYCLES} kill -9 cycles`, async () => {
    const acked = new Set<number>();
    let next = 0;
    for (let cycle = 0; cycle < CYCLES; cycle++) {
      const r = await runChild(dir, next, 50 + Math.floor(Math.random() * 600));
      assert.deepEqual(r.bad, [], "every commit accepted its whole batch");
      for (const k of r.acked) acked.add(k);
      // Continue after everything acknowledged; unacknowledged batches may or may not be durable,
      // and re-sending them is an identical duplicate.
      next = Math.max(next, ...r.acked.map((k) => k + 1));
      const maxK = next + 8;
      const db = await openTsdb(dir, {
        ...crashOptions(() => CRASH_T0 + maxK * CRASH_STEP_MS),
        autoCompact: false,
      });
      try {
        const got = new Map<string, Map<number, string>>();
        const q = db.querier();
        const series = q.select(
          [{ type: "=", name: "__name__", value: "crash_metric" }],
          -Infinity,
          Infinity,
        );
        for (const s of series) {
          const m = new Map<number, string>();
          for (let i = 0; i < s.timestamps.length; i++) {
            if (i > 0) assert.ok(s.timestamps[i] > s.timestamps[i - 1], "timestamps strictly ascending");
            m.set(s.timestamps[i], bitsOf(s.values[i]));
          }
          got.set(s.labels.find((l) => l.name === "series")!.value, m);
        }
        let stale = 0;
        for (const k of acked) {
          for (const [s, t, v] of crashBatch(k)) {
            const have = got.get(String(s))?.get(t);
            assert.equal(have, bitsOf(crashValue(v)), `cycle ${cycle}: batch ${k} series ${s} t ${t}`);
            if (v === "stale") stale++;
          }
        }
        assert.ok(acked.size < 7 || stale > 0, "staleness markers were checked");
      } finally {
        await db.close();
      }
    }
    assert.ok(acked.size > CYCLES, `acknowledged ${acked.size} batches`);
    // The run must have crossed block cuts and checkpoints, or it tested only the WAL.
    const db = await openTsdb(dir, {
      ...crashOptions(() => CRASH_T0 + next * CRASH_STEP_MS),
      autoCompact: false,
    });
    const st = db.stats();
    await db.close();
    assert.ok(st.blocks > 0, `blocks ${st.blocks}`);
    process.stdout.write(
      `# crash: ${acked.size} batches acknowledged, ${st.blocks} blocks, replayed ${st.replayedSamples}\n`,
    );
  });
});
