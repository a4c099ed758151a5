// The production build of the server: plain JavaScript, no tsx at run time. esbuild bundles
// packages/server/src/main.ts with the workspace packages it imports (@svc/sdk, @svc/remotewrite, @svc/collector, which
// are TypeScript sources) and its npm dependencies into packages/server/dist/server.cjs, and the PromQL
// query worker into query-worker.cjs beside it (and the ingest decode worker into ingest-worker.cjs). Start-up time is mostly module loading: resolving and
// compiling ~1,000 files of node_modules took ~0.5 s of a 0.7–1.1 s start, one file takes a fraction,
// and a V8 code cache of that file (written here by starting it once) saves most of the compiling
// left: dist/main.js (scripts/lib/server-entry.cjs) loads the bundle through it. CommonJS because an
// ES module cannot use a code cache on Node 20. Only packages that cannot be bundled stay external and
// load from node_modules: native addons and the optional ones their dependencies probe for.
//
// `npm start` (scripts/start.mjs) runs the same build, only when a source is newer than the last one
// (`npm run build:server` always builds).
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  copyFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { lockedBuild } from "./lib/build-lock.mjs";
import { isMain } from "./lib/is-main.mjs";

const root = join(import.meta.dirname, "..");
const server = join(root, "packages", "server");
const out = join(server, "dist");
const { version } = JSON.parse(readFileSync(join(server, "package.json"), "utf8"));

/**
 * Loaded from node_modules at run time: a native addon, and optional packages never installed. The native
 * `snappy` needs no entry: remotewrite/src/snappy.ts loads it through createRequire, which esbuild leaves
 * alone, and falls back to JavaScript where it does not load.
 */
const EXTERNAL = ["better-sqlite3", "pg-native"];

/** What the bundle is made of: a change to any of them makes it stale. */
const sources = [
  join(server, "src"),
  join(server, "package.json"),
  join(root, "packages", "sdk", "src"),
  join(root, "packages", "remotewrite", "src"),
  join(root, "packages", "collector", "src"),
  join(root, "package-lock.json"),
  join(root, "scripts", "build-server.mjs"),
  join(root, "scripts", "lib", "server-entry.cjs"),
  join(root, "scripts", "lib", "query-worker-entry.cjs"),
  join(root, "scripts", "lib", "code-cache.cjs"),
];
/** Written last (by the build's own start): its presence means the build finished. */
const stamp = join(out, "server.cjs.v8-cache");

function newest(path) {
  if (!existsSync(path)) return 0;
  const s = statSync(path);
  if (!s.isDirectory()) return s.mtimeMs;
  let m = s.mtimeMs;
  for (const e of readdirSync(path)) if (!e.endsWith(".test.ts")) m = Math.max(m, newest(join(path, e)));
  return m;
}

/** The checkout's commit, or "unknown" outside a git checkout (a Docker build context without .git). */
function gitRevision() {
  const r = spawnSync("git", ["rev-parse", "HEAD"], { cwd: root, encoding: "utf8" });
  return r.status === 0 && /^[0-9a-f]{40}$/.test(r.stdout.trim()) ? r.stdout.trim() : "unknown";
}

/** True when the build is newer than every source it is made of. */
export function serverBuildUpToDate() {
  return existsSync(stamp) && statSync(stamp).mtimeMs >= Math.max(...sources.map(newest));
}

/** Builds packages/server/dist unless it is up to date (or `force`); resolves once it is. */
export async function buildServer({ force = false } = {}) {
  const upToDate = () => !force && serverBuildUpToDate();
  if (upToDate()) return false;
  const started = performance.now();
  const built = await lockedBuild(out, upToDate, bundleInto);
  if (built)
    process.stdout.write(
      `built ${join("packages", "server", "dist")}/main.js, server.cjs and query-worker.cjs (each with its code cache) in ${Math.round(performance.now() - started)} ms\n`,
    );
  return built;
}

if (isMain(import.meta.url)) await buildServer({ force: true });

