import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { labelKeyHash } from "@svc/remotewrite";
import { SeriesCache } from "./series-cache.ts";

const e = (key: string, n: number) => ({ key, n });

describe("SeriesCache", () => {
  it("finds entries by hash and key, and keeps keys whose hashes collide apart", () => {
    const c = new SeriesCache<{ key: string; n: number }>();
    c.set(7, e("a", 1));
    c.set(7, e("b", 2)); // same hash, other key: overflow
    c.set(8, e("c", 3));
    assert.equal(c.get(7, "a")?.n, 1);
    assert.equal(c.get(7, "b")?.n, 2);
    assert.equal(c.get(7, "z"), undefined);
    assert.equal(c.get(8, "c")?.n, 3);
    assert.equal(c.get(9, "a"), undefined);
    c.set(7, e("a", 4)); // replaces in place
    assert.equal(c.get(7, "a")?.n, 4);
    assert.equal(c.size, 3);
    c.clear();
    assert.equal(c.get(7, "a"), undefined);
    assert.equal(c.size, 0);
  });

  it("works with the decoder's label-key hashes", () => {
    const c = new SeriesCache<{ key: string; n: number }>();
    const keys = ["\n\u0006\n\u0001a\u0012\u0001b", "\n\u0006\n\u0001a\u0012\u0001c", ""];
    for (const [i, k] of keys.entries()) c.set(labelKeyHash(k), e(k, i));
    for (const [i, k] of keys.entries()) assert.equal(c.get(labelKeyHash(k), k)?.n, i);
  });
});
