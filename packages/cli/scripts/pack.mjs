#!/usr/bin/env node
// Builds the `svc` command into one JavaScript file and packs it as an installable npm package:
//   node packages/cli/scripts/pack.mjs [destination-dir]      → prints the tarball's path
// esbuild bundles the CLI with everything it imports (commander, yaml, the SDK, Connect, protobuf-es),
// so the package has no dependencies and `npm install -g` of the tarball needs no registry; one file
// also starts fast (no module resolution across node_modules, no TypeScript loader). The workspace's
// bin/svc.js keeps running the sources through tsx for development.
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const pkgDir = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const dest = resolve(process.argv[2] ?? pkgDir);
const src = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
const stage = mkdtempSync(join(tmpdir(), "svc-cli-pack-"));
try {
  mkdirSync(join(stage, "bin"));
  await build({
    entryPoints: [join(pkgDir, "src", "main.ts")],
    outfile: join(stage, "bin", "svc.mjs"),
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    minify: true,
    legalComments: "eof",
    banner: {
      // Bundled CommonJS dependencies may call require(); ESM output needs one made for them.
      js: `#!/usr/bin/env node\nimport { createRequire as __svcRequire } from "node:module";\nconst require = __svcRequire(import.meta.url);`,
    },
    logLevel: "warning",
  });
  chmodSync(join(stage, "bin", "svc.mjs"), 0o755);
  const pkg = {
    name: src.name,
    version: src.version,
    description: "svc command-line tool: keys, service accounts, monitoring, alerts, incidents, CI identity",
    type: "module",
    bin: { svc: "./bin/svc.mjs" },
    files: ["bin"],
    engines: src.engines,
    license: "UNLICENSED",
  };
  writeFileSync(join(stage, "package.json"), `${JSON.stringify(pkg, null, 2)}\n`);
  mkdirSync(dest, { recursive: true });
  const out = execFileSync("npm", ["pack", "--silent", "--pack-destination", dest], {
    cwd: stage,
    encoding: "utf8",
  });
  process.stdout.write(`${join(dest, out.trim().split("\n").pop())}\n`);
} finally {
  rmSync(stage, { recursive: true, force: true });
}
