import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { it } from "node:test";
import { reasons } from "./reasons.ts";

it("docs/errors.md lists exactly the reasons of reasons.ts, with the same codes and metadata", () => {
  const doc = readFileSync(join(import.meta.dirname, "../../../../docs/errors.md"), "utf8");
  const rows = new Map<string, { code: string; metadata: string[] }>();
  for (const line of doc.split("\n")) {
    const m = /^\| `([A-Z_0-9]+)` \| ([a-z_]+) \|\s*([^|]*?)\s*\|/.exec(line);
    if (!m) continue;
    const metadata = m[3]
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
    rows.set(m[1], { code: m[2], metadata });
  }
  assert.deepEqual([...rows.keys()].sort(), Object.keys(reasons).sort());
  for (const [reason, spec] of Object.entries(reasons)) {
    assert.equal(rows.get(reason)?.code, spec.code, reason);
    assert.deepEqual(rows.get(reason)?.metadata, [...spec.metadata], reason);
  }
});
