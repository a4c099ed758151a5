import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  decodeWriteRequestCompact,
  encodeWriteRequest,
  type Label,
  labelKeyBytesHash,
  RemoteWriteDecodeError,
  type TimeSeries,
} from "@svc/remotewrite";
import { seededRandom } from "../../../testing/seeded-random.ts";
import { KeyNumbers } from "./key-numbers.ts";

/** A body's keys side by side in one buffer (after two stray bytes), as the decoder hands them out. */
function body(keys: readonly string[], hash: (key: Buffer) => number = (k) => labelKeyBytesHash(k)) {
  const bytes = Buffer.from(`xy${keys.join("")}`, "latin1");
  const start = new Uint32Array(keys.length);
  const end = new Uint32Array(keys.length);
  const hashes = new Uint32Array(keys.length);
  let off = 2;
  keys.forEach((k, i) => {
    start[i] = off;
    end[i] = off + k.length;
    hashes[i] = hash(bytes.subarray(off, off + k.length));
    off += k.length;
  });
  return { bytes, start, end, hashes, n: keys.length };
}

/**
 * Numbers each body's keys and checks them against a reference (a Map by key string): equal keys,
 * equal numbers; a new key, the next number.
 */
function check(
  k: KeyNumbers,
  ref: Map<string, number>,
  keys: readonly string[],
  hash?: (key: Buffer) => number,
) {
  const b = body(keys, hash);
  const out = new Uint32Array(b.n);
  k.number(b.bytes, b.start, b.end, b.hashes, b.n, out);
  keys.forEach((key, i) => {
    let want = ref.get(key);
    if (want === undefined) {
      want = ref.size;
      ref.set(key, want);
    }
    assert.equal(out[i], want, `series ${i} (${JSON.stringify(key)})`);
  });
  assert.equal(k.size, ref.size);
  return [...out];
}

const keysOf = (n: number, tag = "k") =>
  Array.from({ length: n }, (_, i) => `${tag}-series-${i}-with-a-label-key-of-some-length`);

