import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import {
  decodeRemoteWriteBodyCompact,
  encodeRemoteWriteBody,
  RemoteWriteDecodeError,
  snappyCompress,
  type TimeSeries,
} from "@svc/remotewrite";
import { seededRandom } from "../../../testing/seeded-random.ts";
import { createDecodePool, DecodeWorkerLostError } from "./pool.ts";

const STALE_NAN = new Float64Array(new Uint32Array([2, 0x7ff00000]).buffer)[0];

/** A body of `n` series with seeded labels and values (a staleness marker and a UTF-8 label among them). */
function body(seed: number, n: number): Uint8Array {
  const rand = seededRandom(seed);
  const ts: TimeSeries[] = [];
  for (let i = 0; i < n; i++) {
    ts.push({
      labels: [
        { name: "__name__", value: `m_${Math.floor(rand() * 5)}` },
        { name: "vm", value: `projects/p/locations/dc-1/vms/vm-${Math.floor(rand() * 50)}` },
        { name: "note", value: i % 7 === 0 ? "grüße" : "x" },
      ],
      samples: [
        { value: i % 11 === 0 ? STALE_NAN : rand() * 1e6, timestampMs: 1_700_000_000_000 + i },
        { value: Math.floor(rand() * 100), timestampMs: 1_700_000_030_000 + i },
      ],
    });
  }
  return encodeRemoteWriteBody({ timeseries: ts, metadata: [] });
}

/** The fields of a decoded request, values as their bits (a NaN payload compared exactly). */
function plain(r: ReturnType<typeof decodeRemoteWriteBodyCompact>) {
  const n = r.seriesCount;
  const m = r.sampleCount;
  return {
    n,
    m,
    keys: [...r.labelKeys],
    hashes: [...r.labelHashes.subarray(0, n)],
    sampleStart: [...r.sampleStart.subarray(0, n + 1)],
    ts: [...r.timestampsMs.subarray(0, m)],
    bits: [...new Uint32Array(r.values.buffer, r.values.byteOffset, m * 2)],
    metadata: r.metadata,
  };
}

