import assert from "node:assert/strict";
import { it } from "node:test";
import { slicer } from "./slicer.ts";

it("slicer: due once a slice has passed, reset by a yield, which says whether the store is still open", async () => {
  let open = true;
  // The test's own clock: a loaded machine's pauses between two lines must not pass a slice.
  let clock = 1_000;
  const s = slicer(
    5,
    () => open,
    () => clock,
  );
  assert.equal(s.due(), false);
  clock += 6;
  assert.equal(s.due(), true);
  assert.equal(await s.yield(), true);
  assert.equal(s.due(), false, "a yield starts a new slice");
  open = false;
  assert.equal(await s.yield(), false);
  assert.equal(slicer(0, () => true).due(), true, "a zero slice yields between every series");
});
