import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { startWorker, withoutTypeScriptLoader } from "./worker-script.ts";

describe("withoutTypeScriptLoader()", () => {
  it("drops tsx's loader in each spelling and keeps every other option", () => {
    assert.deepEqual(withoutTypeScriptLoader(["--import", "tsx", "--enable-source-maps"]), [
      "--enable-source-maps",
    ]);
    assert.deepEqual(
      withoutTypeScriptLoader([
        "--require",
        "/r/node_modules/tsx/dist/preflight.cjs",
        "--import",
        "file:///r/node_modules/tsx/dist/loader.mjs",
        "--max-old-space-size=512",
      ]),
      ["--max-old-space-size=512"],
    );
    assert.deepEqual(withoutTypeScriptLoader(["--import=tsx", "--loader=tsx/esm"]), []);
    assert.deepEqual(
      withoutTypeScriptLoader([
        "--import",
        "./otel.mjs",
        "--require=./tsx-free.cjs",
        "--test-name-pattern=x",
      ]),
      ["--import", "./otel.mjs", "--require=./tsx-free.cjs", "--test-name-pattern=x"],
    );
  });
});

describe("startWorker() from the sources", () => {
  const source = new URL("./testdata/echo-worker.ts", import.meta.url);
  const run = async (): Promise<unknown> => {
    const w = startWorker(undefined, source, import.meta.url, { workerData: { n: 20 } });
    const reply = await new Promise((resolve, reject) => {
      w.once("message", resolve);
      w.once("error", reject);
    });
    await w.terminate();
    return reply;
  };

  it("runs the TypeScript entry as a bundle, without tsx in the thread, built once per process", async () => {
    const cache = fileURLToPath(new URL("../../../../node_modules/.cache/svc-workers/", import.meta.url));
    assert.deepEqual(await run(), {
      doubled: 40,
      // import.meta.url is the bundle's own file, as in the production build
      bundled: true,
      loaders: [],
    });
    const built = readdirSync(cache).filter((f) => f.includes("echo-worker") && f.endsWith(".cjs"));
    assert.equal(built.length >= 1, true, `a bundle in ${cache}`);
    await run();
    assert.deepEqual(
      readdirSync(cache).filter((f) => f.includes("echo-worker") && f.endsWith(".cjs")),
      built,
      "the second start reuses the bundle",
    );
  });
});
