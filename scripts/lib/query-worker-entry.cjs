// The production query worker's entry (packages/server/dist/query-worker-entry.cjs, copied by
// scripts/build-server.mjs): each of the query pool's worker threads starts here and runs the bundled
// worker (query-worker.cjs) through a V8 code cache, as dist/main.js runs server.cjs (see
// server-entry.mjs): V8 then skips parsing and compiling what a worker's start runs. CommonJS, so the
// thread does not set up the ES module loader either. The build's own start writes the cache
// (SVC_WRITE_CODE_CACHE=1) once the worker's module has run; a cache from another Node or V8 version
// is rejected by V8 and ignored.
"use strict";
const { readFileSync, renameSync, writeFileSync } = require("node:fs");
const { Module, createRequire } = require("node:module");
const { dirname, join } = require("node:path");
const { Script } = require("node:vm");
const { threadId } = require("node:worker_threads");

const file = join(__dirname, "query-worker.cjs");
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
  importModuleDynamically: (specifier) => import(specifier),
});
const module_ = { exports: {} };
script.runInThisContext()(module_.exports, createRequire(file), module_, file, dirname(file));
if (process.env.SVC_WRITE_CODE_CACHE === "1") {
  const tmp = `${cacheFile}.${threadId}.tmp`;
  writeFileSync(tmp, script.createCachedData());
  renameSync(tmp, cacheFile);
}
