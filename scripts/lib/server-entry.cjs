// The production entry point, copied to packages/server/dist/main.js by scripts/build-server.mjs (with
// a dist/package.json that makes it CommonJS: node then starts it without setting up the ES module
// loader, ~5 ms of CPU less per start). It runs the bundled server (server.cjs) through a V8 code cache
// (code-cache.cjs). The build writes the cache by starting the bundle once (SVC_WRITE_CODE_CACHE=1:
// written at exit, so it holds the functions the whole start compiled).
"use strict";
const { join } = require("node:path");
const { loadWithCodeCache } = require("./code-cache.cjs");

const file = join(__dirname, "server.cjs");
const server = loadWithCodeCache(file, `${file}.v8-cache`);
if (process.env.SVC_WRITE_CODE_CACHE === "1") process.on("exit", () => server.writeCache());
server.run();