async function bundleInto(dir) {
  // Loaded only to build: npm start checks whether the build is current on every run.
  const { build } = await import("esbuild");
  await build({
    entryPoints: {
      server: join(server, "src", "main.ts"),
      "query-worker": join(server, "src", "promql", "pool", "worker.ts"),
      "ingest-worker": join(server, "src", "ingest", "decode", "worker.ts"),
    },
    outdir: dir,
    outExtension: { ".js": ".cjs" },
    bundle: true,
    platform: "node",
    format: "cjs",
    target: "node20",
    sourcemap: true,
    legalComments: "none",
    // Whitespace and syntax only: identifiers keep their names, so stack traces stay readable.
    minifyWhitespace: true,
    minifySyntax: true,
    external: EXTERNAL,
    banner: {
      js: [
        `// svc server ${version}, bundled by scripts/build-server.mjs`,
        'var __svcImportMetaUrl = require("node:url").pathToFileURL(__filename).href;',
      ].join("\n"),
    },
    define: {
      // The sources are ES modules: their import.meta.url is the bundle's own file.
      "import.meta.url": "__svcImportMetaUrl",
      // The query pool starts its workers from the bundled file instead of the tsx bootstrap.
      // (through its entry, which uses the worker's code cache: scripts/lib/query-worker-entry.cjs).
      "globalThis.SVC_QUERY_WORKER_BUNDLE": JSON.stringify("./query-worker-entry.cjs"),
      // Likewise the ingest decode workers (ingest/decode/pool.ts), without a code cache: they start
      // beside the server, before any body arrives.
      "globalThis.SVC_INGEST_WORKER_BUNDLE": JSON.stringify("./ingest-worker.cjs"),
      // svc_build_info: the version and the commit this bundle was built from (SVC_REVISION, else git).
      "globalThis.SVC_BUILD_INFO": JSON.stringify({
        version,
        revision: process.env.SVC_REVISION ?? gitRevision(),
      }),
    },
    logLevel: "warning",
  });
  copyFileSync(join(root, "scripts", "lib", "server-entry.cjs"), join(dir, "main.js"));
  // main.js is CommonJS (packages/server/package.json makes .js files ES modules).
  writeFileSync(join(dir, "package.json"), `${JSON.stringify({ type: "commonjs" })}\n`);
  copyFileSync(join(root, "scripts", "lib", "query-worker-entry.cjs"), join(dir, "query-worker-entry.cjs"));
  copyFileSync(join(root, "scripts", "lib", "code-cache.cjs"), join(dir, "code-cache.cjs"));
  await writeCodeCache(dir);
}

/**
 * Starts the bundle once (no demo, a throw-away data directory, any free port) and stops it once it is
 * ready and its query workers have started: each worker writes query-worker.cjs.v8-cache once its module
 * has run, and at exit the server writes server.cjs.v8-cache with what its start-up compiled.
 */
async function writeCodeCache(dir) {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-code-cache-"));
  try {
    // A SIGTERM that lands before the server installs its handlers kills it without an exit (and
    // without a cache): then once more.
    for (let attempt = 1; ; attempt++) {
      const code = await startAndStop(dir, dataDir);
      if (code === 0) return;
      if (attempt === 2) throw new Error(`the bundle did not start and stop cleanly (exit ${code})`);
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function startAndStop(dir, dataDir) {
  // The operator token of the build's own start, for its one RPC (any will do: it never leaves the build).
  const adminToken = `build-${randomBytes(16).toString("hex")}`;
  const child = spawn(process.execPath, [join(dir, "main.js")], {
    env: {
      PATH: process.env.PATH,
      PORT: "0",
      SVC_DATA_DIR: dataDir,
      SVC_DEMO: "false",
      SVC_LOG_FORMAT: "json",
      SVC_LOG_LEVEL: "warn",
      SVC_WRITE_CODE_CACHE: "1",
      SVC_ADMIN_TOKEN: adminToken,
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = new Promise((resolve) => child.on("exit", resolve));
  let printed = "";
  const url = await new Promise((resolve) => {
    child.stdout.on("data", (d) => {
      printed += d;
      const m = /svc listening on (\S+)/.exec(printed);
      if (m) resolve(m[1]);
    });
    void exited.then(() => resolve(undefined));
  });
  if (url) {
    // Ready (the store and database open) is what a restart waits for, so the cache covers it.
    for (let i = 0; i < 100; i++) {
      const ok = await fetch(`${url}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    // One RPC: Connect, protobuf and the services load at the first call (http/rpc.ts), so the cache
    // holds their code too and a server's first RPC does not compile them (docs/performance.md,
    // "Start-up, third pass").
    await fetch(`${url}/svc.iam.v1.SessionService/WhoAmI`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${adminToken}`,
        "content-type": "application/json",
        "connect-protocol-version": "1",
      },
      body: "{}",
    }).then(
      (r) => r.arrayBuffer(),
      () => undefined,
    );
    // The workers start once the first readiness answer was 200 (App.afterReady), right after it.
    for (let i = 0; i < 600 && !existsSync(join(dir, "query-worker.cjs.v8-cache")); i++)
      await new Promise((r) => setTimeout(r, 50));
    child.kill("SIGTERM");
  }
  return exited;
}
