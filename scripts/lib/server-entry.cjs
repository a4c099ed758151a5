// The production entry point, copied to packages/server/dist/main.js by scripts/build-server.mjs (with
// a dist/package.json that makes it CommonJS: node then starts it without setting up the ES module
// loader, ~5 ms of CPU less per start). It runs the bundled server (server.cjs) through a V8 code cache:
// on Node 20 an ES module cannot use one, so the bundle is CommonJS and compiled here with vm.Script's
// cachedData, which lets V8 skip parsing and compiling what start-up runs (the cache holds the
// functions a start compiled). The build writes the cache by starting the bundle once
// (SVC_WRITE_CODE_CACHE=1: written at exit). A cache from another Node or V8 version is rejected by V8
// and ignored: the bundle then compiles as usual.
"use strict";
const { readFileSync, renameSync, writeFileSync } = require("node:fs");
const { createRequire, Module } = require("node:module");
const { dirname, join } = require("node:path");
const { Script } = require("node:vm");

const file = join(__dirname, "server.cjs");
const cacheFile = `${file}.v8-cache`;
let cachedData;
try {
  cachedData = readFileSync(cacheFile);
} catch {
  cachedData = undefined; // no cache: compile as usual
}
const script = new Script(Module.wrap(readFileSync(file, "utf8")), {
  filename: file,
  cachedData,
  // The bundle imports nothing dynamically at run time but better-sqlite3 (by require); any other
  // import() goes to Node's loader.
  importModuleDynamically: (specifier) => import(specifier),
});
if (process.env.SVC_WRITE_CODE_CACHE === "1") {
  process.on("exit", () => {
    const tmp = `${cacheFile}.tmp`;
    writeFileSync(tmp, script.createCachedData());
    renameSync(tmp, cacheFile);
  });
}
const module_ = { exports: {} };
script.runInThisContext()(module_.exports, createRequire(file), module_, file, dirname(file));
