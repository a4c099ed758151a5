// Builds the web console (packages/console → packages/console/dist) when its sources, or the SDK's
// generated code it bundles, are newer than the last build. `npm start` runs it first, so a fresh
// clone serves the console with no extra command; `--force` always builds.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";
import { lockedBuild } from "./lib/build-lock.mjs";
import { isMain } from "./lib/is-main.mjs";

const root = join(import.meta.dirname, "..");
const consoleDir = join(root, "packages", "console");
const stamp = join(consoleDir, "dist", ".build-stamp");
const sources = [
  join(consoleDir, "src"),
  join(consoleDir, "index.html"),
  join(consoleDir, "vite.config.ts"),
  join(consoleDir, "package.json"),
  join(root, "packages", "sdk", "src", "gen"),
];

function newest(path) {
  if (!existsSync(path)) return 0;
  const s = statSync(path);
  if (!s.isDirectory()) return s.mtimeMs;
  let m = s.mtimeMs;
  for (const e of readdirSync(path)) m = Math.max(m, newest(join(path, e)));
  return m;
}

const dist = join(consoleDir, "dist");

/** Builds the console unless its build is newer than its sources (or `force`). */
export async function buildConsole({ force = false } = {}) {
  const upToDate = () =>
    !force && existsSync(stamp) && statSync(stamp).mtimeMs >= Math.max(...sources.map(newest));
  if (upToDate()) return;
  await lockedBuild(dist, upToDate, buildInto);
}

if (isMain(import.meta.url)) await buildConsole({ force: process.argv.includes("--force") });

function buildInto(outDir) {
  process.stdout.write("building the console (vite)…\n");
  const vite = join(root, "node_modules", "vite", "bin", "vite.js");
  const r = spawnSync(process.execPath, [vite, "build", "--logLevel", "warn", "--outDir", outDir], {
    cwd: consoleDir,
    stdio: "inherit",
  });
  if (r.status !== 0) throw new Error("the console failed to build");
  precompress(outDir);
  writeFileSync(join(outDir, ".build-stamp"), `${new Date().toISOString()}\n`);
}

/**
 * Writes `<file>.br` (brotli 11) and `<file>.gz` (gzip 9) beside every text file of the build, once, so
 * the server sends compressed bytes by Accept-Encoding without compressing per request
 * (packages/server/src/console/routes.ts). A file too small to gain is left alone.
 */
function precompress(dir) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, e.name);
    if (e.isDirectory()) {
      precompress(path);
      continue;
    }
    if (!/\.(js|css|html|svg|json|txt)$/.test(e.name)) continue;
    const raw = readFileSync(path);
    if (raw.length < 1024) continue;
    const br = brotliCompressSync(raw, {
      params: {
        [constants.BROTLI_PARAM_QUALITY]: constants.BROTLI_MAX_QUALITY,
        [constants.BROTLI_PARAM_SIZE_HINT]: raw.length,
      },
    });
    writeFileSync(`${path}.br`, br);
    writeFileSync(`${path}.gz`, gzipSync(raw, { level: 9 }));
  }
}
