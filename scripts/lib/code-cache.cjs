// Runs a bundled CommonJS file through a V8 code cache (the entries name `<file>.v8-cache`), copied into
// packages/server/dist by scripts/build-server.mjs for both entries: dist/main.js (server.cjs) and
// dist/query-worker-entry.cjs (query-worker.cjs). On Node 20 an ES module cannot use a code cache, so
// the bundles are CommonJS and compiled here with vm.Script's cachedData, which lets V8 skip parsing and
// compiling what a start runs. A cache from another Node or V8 version is rejected by V8 and ignored:
// the bundle then compiles as usual.
"use strict";
const { isAscii } = require("node:buffer");
const { readFileSync, renameSync, writeFileSync } = require("node:fs");
const { createRequire, Module } = require("node:module");
const { dirname } = require("node:path");
const { Script } = require("node:vm");

/**
 * Compiles `file` with the cache in `cacheFile` (if any); `run()` runs it as a module, `writeCache(tag)`
 * saves what V8 compiled to `cacheFile`.
 */
function loadWithCodeCache(file, cacheFile) {
  let cachedData;
  try {
    cachedData = readFileSync(cacheFile);
  } catch {
    cachedData = undefined; // no cache: compile as usual
  }
  const script = new Script(Module.wrap(readSource(file)), {
    filename: file,
    cachedData,
    // The bundles import nothing dynamically at run time but better-sqlite3 (by require); any other
    // import() goes to Node's loader.
    importModuleDynamically: (specifier) => import(specifier),
  });
  return {
    run() {
      const module_ = { exports: {} };
      script.runInThisContext()(module_.exports, createRequire(file), module_, file, dirname(file));
    },
    /** Written through a temporary file named with `tag`, so writers at once never leave half a cache. */
    writeCache(tag = "") {
      const tmp = `${cacheFile}${tag}.tmp`;
      writeFileSync(tmp, script.createCachedData());
      renameSync(tmp, cacheFile);
    },
  };
}

/**
 * The bundle's text. esbuild writes ASCII (its default charset escapes the rest), which read as latin1
 * is the same string at a copy's cost: readFileSync(file, "utf8") read the 3.6 MB server.cjs in 8 KB
 * reads and decoded it, ~5 ms of a start's main thread (docs/performance.md, "Start-up, fourth pass").
 * Anything else is decoded as UTF-8, as before.
 */
function readSource(file) {
  const bytes = readFileSync(file);
  return isAscii(bytes) ? bytes.toString("latin1") : bytes.toString("utf8");
}

module.exports = { loadWithCodeCache };
