/** Shared by the corpus CLI and its node:test wrapper: where the corpus is, the threshold, a full run. */
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { corpusFiles, type FileReport, runFile } from "./runner.ts";

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(here, "../../../..");

/** `PROMQL_CORPUS_DIR`, else `../shared/promql-testdata` relative to the repository root. */
export function corpusDir(): string {
  return process.env.PROMQL_CORPUS_DIR ?? resolve(repoRoot, "../shared/promql-testdata");
}

/** Minimum pass rate (fraction of non-skipped evals) committed in threshold.json. */
export function threshold(): number {
  const t = JSON.parse(readFileSync(join(here, "threshold.json"), "utf8")) as { minPassRate: number };
  return t.minPassRate;
}

export function runCorpus(dir: string) {
  const reports: FileReport[] = corpusFiles(dir).map((f) => runFile(f));
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  for (const r of reports) {
    passed += r.passed;
    failed += r.failed;
    skipped += r.skipped;
  }
  const rate = passed + failed === 0 ? 0 : passed / (passed + failed);
  return { reports, passed, failed, skipped, rate };
}
