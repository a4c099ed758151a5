// Packs the svc CLI (packages/cli/scripts/pack.mjs: one bundled file, no dependencies) into
// packages/cli/dist/svc-cli-<version>.tgz with SHA256SUMS, which the server publishes at /v1/cli/packages/
// so a CI job installs the CLI from the svc it talks to (issue 27, item 10). Skips the work when the
// sources are older than the package; `--force` always builds. `npm start` runs it first.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { lockedBuild } from "./lib/build-lock.mjs";
import { isMain } from "./lib/is-main.mjs";

const root = join(import.meta.dirname, "..");
const cliDir = join(root, "packages", "cli");
const dist = join(cliDir, "dist");
const { version } = JSON.parse(readFileSync(join(cliDir, "package.json"), "utf8"));
const tgz = join(dist, `svc-cli-${version}.tgz`);
const sources = [
  join(cliDir, "src"),
  join(cliDir, "package.json"),
  join(cliDir, "scripts"),
  join(root, "packages", "sdk", "src"),
  join(root, "scripts", "build-cli.mjs"),
];

function newest(path) {
  if (!existsSync(path)) return 0;
  const s = statSync(path);
  if (!s.isDirectory()) return s.mtimeMs;
  let m = s.mtimeMs;
  for (const e of readdirSync(path)) if (!e.endsWith(".test.ts")) m = Math.max(m, newest(join(path, e)));
  return m;
}

/** Packs the CLI unless the package is newer than its sources (or `force`). */
export async function buildCli({ force = false } = {}) {
  const upToDate = () =>
    !force && existsSync(tgz) && statSync(tgz).mtimeMs >= Math.max(...sources.map(newest));
  if (!upToDate()) await lockedBuild(dist, upToDate, packInto);
}

if (isMain(import.meta.url)) await buildCli({ force: process.argv.includes("--force") });

async function packInto(out) {
  process.stdout.write(`packing the svc CLI ${basename(tgz)}…\n`);
  const made = execFileSync(process.execPath, [join(cliDir, "scripts", "pack.mjs"), out], {
    encoding: "utf8",
  }).trim();
  const sum = createHash("sha256").update(readFileSync(made)).digest("hex");
  writeFileSync(join(out, "SHA256SUMS"), `${sum}  ${basename(made)}\n`);
}
