import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { labelKeyBytesHash } from "@svc/remotewrite";
import { dataView, SeriesCache } from "./series-cache.ts";

interface Entry {
  keyAt: number;
  keyLen: number;
  n: number;
}
const e = (n: number): Entry => ({ keyAt: -1, keyLen: -1, n });

/** Keys side by side in one buffer, as the decoder hands them out; k(i) is key i's range. */
function keysIn(keys: string[]): { bytes: Buffer; view: DataView; k: (i: number) => [number, number] } {
  const bytes = Buffer.from(`xy${keys.join("")}`, "latin1");
  const at: [number, number][] = [];
  let off = 2;
  for (const key of keys) {
    at.push([off, off + key.length]);
    off += key.length;
  }
  return { bytes, view: dataView(bytes), k: (i) => at[i] };
}

describe("SeriesCache", () => {
  it("finds entries by hash and key bytes, and keeps keys whose hashes collide apart", () => {
    const { bytes, view, k } = keysIn(["a", "b", "c", "z", "abcdefgh1", "abcdefgh2"]);
    const c = new SeriesCache<Entry>();
    const get = (hash: number, i: number) => c.get(hash, bytes, view, ...k(i));
    c.set(7, bytes, ...k(0), e(1));
    c.set(7, bytes, ...k(1), e(2)); // same hash, other key: overflow
    c.set(8, bytes, ...k(2), e(3));
    assert.equal(get(7, 0)?.n, 1);
    assert.equal(get(7, 1)?.n, 2);
    assert.equal(get(7, 3), undefined);
    assert.equal(get(8, 2)?.n, 3);
    assert.equal(get(9, 0), undefined);
    c.set(7, bytes, ...k(0), e(4)); // replaces in place
    assert.equal(get(7, 0)?.n, 4);
    assert.equal(c.size, 3);
    // Keys longer than a word that differ in the last byte only.
    c.set(5, bytes, ...k(4), e(5));
    assert.equal(get(5, 4)?.n, 5);
    assert.equal(get(5, 5), undefined);
    c.clear();
    assert.equal(get(7, 0), undefined);
    assert.equal(c.size, 0);
  });

  it("works with the decoder's label-key hashes, wherever a key lies in its request", () => {
    const c = new SeriesCache<Entry>();
    const keys = ["\n\u0006\n\u0001a\u0012\u0001b", "\n\u0006\n\u0001a\u0012\u0001c", ""];
    const first = keysIn(keys);
    for (let i = 0; i < keys.length; i++) {
      const [s, end] = first.k(i);
      c.set(labelKeyBytesHash(first.bytes, s, end), first.bytes, s, end, e(i));
    }
    // The same keys in another order, at other offsets of another buffer.
    const again = keysIn([...keys].reverse());
    for (let i = 0; i < keys.length; i++) {
      const [s, end] = again.k(keys.length - 1 - i);
      assert.equal(c.get(labelKeyBytesHash(again.bytes, s, end), again.bytes, again.view, s, end)?.n, i);
    }
  });
});
