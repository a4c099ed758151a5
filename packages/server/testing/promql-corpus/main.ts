/**
 * `npm run test:promql-corpus`: runs every promqltest script of the corpus against the engine,
 * prints a per-file table and `corpus: N passed, N failed, N skipped`, and exits non-zero when the
 * pass rate (passed / (passed + failed)) is below `threshold.json`. `--verbose` (or
 * PROMQL_CORPUS_VERBOSE=1) lists every failing eval.
 */
import { existsSync } from "node:fs";
import { basename } from "node:path";
import { corpusDir, runCorpus, threshold } from "./corpus.ts";

const verbose = process.argv.includes("--verbose") || process.env.PROMQL_CORPUS_VERBOSE === "1";
const dir = corpusDir();
if (!existsSync(dir)) {
  const msg = `promql corpus not found at ${dir} (set PROMQL_CORPUS_DIR)`;
  if (process.env.CI === "true") {
    console.error(msg);
    process.exit(1);
  }
  console.log(`skipped: ${msg}`);
  process.exit(0);
}
const { reports, passed, failed, skipped, rate } = runCorpus(dir);
console.log(`${"file".padEnd(28)} ${"passed".padStart(7)} ${"failed".padStart(7)} ${"skipped".padStart(8)}`);
for (const r of reports) {
  console.log(
    `${basename(r.file).padEnd(28)} ${String(r.passed).padStart(7)} ${String(r.failed).padStart(7)} ${String(r.skipped).padStart(8)}`,
  );
  if (verbose) for (const f of r.failures) console.log(`    line ${f.line}: ${f.expr}\n      ${f.reason}`);
}
console.log(`corpus: ${passed} passed, ${failed} failed, ${skipped} skipped`);
const min = threshold();
if (rate < min) {
  console.error(`pass rate ${(rate * 100).toFixed(2)}% is below the threshold ${(min * 100).toFixed(2)}%`);
  process.exit(1);
}
