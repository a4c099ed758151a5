/**
 * Where a worker thread of the server starts (the query pool's and the ingest decode pool's).
 *
 * The production build bundles each worker into one plain-JavaScript file (scripts/build-server.mjs) and
 * names it through a global; the pools pass that name here. Run from the sources (npm test, tsx), the
 * worker's TypeScript is bundled here the same way, with esbuild, into node_modules/.cache/svc-workers/,
 * and the thread starts without tsx's module hooks. Why a bundle and not tsx in the thread: tests then run
 * the worker as production does, starting in ~30 ms instead of 0.3–1 s, and tsx's slow start had hidden
 * a real fault in the pool's teardown (docs/decisions.md "Worker threads run bundled code, from the
 * sources too").
 *
 * The bundle is kept per content of what it can include (every source file's path, size and mtime, and
 * the lock file), so the test run's processes build it once; a process that finds it stale builds it
 * again, into a new name, and never rewrites a file another process may be starting a thread from.
 */
import { createHash } from "node:crypto";
import {
  type Dirent,
  existsSync,
  mkdirSync,
  readdirSync,
  renameSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Worker, type WorkerOptions } from "node:worker_threads";

const root = fileURLToPath(new URL("../../../../", import.meta.url));
/** What a worker's bundle can be made of: a change to any of them makes it stale. */
const SOURCES = [
  "packages/server/src",
  "packages/remotewrite/src",
  "packages/sdk/src",
  "packages/collector/src",
];
/** Not bundled, as in the production build: a native addon and an optional package never installed. */
const EXTERNAL = ["better-sqlite3", "pg-native"];

const built = new Map<string, URL>();

/**
 * Starts a worker thread on `bundled` (the production build's file, relative to `base`) when given,
 * else on a bundle of the TypeScript entry `source`, built on first use in this process, with the
 * process's Node options less its TypeScript loader.
 *
 * The fds a thread opens are closed by Node when it exits (`trackUnmanagedFds`, set here so it cannot
 * be turned off by accident): its owner must never close one itself once the thread may have exited,
 * as the number may then belong to another thread's file. The query pool once closed a terminated
 * worker's schedstat fd after its exit, and so closed the next worker's epoll fd, aborting the process.
 */
export function startWorker(
  bundled: string | undefined,
  source: URL,
  base: string,
  options: WorkerOptions,
): Worker {
  const common = { ...options, trackUnmanagedFds: true };
  if (bundled !== undefined) return new Worker(new URL(bundled, base), common);
  let url = built.get(source.href);
  if (!url) {
    url = bundleFromSources(fileURLToPath(source));
    built.set(source.href, url);
  }
  return new Worker(url, { ...common, execArgv: withoutTypeScriptLoader(process.execArgv) });
}

function bundleFromSources(entry: string): URL {
  const dir = join(root, "node_modules", ".cache", "svc-workers");
  const name = `${entry.slice(root.length).replace(/[^A-Za-z0-9]+/g, "-")}-${sourcesKey(entry)}`;
  const out = join(dir, `${name}.cjs`);
  if (existsSync(out)) return pathToFileURL(out);
  // Loaded only here: the production bundle never reaches this line (it names its workers' files).
  const esbuild = createRequire(import.meta.url)("esbuild") as typeof import("esbuild");
  const result = esbuild.buildSync({
    entryPoints: [entry],
    outfile: out,
    write: false,
    bundle: true,
    platform: "node",
    format: "cjs",
    target: "node20",
    sourcemap: true,
    external: EXTERNAL,
    banner: { js: 'var __svcImportMetaUrl = require("node:url").pathToFileURL(__filename).href;' },
    // The sources are ES modules: their import.meta.url is the bundle's own file, as in production.
    define: { "import.meta.url": "__svcImportMetaUrl" },
    logLevel: "warning",
  });
  mkdirSync(dir, { recursive: true });
  // The script appears whole or not at all: written aside, then renamed (its map first).
  const tmp = `.${process.pid}-${Math.random().toString(36).slice(2)}`;
  const isMap = (f: { path: string }) => f.path.endsWith(".map");
  for (const f of [...result.outputFiles.filter(isMap), ...result.outputFiles.filter((f) => !isMap(f))]) {
    writeFileSync(f.path + tmp, f.contents);
    renameSync(f.path + tmp, f.path);
  }
  return pathToFileURL(out);
}

/** A digest of every file the bundle can include: paths, sizes and mtimes, and the lock file's. */
function sourcesKey(entry: string): string {
  const h = createHash("sha256").update(entry);
  const visit = (dir: string): void => {
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const p = join(dir, e.name);
      if (e.isDirectory()) visit(p);
      else if (!e.name.endsWith(".test.ts")) {
        const s = statSync(p);
        h.update(`${p}\0${s.size}\0${s.mtimeMs}\n`);
      }
    }
  };
  for (const s of SOURCES) visit(join(root, s));
  const lock = statSync(join(root, "package-lock.json"), { throwIfNoEntry: false });
  h.update(`lock\0${lock?.size}\0${lock?.mtimeMs}`);
  return h.digest("hex").slice(0, 16);
}

/** `--import tsx`, `--require …/tsx/…` and the like removed: the thread runs plain JavaScript. */
export function withoutTypeScriptLoader(argv: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const m = /^(--import|--require|-r|--loader|--experimental-loader)(=(.*))?$/.exec(a);
    if (!m) {
      out.push(a);
      continue;
    }
    const value = m[2] !== undefined ? m[3] : argv[++i];
    if (value !== undefined && /(^|[/\\])tsx([/\\@]|$)/.test(value)) continue;
    out.push(a);
    if (m[2] === undefined && value !== undefined) out.push(value);
  }
  return out;
}
