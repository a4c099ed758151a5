import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  decodeRemoteWriteBodyCompact,
  decodeWriteRequestCompact,
  encodeRemoteWriteBody,
  encodeWriteRequest,
  labelKeyBytesHash,
  labelKeyHash,
  labelsOfKey,
  labelsOfKeyBytes,
  RemoteWriteDecodeError,
  type WriteRequest,
} from "./index.ts";

const hex = (s: string) => Uint8Array.from(Buffer.from(s.replace(/\s+/g, ""), "hex"));
const bitsAt = (a: Float64Array, i: number) => Buffer.from(a.buffer, a.byteOffset + i * 8, 8).toString("hex");

const req = (vm: string, value: number, t: number): WriteRequest => ({
  timeseries: [
    {
      labels: [
        { name: "__name__", value: "svc_vm_cpu_seconds_total" },
        { name: "vm", value: vm },
      ],
      samples: [{ value, timestampMs: t }],
    },
    {
      labels: [
        { name: "__name__", value: "up" },
        { name: "zone", value: "zürich" },
      ],
      samples: [
        { value: 1, timestampMs: t },
        { value: 2, timestampMs: t + 1 },
      ],
    },
    { labels: [], samples: [] },
  ],
});

describe("decodeWriteRequestCompact()", () => {
  it("puts samples in parallel arrays with per-series offsets and keeps labels as keys", () => {
    const c = decodeRemoteWriteBodyCompact(encodeRemoteWriteBody(req("a", 12.5, -5)));
    assert.equal(c.seriesCount, 3);
    assert.equal(c.sampleCount, 3);
    assert.deepEqual(Array.from(c.sampleStart.subarray(0, 4)), [0, 1, 3, 3]);
    assert.deepEqual(Array.from(c.timestampsMs.subarray(0, 3)), [-5, -5, -4]);
    assert.deepEqual(Array.from(c.values.subarray(0, 3)), [12.5, 1, 2]);
    assert.deepEqual(labelsOfKey(c.labelKeys[1]), [
      { name: "__name__", value: "up" },
      { name: "zone", value: "zürich" },
    ]);
    assert.deepEqual(labelsOfKey(c.labelKeys[2]), []);
  });

  it("gives equal label sets the same key across requests and different sets different keys", () => {
    const a = decodeWriteRequestCompact(encodeWriteRequest(req("a", 1, 1000)));
    const b = decodeWriteRequestCompact(encodeWriteRequest(req("a", 7, 31_000)));
    const other = decodeWriteRequestCompact(encodeWriteRequest(req("b", 1, 1000)));
    assert.equal(a.labelKeys[0], b.labelKeys[0]);
    assert.equal(a.labelKeys[1], b.labelKeys[1]);
    assert.notEqual(a.labelKeys[0], other.labelKeys[0]);
    assert.notEqual(a.labelKeys[0], a.labelKeys[1]);
  });

  it("keeps label fields interleaved with samples and unknown fields in the key, and only them", () => {
    // TimeSeries{label a=b, sample{1, 1000}, unknown field 9, label c=d}
    const bytes = hex(`
      0a 20
        0a 06 0a 01 61 12 01 62
        12 0c 09 000000000000f03f 10 e807
        48 05
        0a 06 0a 01 63 12 01 64`);
    const c = decodeWriteRequestCompact(bytes);
    assert.deepEqual(labelsOfKey(c.labelKeys[0]), [
      { name: "a", value: "b" },
      { name: "c", value: "d" },
    ]);
    assert.equal(c.labelKeys[0].length, 16);
    assert.equal(c.timestampsMs[0], 1000);
  });

  it("copies the staleness-marker NaN bit for bit", () => {
    const wire = hex("0a 15 0a 06 0a 01 61 12 01 62 12 0b 09 020000000000f07f 10 05");
    const c = decodeWriteRequestCompact(wire);
    assert.equal(bitsAt(c.values, 0), "020000000000f07f");
  });

  it("grows its arrays past the initial estimate", () => {
    const many: WriteRequest = {
      timeseries: [
        {
          labels: [{ name: "a", value: "b" }],
          samples: Array.from({ length: 5000 }, (_, k) => ({ value: k / 4, timestampMs: 0 })),
        },
      ],
    };
    const c = decodeWriteRequestCompact(encodeWriteRequest(many));
    assert.equal(c.sampleCount, 5000);
    assert.equal(c.values[4999], 4999 / 4);
    // Many empty series (2 bytes each) grow the per-series arrays.
    const empty = decodeWriteRequestCompact(new Uint8Array(4000).fill(0x0a).map((b, i) => (i % 2 ? 0 : b)));
    assert.equal(empty.seriesCount, 2000);
    assert.equal(empty.sampleStart[2000], 0);
    assert.equal(empty.labelHashes[1999], labelKeyHash(""));
  });

  it("validates labels in the one pass: bad UTF-8 and limits are refused up front", () => {
    assert.throws(() => decodeWriteRequestCompact(hex("0a 08 0a 06 0a 01 61 12 01 ff")), /not valid UTF-8/);
    assert.throws(
      () => decodeWriteRequestCompact(encodeWriteRequest(req("abcdef", 1, 1)), { maxLabelValueBytes: 5 }),
      (e: unknown) => e instanceof RemoteWriteDecodeError && e.limit === "maxLabelValueBytes",
    );
  });

  it("checks UTF-8 of interleaved and long labels too, and hashes keys as labelKeyHash does", () => {
    // label a=b, a sample, then label c=<0xff>: the key is made of two parts.
    const bad = hex("0a 14 0a 06 0a 01 61 12 01 62 12 02 10 05 0a 06 0a 01 63 12 01 ff");
    assert.throws(() => decodeWriteRequestCompact(bad), /label value is not valid UTF-8/);
    const long = "é".repeat(100); // 200 bytes: its length prefix has the high bit set
    const c = decodeWriteRequestCompact(
      encodeWriteRequest({ timeseries: [{ labels: [{ name: "l", value: long }], samples: [] }] }),
    );
    assert.deepEqual(labelsOfKey(c.labelKeys[0]), [{ name: "l", value: long }]);
    assert.equal(c.labelHashes[0], labelKeyHash(c.labelKeys[0]));
    const two = decodeWriteRequestCompact(encodeWriteRequest(req("a", 1, 1)));
    assert.equal(two.labelHashes[1], labelKeyHash(two.labelKeys[1]));
    assert.notEqual(two.labelHashes[0], two.labelHashes[1]);
  });

  it("hands out each key as bytes too, the same as its string, interleaved keys gathered", () => {
    // Series 0 sends label a=b, a sample, then label c=d (its key in two parts); series 1 is plain.
    const body = Buffer.concat([
      hex("0a 14 0a 06 0a 01 61 12 01 62 12 02 10 05 0a 06 0a 01 63 12 01 64"),
      Buffer.from(encodeWriteRequest(req("a", 1, 1))),
    ]);
    const c = decodeWriteRequestCompact(body);
    assert.equal(c.seriesCount, 4);
    for (let i = 0; i < c.seriesCount; i++) {
      const [s, e] = [c.labelKeyStart[i], c.labelKeyEnd[i]];
      assert.equal(Buffer.from(c.labelBytes.subarray(s, e)).toString("latin1"), c.labelKeys[i]);
      assert.deepEqual(labelsOfKeyBytes(c.labelBytes, s, e), labelsOfKey(c.labelKeys[i]));
      assert.equal(labelKeyBytesHash(c.labelBytes, s, e), c.labelHashes[i]);
    }
    assert.deepEqual(labelsOfKey(c.labelKeys[0]), [
      { name: "a", value: "b" },
      { name: "c", value: "d" },
    ]);
    // Without interleaving, the keys are ranges of the input itself: no copy.
    const plain = Buffer.from(encodeWriteRequest(req("a", 1, 1)));
    assert.equal(decodeWriteRequestCompact(plain).labelBytes.buffer, plain.buffer);
  });

  it("reads a negative metadata type as int32 (sign-extended varint)", () => {
    // metadata {type: -1}
    const c = decodeWriteRequestCompact(hex("1a 0b 08 ffffffffffffffffff01"));
    assert.equal(c.metadata[0].type, -1);
  });

  it("refuses a label key it did not make", () => {
    assert.throws(() => labelsOfKey("\x12\x00"), RemoteWriteDecodeError);
  });
});
