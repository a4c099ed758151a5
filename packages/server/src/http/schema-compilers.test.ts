import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { describe, it } from "node:test";
import Fastify from "fastify";
import { testDialects } from "../../testing/dialects.ts";
import { startTestApp } from "../../testing/harness.ts";
import { schemaCompilers } from "./server.ts";

/** Which of the two compiler packages are in node's module cache. */
const loaded = () =>
  [
    ...new Set(
      Object.keys(createRequire(import.meta.url).cache).flatMap(
        (k) => /[/\\]@fastify[/\\](ajv-compiler|fast-json-stringify-compiler)[/\\]/.exec(k)?.[1] ?? [],
      ),
    ),
  ].sort();

describe("Fastify's JSON-schema compilers (http/server.ts)", () => {
  it("are not loaded by a server start: svc's routes declare no schema", async () => {
    const [{ dialect }] = (await testDialects()).filter((d) => d.dialect.name === "sqlite");
    const t = await startTestApp(dialect);
    try {
      assert.equal((await fetch(`${t.baseUrl}/readyz`)).status, 200);
      assert.deepEqual(loaded(), []);
    } finally {
      await t.close();
    }
  });

  it("load when a route declares one, and validate and serialize as Fastify's own", async () => {
    const app = Fastify({ schemaController: { compilersFactory: schemaCompilers as never } });
    app.post(
      "/echo",
      {
        schema: {
          body: { type: "object", required: ["n"], properties: { n: { type: "integer" } } },
          response: { 200: { type: "object", properties: { n: { type: "integer" } } } },
        },
      },
      async (req) => ({ ...(req.body as object), dropped: "by the response schema" }),
    );
    const ok = await app.inject({ method: "POST", url: "/echo", payload: { n: 3 } });
    assert.equal(ok.statusCode, 200);
    assert.deepEqual(ok.json(), { n: 3 });
    const bad = await app.inject({ method: "POST", url: "/echo", payload: { n: "three" } });
    assert.equal(bad.statusCode, 400);
    assert.match(bad.json().message, /body\/n must be integer/);
    assert.deepEqual(loaded(), ["ajv-compiler", "fast-json-stringify-compiler"]);
    await app.close();
  });
});
