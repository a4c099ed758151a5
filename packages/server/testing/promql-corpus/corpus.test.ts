import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { describe, it } from "node:test";
import { corpusDir, runCorpus, threshold } from "./corpus.ts";

describe("PromQL conformance corpus", () => {
  const dir = corpusDir();
  const present = existsSync(dir);
  const ci = process.env.CI === "true";
  it("passes at least the committed share of float evals", {
    skip: !present && !ci ? `corpus not found at ${dir} (set PROMQL_CORPUS_DIR)` : false,
  }, () => {
    assert.ok(present, `corpus not found at ${dir}`);
    const { passed, failed, skipped, rate } = runCorpus(dir);
    console.log(`corpus: ${passed} passed, ${failed} failed, ${skipped} skipped`);
    assert.ok(rate >= threshold(), `pass rate ${rate} below threshold ${threshold()}`);
  });
});
