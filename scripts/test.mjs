// Runs node:test over every *.test.ts (Node 20's --test takes no globs), through tsx.
// Usage: node scripts/test.mjs [path-prefix ...]   (defaults to the whole repository)
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";

const roots = process.argv.slice(2);
const files = readdirSync(".", { recursive: true, withFileTypes: true })
  .filter((e) => e.isFile() && e.name.endsWith(".test.ts"))
  .map((e) => join(e.parentPath ?? e.path, e.name))
  .filter((f) => !f.includes("node_modules") && !f.startsWith("bench/.work"))
  .filter((f) => roots.length === 0 || roots.some((r) => f.startsWith(r)))
  .sort();
if (files.length === 0) {
  console.error("no test files found");
  process.exit(1);
}
const concurrency = process.env.TEST_CONCURRENCY ?? "2";
const r = spawnSync(
  process.execPath,
  ["--import", "tsx", "--test", `--test-concurrency=${concurrency}`, "--test-reporter=spec", ...files],
  { stdio: "inherit" },
);
process.exit(r.status ?? 1);