describe("KeyNumbers", () => {
  it("numbers a body in the same order as last time the same, and a reordered body by its keys", () => {
    const k = new KeyNumbers();
    const ref = new Map<string, number>();
    const keys = keysOf(50);
    const first = check(k, ref, keys);
    assert.equal(k.followed, 0);
    assert.deepEqual(check(k, ref, keys), first);
    assert.equal(k.followed, keys.length - 1, "all but the first series by their successor");
    check(k, ref, [...keys].reverse());
    const rand = seededRandom(7);
    const shuffled = [...keys].sort(() => rand() - 0.5);
    check(k, ref, shuffled);
    check(k, ref, keys);
    // Another sender's bodies interleaved, and bodies split at other places.
    check(k, ref, keys.slice(10, 30));
    check(k, ref, keysOf(20, "other"));
    check(k, ref, keys.slice(25));
    check(k, ref, [...keysOf(20, "other").slice(5), ...keys.slice(0, 5)]);
  });

  it("gives a new series in the middle a new number and keeps the others' numbers", () => {
    const k = new KeyNumbers();
    const ref = new Map<string, number>();
    const keys = keysOf(20);
    check(k, ref, keys);
    const withNew = [...keys.slice(0, 10), "a-new-series", ...keys.slice(10)];
    check(k, ref, withNew);
    check(k, ref, withNew);
    // The old order again (the new series gone, as a churned VM's), then a series dropped and one replaced.
    check(k, ref, keys);
    check(k, ref, [...keys.slice(0, 4), ...keys.slice(5, 12), "replacement", ...keys.slice(13)]);
    check(k, ref, keys);
  });

  it("keeps keys apart whose hashes collide, wherever their bytes differ", () => {
    const k = new KeyNumbers();
    const ref = new Map<string, number>();
    const same = () => 12345;
    // Equal lengths differing in the first byte, in an 8-byte step's second word, in the tail bytes;
    // a prefix of another; the empty key.
    const base = "abcdefghijklmnopqrstu";
    const keys = [
      base,
      `X${base.slice(1)}`,
      `${base.slice(0, 13)}X${base.slice(14)}`,
      `${base.slice(0, 20)}X`,
      base.slice(0, 16),
      base.slice(0, 3),
      "",
    ];
    check(k, ref, keys, same);
    check(k, ref, keys, same);
    // In an order where each key is expected (the successor) where a colliding different key comes.
    check(k, ref, [...keys].reverse(), same);
    check(k, ref, [keys[0], keys[2], keys[1], keys[3], keys[0], keys[6], keys[5]], same);
  });

  it("stays exact while its table, arena and arrays grow, and starts over on clear", () => {
    const k = new KeyNumbers();
    const ref = new Map<string, number>();
    const rand = seededRandom(3);
    const all = Array.from({ length: 6000 }, (_, i) => `key-${i}-${"v".repeat(Math.floor(rand() * 60))}`);
    // Keys ending in "v" (most) hashed to 4 values: long probe chains through other keys' slots.
    const hash = (key: Buffer) =>
      key[key.length - 1] === 118 ? labelKeyBytesHash(key) & 3 : labelKeyBytesHash(key);
    for (let at = 0; at < all.length; at += 700) check(k, ref, all.slice(0, at + 700), hash);
    check(k, ref, [...all].reverse(), hash);
    assert.ok(k.keyBytes > 64 * 1024);
    k.clear();
    assert.equal(k.size, 0);
    check(k, new Map(), all.slice(100, 300), hash);
  });

  describe("numbering as the decoder reads each series", () => {
    const series = (labels: Label[][]): Uint8Array =>
      encodeWriteRequest({
        timeseries: labels.map(
          (l): TimeSeries => ({ labels: l, samples: [{ value: 1, timestampMs: 1000 }] }),
        ),
      });
    const vmSeries = (vms: string[]) =>
      vms.flatMap((vm) =>
        ["cpu", "mem", "net"].map((m) => [
          { name: "__name__", value: `svc_vm_${m}` },
          { name: "vm", value: vm },
        ]),
      );
    /** Decodes with `k` numbering; checks hashes as a plain decode's and numbers one-to-one with keys. */
    function decode(k: KeyNumbers, byKey: Map<string, number>, body: Uint8Array) {
      k.begin();
      const c = decodeWriteRequestCompact(body, {}, k);
      const plain = decodeWriteRequestCompact(body);
      assert.deepEqual(
        [...c.labelHashes.subarray(0, c.seriesCount)],
        [...plain.labelHashes.subarray(0, c.seriesCount)],
      );
      const ids = k.ids(c.seriesCount);
      c.labelKeys.forEach((key, i) => {
        const want = byKey.get(key);
        if (want === undefined) {
          for (const [other, id] of byKey)
            assert.notEqual(id, ids[i], `${JSON.stringify(key)} numbered as ${JSON.stringify(other)}`);
          byKey.set(key, ids[i]);
        } else assert.equal(ids[i], want, `series ${i}`);
      });
      return ids;
    }

    it("numbers keys as number() does, by their successor from the second body on", () => {
      const k = new KeyNumbers();
      const byKey = new Map<string, number>();
      const vms = Array.from({ length: 30 }, (_, i) => `projects/p/locations/l/vms/vm-${i}`);
      const body = series(vmSeries(vms));
      const first = decode(k, byKey, body);
      assert.equal(k.followed, 0);
      assert.deepEqual(decode(k, byKey, body), first);
      assert.equal(k.followed, first.length - 1);
      // A churned VM replaced in the middle, then the reverse order.
      decode(
        k,
        byKey,
        series(vmSeries([...vms.slice(0, 12), "projects/p/locations/l/vms/new", ...vms.slice(13)])),
      );
      decode(k, byKey, series(vmSeries([...vms].reverse())));
    });

    it("never lets a key past unchecked: one that differs from the expected in a bad UTF-8 byte is refused", () => {
      const k = new KeyNumbers();
      const byKey = new Map<string, number>();
      const good = series([[{ name: "a", value: "x" }], [{ name: "b", value: "y" }]]);
      decode(k, byKey, good);
      decode(k, byKey, good);
      // The second key's value byte "y" made 0xff: same length, expected (the successor) at its place.
      const bad = Buffer.from(good);
      const at = bad.lastIndexOf(0x79);
      bad[at] = 0xff;
      k.begin();
      assert.throws(
        () => decodeWriteRequestCompact(bad, {}, k),
        (e: unknown) => e instanceof RemoteWriteDecodeError && /not valid UTF-8/.test(e.message),
      );
      // A refused body leaves the numbering consistent.
      decode(k, byKey, good);
      decode(k, byKey, series([[{ name: "b", value: "y" }], [{ name: "c", value: "z" }]]));
    });

    it("numbers a key sent in parts (labels interleaved with samples) as the same key sent whole", () => {
      const k = new KeyNumbers();
      const byKey = new Map<string, number>();
      const whole = series([
        [
          { name: "a", value: "b" },
          { name: "c", value: "d" },
        ],
      ]);
      // TimeSeries{label a=b, sample{timestamp 5}, label c=d}
      const parts = Buffer.from("0a140a060a0161120162120210050a060a0163120164", "hex");
      const ids = [...decode(k, byKey, whole), ...decode(k, byKey, parts), ...decode(k, byKey, whole)];
      assert.deepEqual(ids, [0, 0, 0]);
    });
  });
});
