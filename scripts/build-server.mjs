// The production build of the server: plain JavaScript, no tsx at run time. esbuild bundles
// packages/server/src/main.ts with the workspace packages it imports (@svc/sdk, @svc/remotewrite, which
// are TypeScript sources) and its npm dependencies into packages/server/dist/server.cjs, and the PromQL
// query worker into query-worker.cjs beside it. Start-up time is mostly module loading: resolving and
// compiling ~1,000 files of node_modules took ~0.5 s of a 0.7–1.1 s start, one file takes a fraction,
// and a V8 code cache of that file (written here by starting it once) saves most of the compiling
// left: dist/main.js (scripts/lib/server-entry.mjs) loads the bundle through it. CommonJS because an
// ES module cannot use a code cache on Node 20. Only packages that cannot be bundled stay external and
// load from node_modules: native addons and the optional ones their dependencies probe for.
import { spawn } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "esbuild";

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

rmSync(out, { recursive: true, force: true });
const started = performance.now();
await build({
  entryPoints: {
    server: join(server, "src", "main.ts"),
    "query-worker": join(server, "src", "promql", "pool", "worker.ts"),
  },
  outdir: out,
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
    "globalThis.SVC_QUERY_WORKER_BUNDLE": JSON.stringify("./query-worker.cjs"),
  },
  logLevel: "warning",
});
copyFileSync(join(root, "scripts", "lib", "server-entry.mjs"), join(out, "main.js"));
await writeCodeCache();

/**
 * Starts the bundle once (no demo, a throw-away data directory, any free port) and stops it once it is
 * ready: at exit it writes server.cjs.v8-cache with what its start-up compiled.
 */
async function writeCodeCache() {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-code-cache-"));
  try {
    // A SIGTERM that lands before the server installs its handlers kills it without an exit (and
    // without a cache): then once more.
    for (let attempt = 1; ; attempt++) {
      const code = await startAndStop(dataDir);
      if (code === 0) return;
      if (attempt === 2) throw new Error(`the bundle did not start and stop cleanly (exit ${code})`);
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function startAndStop(dataDir) {
  const child = spawn(process.execPath, [join(out, "main.js")], {
    env: {
      PATH: process.env.PATH,
      PORT: "0",
      SVC_DATA_DIR: dataDir,
      SVC_DEMO: "false",
      SVC_LOG_FORMAT: "json",
      SVC_LOG_LEVEL: "warn",
      SVC_WRITE_CODE_CACHE: "1",
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
    child.kill("SIGTERM");
  }
  return exited;
}

process.stdout.write(
  `built ${join("packages", "server", "dist")}/main.js, server.cjs (with its code cache) and query-worker.cjs in ${Math.round(performance.now() - started)} ms\n`,
);