describe("ingest decode pool", () => {
  const pool = createDecodePool({ workers: 1, inlineBytes: 0, depth: 1 });
  after(() => pool.close());

  it("decodes a body exactly as the inline decoder, and numbers equal keys equally", async () => {
    const a = body(1, 400);
    const inline = decodeRemoteWriteBodyCompact(a);
    const first = await pool.decode(a.slice(), "t");
    assert.deepEqual(plain(first.req), plain(inline));
    const again = await pool.decode(body(1, 400), "t");
    assert.ok(first.keys && again.keys);
    assert.equal(again.keys.space, first.keys.space, "the same numbering");
    assert.deepEqual([...again.keys.ids], [...first.keys.ids]);
    // Equal numbers exactly where the keys are equal.
    const keys = first.req.labelKeys;
    for (let i = 0; i < keys.length; i++)
      for (let j = i + 1; j < keys.length; j++)
        assert.equal(first.keys.ids[i] === first.keys.ids[j], keys[i] === keys[j], `series ${i} and ${j}`);
  });

  it("starts a new numbering after a body that takes a worker past maxKeys, that body numbered in it", async () => {
    const distinct = (...bodies: Uint8Array[]) =>
      new Set(bodies.flatMap((x) => decodeRemoteWriteBodyCompact(x).labelKeys)).size;
    // Room for either body's keys, not for both.
    const maxKeys = Math.max(distinct(body(6, 200)), distinct(body(7, 200)));
    assert.ok(distinct(body(6, 200), body(7, 200)) > maxKeys);
    const small = createDecodePool({ workers: 1, inlineBytes: 0, maxKeys });
    try {
      const a = await small.decode(body(6, 200), "t");
      const b = await small.decode(body(7, 200), "t");
      const b2 = await small.decode(body(7, 200), "t");
      assert.ok(a.keys && b.keys && b2.keys);
      assert.notEqual(b.keys.space, a.keys.space, "a new numbering");
      assert.equal(b2.keys.space, b.keys.space);
      assert.deepEqual([...b2.keys.ids], [...b.keys.ids]);
      // Within the new numbering, equal numbers exactly where the keys are equal, from 0 up.
      const keys = b.req.labelKeys;
      const first = new Map<string, number>();
      keys.forEach((k, i) => {
        if (!first.has(k)) first.set(k, b.keys?.ids[i] ?? -1);
        assert.equal(b.keys?.ids[i], first.get(k), `series ${i}`);
      });
      assert.equal(new Set(first.values()).size, first.size);
      assert.equal(Math.max(...first.values()), first.size - 1);
    } finally {
      await small.close();
    }
  });

  it("refuses a bad body with the inline decoder's error, naming the field and the limit", async () => {
    // WriteRequest{timeseries: TimeSeries{samples: Sample{value as a varint}}}
    const bad = snappyCompress(new Uint8Array([0x0a, 4, 0x12, 2, 0x08, 0x05]));
    const inline = (() => {
      try {
        decodeRemoteWriteBodyCompact(bad);
      } catch (e) {
        return e as RemoteWriteDecodeError;
      }
      throw new Error("the inline decoder accepted it");
    })();
    await assert.rejects(pool.decode(bad.slice(), "t"), (e: unknown) => {
      assert.ok(e instanceof RemoteWriteDecodeError);
      assert.equal(e.message, inline.message);
      assert.match(e.message, /Sample\.value/);
      return true;
    });
    const limited = createDecodePool({ workers: 1, inlineBytes: 0, limits: { maxSeries: 3 } });
    try {
      await assert.rejects(limited.decode(body(2, 10), "t"), (e: unknown) => {
        assert.ok(e instanceof RemoteWriteDecodeError);
        assert.equal(e.limit, "maxSeries");
        assert.equal(e.allowed, 3);
        assert.match(e.message, /maxSeries exceeded \(4 > 3\)/);
        return true;
      });
    } finally {
      await limited.close();
    }
  });

  it("a worker that dies fails the body it held as retryable and is replaced; nothing hangs", async () => {
    const before = pool.stats();
    pool.crashNextForTest();
    const lost = pool.decode(body(3, 50), "t");
    const queued = pool.decode(body(3, 50), "t");
    await assert.rejects(lost, DecodeWorkerLostError);
    // The job queued behind it goes to the replacement.
    const r = await queued;
    assert.equal(r.req.seriesCount, 50);
    assert.equal(pool.stats().replaced, before.replaced + 1);
    assert.equal(pool.stats().workers, 1);
    assert.notEqual(r.keys?.space, undefined);
  });

  it("takes tenants' queued bodies round-robin: one tenant's backlog does not delay another's body", async () => {
    const order: string[] = [];
    const sent = [
      ...["a1", "a2", "a3", "a4", "a5"].map((n) => [n, "heavy"] as const),
      ["b1", "light"] as const,
    ].map(([name, tenant]) =>
      pool.decode(body(4, 200), tenant).then(() => {
        order.push(name);
      }),
    );
    await Promise.all(sent);
    // One job at the worker at a time (depth 1): a1 is sent at once, then heavy and light alternate
    // (a1, a2, b1, a3, …); b1 never waits behind heavy's whole backlog.
    assert.equal(order.length, 6);
    assert.ok(order.indexOf("b1") < order.indexOf("a3"), order.join(","));
  });

  it("after close, decodes are refused as retryable", async () => {
    const p = createDecodePool({ workers: 1, inlineBytes: 0 });
    await p.ready();
    await p.close();
    assert.equal(p.wants(1 << 20), false);
    await assert.rejects(p.decode(body(5, 3), "t"), DecodeWorkerLostError);
  });
});
