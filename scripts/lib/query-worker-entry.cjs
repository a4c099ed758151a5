// The production query worker's entry (packages/server/dist/query-worker-entry.cjs, copied by
// scripts/build-server.mjs): each of the query pool's worker threads starts here and runs the bundled
// worker (query-worker.cjs) through a V8 code cache (code-cache.cjs), as dist/main.js runs server.cjs.
// CommonJS, so the thread does not set up the ES module loader either. The build's own start writes the
// cache (SVC_WRITE_CODE_CACHE=1) once the worker's module has run, each thread through its own file.
"use strict";
const { join } = require("node:path");
const { threadId } = require("node:worker_threads");
const { loadWithCodeCache } = require("./code-cache.cjs");

const file = join(__dirname, "query-worker.cjs");
const worker = loadWithCodeCache(file, `${file}.v8-cache`);
worker.run();
if (process.env.SVC_WRITE_CODE_CACHE === "1") worker.writeCache(`.${threadId}`);
