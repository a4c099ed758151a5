import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { it } from "node:test";
import { allServices as services } from "../../testing/services.ts";
import { methodAccess } from "./capabilities.ts";

it("every RPC of every service has exactly one row in the access table, and no row names a missing RPC", () => {
  const rpcs = services.flatMap((s) => s.methods.map((m) => `${s.typeName}/${m.name}`));
  assert.deepEqual([...rpcs].sort(), Object.keys(methodAccess).sort());
});

it("docs/api.md documents every RPC", () => {
  const doc = readFileSync(join(import.meta.dirname, "../../../../docs/api.md"), "utf8");
  for (const key of Object.keys(methodAccess)) {
    const method = key.split("/")[1];
    assert.ok(doc.includes(method), `${key} is not in docs/api.md`);
  }
});
