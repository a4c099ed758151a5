/**
 * The PromQL corpus once more, over the real embedded TSDB instead of the engine's in-memory test
 * store: each script's `load` goes through the TSDB appender (WAL, head chunks, postings, staleness
 * markers) and every eval reads back through the Querier, proving the engine–store seam. The verdicts
 * must equal the in-memory run's, file by file.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { corpusDir } from "../../testing/promql-corpus/corpus.ts";
import { evalCommand, loadInto, runFile } from "../../testing/promql-corpus/runner.ts";
import { parseScript } from "../../testing/promql-corpus/script.ts";
import { createEngine } from "../promql/index.ts";
import { type Labels, staleNaN } from "../storage/interface.ts";
import { openTsdb, type Tsdb } from "../tsdb/index.ts";

const FILES = [
  "aggregators.test",
  "at_modifier.test",
  "functions.test",
  "operators.test",
  "range_queries.test",
  "selectors.test",
  "staleness.test",
  "subquery.test",
];
const DAY = 86_400_000;

async function runOnTsdb(path: string) {
  const engine = createEngine({ timeoutMs: 0 });
  const report = { passed: 0, failed: 0, skipped: 0, refused: 0, failures: [] as string[] };
  let clock = 0;
  let dir = "";
  let db: Tsdb | undefined;
  const open = async () => {
    dir = mkdtempSync(join(tmpdir(), "svc-corpus-tsdb-"));
    // Corpus data starts at the epoch: the clock follows the loads, retention and the future bound
    // are as wide as the options allow, and compaction stays off so reads hit the head.
    db = await openTsdb(dir, {
      now: () => clock,
      retentionMs: 100 * 365 * DAY,
      maxFutureMs: DAY,
      outOfOrderWindowMs: 2 * 3_600_000,
      autoCompact: false,
    });
  };
  const close = async () => {
    await db?.close();
    rmSync(dir, { recursive: true, force: true });
  };
  await open();
  try {
    let hist: Labels[] = [];
    for (const cmd of parseScript(readFileSync(path, "utf8"))) {
      if (cmd.kind === "clear") {
        await close();
        await open();
        hist = [];
        continue;
      }
      if (cmd.kind === "load") {
        const app = db!.appender();
        // Keyed by series and time: a script that defines a series twice in one load means the last
        // definition (promqltest keeps its definitions in a map), not a duplicate sample.
        const pending = new Map<string, [Labels, number, number]>();
        const put = (l: Labels, t: number, v: number) => pending.set(`${JSON.stringify(l)}@${t}`, [l, t, v]);
        loadInto(cmd, { append: put, appendStale: (l, t) => put(l, t, staleNaN()) }, hist);
        for (const [, t] of pending.values()) clock = Math.max(clock, t);
        // The marker goes into the appender untouched, so its NaN bits survive.
        for (const [l, t, v] of pending.values()) if (!app.append(l, t, v)) report.refused++;
        await app.commit();
        continue;
      }
      const verdict = evalCommand(engine, db!, cmd, hist);
      if (verdict === "skipped") report.skipped++;
      else if (verdict === null) report.passed++;
      else {
        report.failed++;
        report.failures.push(`line ${cmd.line}: ${cmd.expr}: ${verdict}`);
      }
    }
  } finally {
    await close();
  }
  return report;
}

describe("PromQL corpus over the embedded TSDB", () => {
  const dir = corpusDir();
  for (const file of FILES) {
    const path = join(dir, file);
    it(`${file}: same verdicts as the in-memory store`, {
      skip: !existsSync(path) && "corpus not found",
    }, async () => {
      const mem = runFile(path);
      const tsdb = await runOnTsdb(path);
      assert.equal(tsdb.refused, 0, "the TSDB refused corpus samples");
      assert.deepEqual(tsdb.failures, [], "evals failing on the TSDB");
      assert.equal(tsdb.passed, mem.passed);
      assert.equal(tsdb.skipped, mem.skipped);
      assert.ok(tsdb.passed > 0);
      console.log(`${file}: ${tsdb.passed} passed, ${tsdb.skipped} skipped on the TSDB`);
    });
  }
});
