import assert from "node:assert/strict";
import { appendFileSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";
import { Spool, type SpoolOptions } from "./spool.ts";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "svc-spool-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const payload = (i: number, size = 100) => new Uint8Array(size).fill(i & 0xff);
const diskBytes = () =>
  readdirSync(dir)
    .filter((f) => f.endsWith(".seg"))
    .reduce((n, f) => n + statSync(join(dir, f)).size, 0);
const open = (o: Partial<SpoolOptions> = {}) =>
  Spool.open({ dir, maxBytes: 1 << 20, maxAgeMs: 3_600_000, segmentBytes: 1024, now: () => 10_000, ...o });

describe("Spool", () => {
  it("returns records in append order and forgets acknowledged ones", () => {
    const s = open();
    for (let i = 0; i < 5; i++) s.append(payload(i), 1000 + i);
    assert.equal(s.pending, 5);
    const first = s.peek(250); // 100-byte payloads: two fit, the first always comes
    assert.deepEqual(
      first.map((r) => r.createdMs),
      [1000, 1001],
    );
    assert.deepEqual(first[1].payload, payload(1));
    s.ack(2);
    assert.deepEqual(
      s.peek(10_000).map((r) => r.createdMs),
      [1002, 1003, 1004],
    );
    s.ack(3);
    assert.equal(s.pending, 0);
    assert.equal(diskBytes(), 0, "consumed segments are deleted");
    s.close();
  });

  it("keeps unacknowledged records and the cursor across a reopen", () => {
    const s = open();
    for (let i = 0; i < 30; i++) s.append(payload(i), 1000 + i);
    s.ack(12);
    s.close();
    const again = open();
    assert.equal(again.pending, 18);
    assert.deepEqual(
      again.peek(1e9).map((r) => r.createdMs),
      Array.from({ length: 18 }, (_, i) => 1012 + i),
    );
    again.append(payload(99), 2000);
    assert.equal(again.peek(1e9).at(-1)?.createdMs, 2000);
    again.close();
  });

  it("stays within maxBytes by dropping the oldest records first, and counts them", () => {
    const s = open({ maxBytes: 64 * 1024, segmentBytes: 8 * 1024 });
    for (let i = 0; i < 2000; i++) {
      s.append(payload(i, 200), 1000 + i);
      assert.ok(diskBytes() <= 64 * 1024, `disk ${diskBytes()} after ${i}`);
      assert.equal(s.bytes, diskBytes());
    }
    const kept = s.peek(1e9).map((r) => r.createdMs);
    assert.equal(kept.at(-1), 2999, "newest kept");
    assert.deepEqual(
      kept,
      Array.from({ length: kept.length }, (_, i) => kept[0] + i),
      "a contiguous newest run",
    );
    assert.equal(s.counters.droppedOverflow + kept.length, 2000);
    assert.ok(s.counters.droppedOverflow > 1000);
    assert.equal(s.append(payload(1, 70 * 1024), 5000), false, "a record larger than the bound is refused");
    s.close();
  });

  it("drops records older than maxAgeMs and counts them", () => {
    let now = 10_000;
    const s = open({ maxAgeMs: 1000, now: () => now });
    for (let i = 0; i < 10; i++) s.append(payload(i), 9_500 + i * 100);
    now = 11_000; // cutoff 10_000: records at 9500..9900 expire
    assert.deepEqual(
      s.peek(1e9).map((r) => r.createdMs),
      [10_000, 10_100, 10_200, 10_300, 10_400],
    );
    assert.equal(s.counters.droppedExpired, 5);
    s.close();
  });

  it("cuts a torn tail left by a crash and keeps the complete records", () => {
    const s = open();
    for (let i = 0; i < 3; i++) s.append(payload(i), 1000 + i);
    s.close();
    const seg = readdirSync(dir).find((f) => f.endsWith(".seg"))!;
    appendFileSync(join(dir, seg), new Uint8Array([50, 0, 0, 0, 1, 2, 3])); // half a header
    const again = open();
    assert.equal(again.counters.truncatedTails, 1);
    assert.deepEqual(
      again.peek(1e9).map((r) => r.createdMs),
      [1000, 1001, 1002],
    );
    again.close();
  });
});
