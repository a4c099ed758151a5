import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ClosedChunks } from "./chunkstore.ts";

describe("ClosedChunks", () => {
  it("keeps every live chunk's bytes through frees and in-place compaction, and gives pages back", () => {
    let seed = 1;
    const rnd = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed / 0x7fffffff;
    };
    for (let round = 0; round < 3; round++) {
      const c = new ClosedChunks();
      const content = new Map<number, Uint8Array>();
      const check = () => {
        for (const [id, b] of content) {
          const got = c.bytesOf(id).subarray(c.off[id], c.off[id] + c.len[id]);
          assert.deepEqual(got, b, `round ${round}, chunk ${id}`);
        }
      };
      for (let step = 0; step < 4000; step++) {
        if (rnd() < 0.6 || content.size === 0) {
          const len = 1 + Math.floor(rnd() * 3000);
          const b = new Uint8Array(len).map(() => Math.floor(rnd() * 256));
          content.set(c.add(b, 0, len, 1, step, step, -1), b);
        } else {
          const ids = [...content.keys()];
          const id = ids[Math.floor(rnd() * ids.length)];
          c.free(id);
          content.delete(id);
        }
        if (step % 500 === 499) {
          c.compact();
          check();
        }
      }
      // Free most chunks: compaction must leave fewer pages than before.
      const before = c.allocatedBytes();
      for (const id of [...content.keys()].slice(0, Math.floor(content.size * 0.9))) {
        c.free(id);
        content.delete(id);
      }
      c.compact();
      check();
      assert.ok(c.allocatedBytes() < before, `round ${round}: ${c.allocatedBytes()} !< ${before}`);
    }
  });
});
