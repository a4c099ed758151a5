// A start registers the RPCs' routes without loading Connect, protobuf's runtime or any descriptor;
// the first RPC loads them and is answered (docs/performance.md, "Start-up, third pass"). Its own
// file: it watches which modules the process loads, so nothing may import protobuf before it does
// (the test harness does, through the SDK's clients; this test calls by fetch). SQLite only: what
// loads does not depend on the database.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { traceLoadedModules } from "../../testing/loaded-modules.ts";

const loaded = traceLoadedModules();
/** The modules that build descriptors (protoc-gen-es's files, protobuf's well-known types) or load Connect. */
const protobufModules = async () =>
  (await loaded()).filter((u) => /_pb\.[jt]s$|@bufbuild[/]protobuf[/]|@connectrpc[/]/.test(u));

describe("a start without Connect and protobuf (connect-plugin.ts, rpc-routes.ts)", () => {
  it("loads no descriptor before its first RPC, which then answers", async () => {
    // Imported here, after the module trace started.
    const { createStandaloneApp, STANDALONE_ADMIN_TOKEN: token } = await import(
      "../../testing/standalone-app.ts"
    );
    const { app, port, remove } = await createStandaloneApp();
    try {
      const base = (await app.server.listen({ host: "127.0.0.1", port })).replace("localhost", "127.0.0.1");
      assert.equal((await fetch(`${base}/readyz`)).status, 200);
      assert.deepEqual(await protobufModules(), [], "ready without Connect or protobuf");
      // An unknown path under an RPC package is Fastify's 404 and loads nothing either.
      const unknown = await fetch(`${base}/svc.iam.v1.SessionService/NoSuchMethod`, { method: "POST" });
      assert.equal(unknown.status, 404);
      assert.deepEqual(await protobufModules(), []);

      const call = (body: string) =>
        fetch(`${base}/svc.iam.v1.SessionService/WhoAmI`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${token}`,
            "content-type": "application/json",
            "connect-protocol-version": "1",
          },
          body,
        });
      // Two first calls at once: both wait for the one load, both are answered.
      const [a, b] = await Promise.all([call("{}"), call("{}")]);
      for (const res of [a, b]) {
        assert.equal(res.status, 200);
        assert.deepEqual(await res.json(), { principal: "operator", kind: "OPERATOR", grants: [] });
      }
      const after = await protobufModules();
      assert.ok(
        after.some((u) => u.endsWith("session_pb.ts")),
        "the services' descriptors load with it",
      );
      // Connect's own answers still come from Connect: a malformed body, a wrong method.
      const bad = await call("{");
      assert.equal(bad.status, 400);
      assert.equal(((await bad.json()) as { code: string }).code, "invalid_argument");
      const get = await fetch(`${base}/svc.iam.v1.SessionService/WhoAmI`, {
        headers: { authorization: `Bearer ${token}` },
      });
      assert.equal(get.status, 405);
    } finally {
      await app.close();
      remove();
    }
  });
});
