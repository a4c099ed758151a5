// The production build of the server: plain JavaScript, no tsx at run time. esbuild bundles
// packages/server/src/main.ts with the workspace packages it imports (@svc/sdk, @svc/remotewrite, which
// are TypeScript sources) into packages/server/dist/main.js, and the PromQL query worker into
// query-worker.js beside it; npm dependencies stay external and load from node_modules.
// `npm run build` runs this with the console and agent builds; `npm run start:prod` runs the result.
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";

const root = join(import.meta.dirname, "..");
const server = join(root, "packages", "server");
const out = join(server, "dist");
const { version } = JSON.parse(readFileSync(join(server, "package.json"), "utf8"));

/** npm packages load from node_modules; the workspace's own @svc/* sources are bundled. */
const externalNpm = {
  name: "external-npm",
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) => {
      if (args.path.startsWith("@svc/") || args.path.startsWith("node:")) return undefined;
      return { path: args.path, external: true };
    });
  },
};

rmSync(out, { recursive: true, force: true });
const started = performance.now();
await build({
  entryPoints: {
    main: join(server, "src", "main.ts"),
    "query-worker": join(server, "src", "promql", "pool", "worker.ts"),
  },
  outdir: out,
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  sourcemap: true,
  legalComments: "none",
  plugins: [externalNpm],
  // The query pool starts its workers from the bundled file instead of the tsx bootstrap.
  define: { "globalThis.SVC_QUERY_WORKER_BUNDLE": JSON.stringify("./query-worker.js") },
  banner: { js: `// svc server ${version}, bundled by scripts/build-server.mjs` },
  logLevel: "warning",
});
process.stdout.write(
  `built ${join("packages", "server", "dist")}/main.js and query-worker.js in ${Math.round(performance.now() - started)} ms\n`,
);
