// The production entry point, copied to packages/server/dist/main.js by scripts/build-server.mjs.
// It runs the bundled server (server.cjs) through a V8 code cache: on Node 20 an ES module cannot
// use one, so the bundle is CommonJS and compiled here with vm.Script's cachedData, which lets V8
// skip parsing and compiling what start-up runs (the cache holds the functions a start compiled).
// The build writes the cache by starting the bundle once (SVC_WRITE_CODE_CACHE=1: written at exit).
// A cache from another Node or V8 version is rejected by V8 and ignored: the bundle then compiles
// as usual.
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { createRequire, Module } from "node:module";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { Script } from "node:vm";

const file = fileURLToPath(new URL("./server.cjs", import.meta.url));
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
const module = { exports: {} };
script.runInThisContext()(module.exports, createRequire(file), module, file, dirname(file));
