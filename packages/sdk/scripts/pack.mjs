#!/usr/bin/env node
// Builds @svc/sdk to JavaScript with type declarations and packs it for plain Node projects:
//   node packages/sdk/scripts/pack.mjs [destination-dir]      → prints the tarball's path
// The workspace's package.json points at the TypeScript sources (run through tsx); the packed one
// points at dist/, so the tarball is staged with its own package.json rather than packed in place.
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const pkgDir = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const dest = resolve(process.argv[2] ?? pkgDir);
const src = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
const stage = mkdtempSync(join(tmpdir(), "svc-sdk-pack-"));
try {
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  execFileSync(
    process.execPath,
    [tsc, "-p", join(pkgDir, "tsconfig.build.json"), "--outDir", join(stage, "dist")],
    {
      stdio: "inherit",
    },
  );
  const pkg = {
    name: src.name,
    version: src.version,
    description: src.description,
    type: "module",
    main: "./dist/index.js",
    types: "./dist/index.d.ts",
    exports: {
      ".": { types: "./dist/index.d.ts", default: "./dist/index.js" },
      "./gen/*": { types: "./dist/gen/*.d.ts", default: "./dist/gen/*.js" },
    },
    files: ["dist", "README.md"],
    sideEffects: false,
    engines: src.engines,
    dependencies: src.dependencies,
  };
  writeFileSync(join(stage, "package.json"), `${JSON.stringify(pkg, null, 2)}\n`);
  copyFileSync(join(pkgDir, "../../docs/sdk.md"), join(stage, "README.md"));
  mkdirSync(dest, { recursive: true });
  const out = execFileSync("npm", ["pack", "--json", "--pack-destination", dest], {
    cwd: stage,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  });
  const [{ filename }] = JSON.parse(out);
  process.stdout.write(`${join(dest, filename)}\n`);
} finally {
  rmSync(stage, { recursive: true, force: true });
}
