// The repository explains itself: code and docs cite docs/, never a document outside the repository
// (docs/contributing.md, "Before you commit").
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { it } from "node:test";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const SKIP_DIRS = new Set(["node_modules", ".git", ".data", ".cache", "dist", "gen", ".work", ".walk"]);
const TEXT = /\.(ts|tsx|mjs|js|md|proto|yml|yaml|json)$/;

/** Citations of the interface documents the project was started from, which a clone does not have. */
const OUTSIDE = [
  /\bSPEC\s*§/,
  /\bDESIGN\s*§/,
  /\bSPEC\.md\b/,
  /\bDESIGN\.md\b/,
  /\.\.\/shared\/(?!promql-testdata)/,
];

function* files(dir: string): Generator<string> {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.isDirectory()) {
      if (!SKIP_DIRS.has(e.name)) yield* files(join(dir, e.name));
    } else if (TEXT.test(e.name) && e.name !== "package-lock.json") yield join(dir, e.name);
  }
}

it("no file cites a document outside the repository", () => {
  const found: string[] = [];
  const self = fileURLToPath(import.meta.url);
  for (const f of files(ROOT)) {
    if (f === self) continue;
    const lines = readFileSync(f, "utf8").split("\n");
    lines.forEach((line, i) => {
      if (OUTSIDE.some((re) => re.test(line))) found.push(`${relative(ROOT, f)}:${i + 1}: ${line.trim()}`);
    });
  }
  assert.deepEqual(found, [], `cite docs/ instead:\n${found.join("\n")}`);
});
