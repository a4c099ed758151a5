// The production build of the server: plain JavaScript, no tsx at run time. esbuild bundles
// packages/server/src/main.ts with the workspace packages it imports (@svc/sdk, @svc/remotewrite, which
// are TypeScript sources) and its npm dependencies into packages/server/dist/main.js, and the PromQL
// query worker into query-worker.js beside it (with chunks/ they share). Start-up time is mostly module loading: resolving and
// compiling ~1,000 files of node_modules took ~0.5 s of a 0.7–1.1 s start, one file takes a fraction.
// Only packages that cannot be bundled stay external and load from node_modules: native addons and
// the optional ones their dependencies probe for.
// `npm run build` runs this with the console and agent builds; `npm run start:prod` runs the result.
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";

const root = join(import.meta.dirname, "..");
const server = join(root, "packages", "server");
const out = join(server, "dist");
const { version } = JSON.parse(readFileSync(join(server, "package.json"), "utf8"));

/** Loaded from node_modules at run time: a native addon, and optional packages never installed. */
const EXTERNAL = ["better-sqlite3", "pg-native"];

rmSync(out, { recursive: true, force: true });
const started = performance.now();
await build({
  entryPoints: {
    main: join(server, "src", "main.ts"),
    "query-worker": join(server, "src", "promql", "pool", "worker.ts"),
  },
  outdir: out,
  bundle: true,
  // Modules loaded by dynamic import (the demo, the PostgreSQL driver, nodemailer) go to chunks of
  // their own, compiled only by a process that loads them.
  splitting: true,
  chunkNames: "chunks/[name]-[hash]",
  platform: "node",
  format: "esm",
  target: "node20",
  sourcemap: true,
  legalComments: "none",
  // Whitespace and syntax only: identifiers keep their names, so stack traces stay readable.
  minifyWhitespace: true,
  minifySyntax: true,
  external: EXTERNAL,
  // Bundled CommonJS packages call require() for Node's built-ins; an ES module has none of its own.
  banner: {
    js: [
      `// svc server ${version}, bundled by scripts/build-server.mjs`,
      'import { createRequire as __svcCreateRequire } from "node:module";',
      "const require = __svcCreateRequire(import.meta.url);",
    ].join("\n"),
  },
  // The query pool starts its workers from the bundled file instead of the tsx bootstrap.
  define: { "globalThis.SVC_QUERY_WORKER_BUNDLE": JSON.stringify("./query-worker.js") },
  logLevel: "warning",
});
process.stdout.write(
  `built ${join("packages", "server", "dist")}/main.js and query-worker.js in ${Math.round(performance.now() - started)} ms\n`,
);
