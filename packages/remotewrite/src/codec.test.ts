import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  decodeRemoteWriteBody,
  decodeWriteRequest,
  encodeLabelFields,
  encodeRemoteWriteBody,
  encodeSeriesColumns,
  encodeWriteRequest,
  MetricType,
  RemoteWriteDecodeError,
  type Sample,
  snappyCompress,
  snappyDecompress,
  snappyImplementation,
  type TimeSeries,
  type WriteRequest,
} from "./index.ts";
import { snappyCompressJs, snappyDecompressJs } from "./snappy.ts";

const hex = (s: string) => Uint8Array.from(Buffer.from(s.replace(/\s+/g, ""), "hex"));
// Through a typed-array store, not `new Float64Array([v])`: V8 quiets NaNs kept in plain double arrays.
const bitsOf = (v: number) => {
  const f = new Float64Array(1);
  f[0] = v;
  return Buffer.from(f.buffer).toString("hex");
};

/** Prometheus' StaleNaN, 0x7ff0000000000002, built from bytes so no arithmetic touches it. */
function staleNaN(): number {
  return new Float64Array(hex("0200000000 00f07f".replace(" ", "")).buffer)[0];
}

const sampleRequest: WriteRequest = {
  timeseries: [
    {
      labels: [
        { name: "__name__", value: "svc_vm_cpu_seconds_total" },
        { name: "vm", value: "projects/p1/vms/web-1" },
        { name: "zone", value: "zürich-ß" },
      ],
      samples: [
        { value: 12.5, timestampMs: 1_700_000_000_000 },
        { value: 0, timestampMs: 1_700_000_030_000 },
        { value: -0.25, timestampMs: 1_700_000_060_000 },
        { value: Number.POSITIVE_INFINITY, timestampMs: -1 },
      ],
    },
    { labels: [{ name: "__name__", value: "up" }], samples: [] },
  ],
  metadata: [
    { type: MetricType.COUNTER, metricFamilyName: "svc_vm_cpu_seconds_total", help: "CPU s", unit: "" },
  ],
};

describe("encodeWriteRequest() / decodeWriteRequest()", () => {
  it("round-trips series, samples (incl. negative timestamps, non-ASCII labels) and metadata", () => {
    assert.deepEqual(decodeWriteRequest(encodeWriteRequest(sampleRequest)), sampleRequest);
    assert.deepEqual(decodeRemoteWriteBody(encodeRemoteWriteBody(sampleRequest)), sampleRequest);
  });

  it("matches a hand-made byte fixture, both ways", () => {
    // WriteRequest{timeseries:[{labels:[__name__="up"], samples:[{value:1, timestamp:1000}]}]}
    const fixture = hex(`
      0a 1e
        0a 0e 0a 08 5f5f6e616d655f5f 12 02 7570
        12 0c 09 000000000000f03f 10 e807`);
    const req: WriteRequest = {
      timeseries: [
        { labels: [{ name: "__name__", value: "up" }], samples: [{ value: 1, timestampMs: 1000 }] },
      ],
    };
    assert.deepEqual(encodeWriteRequest(req), fixture);
    assert.deepEqual(decodeWriteRequest(fixture), req);
  });

  it("skips unknown fields at every level (exemplars, histograms, future fields)", () => {
    const withUnknown = hex(`
      78 01
      0a 2d
        22 02 0a 00
        0a 14 0a 08 5f5f6e616d655f5f 12 02 7570 18 05 2a 02 0102
        12 11 09 000000000000f03f 10 e807 1d 00000000
      1a 0a 08 01 12 02 7570 30 07 3a 00`);
    assert.deepEqual(decodeWriteRequest(withUnknown), {
      timeseries: [
        { labels: [{ name: "__name__", value: "up" }], samples: [{ value: 1, timestampMs: 1000 }] },
      ],
      metadata: [{ type: MetricType.COUNTER, metricFamilyName: "up", help: "", unit: "" }],
    });
  });

  it("keeps the staleness-marker NaN bit pattern through encode and decode", () => {
    const stale = staleNaN();
    assert.equal(bitsOf(stale), "020000000000f07f");
    const bytes = encodeWriteRequest({
      timeseries: [{ labels: [{ name: "a", value: "b" }], samples: [{ value: stale, timestampMs: 5 }] }],
    });
    assert.ok(Buffer.from(bytes).toString("hex").includes("09020000000000f07f"), "raw bits on the wire");
    const back = decodeRemoteWriteBody(snappyCompress(bytes)).timeseries[0].samples[0].value;
    assert.equal(bitsOf(back), "020000000000f07f");
    // An ordinary NaN stays distinct from the marker.
    const plain = decodeWriteRequest(
      encodeWriteRequest({ timeseries: [{ labels: [], samples: [{ value: Number.NaN, timestampMs: 1 }] }] }),
    ).timeseries[0].samples[0].value;
    assert.notEqual(bitsOf(plain), "020000000000f07f");
    assert.ok(Number.isNaN(plain));
  });

  it("refuses a timestamp that is not a safe integer when encoding", () => {
    assert.throws(
      () => encodeWriteRequest({ timeseries: [{ labels: [], samples: [{ value: 1, timestampMs: 1.5 }] }] }),
      RangeError,
    );
  });
});

describe("decode limits", () => {
  const many = (series: number, labels: number, samples: number): WriteRequest => ({
    timeseries: Array.from({ length: series }, (_, i) => ({
      labels: Array.from({ length: labels }, (_, j) => ({ name: `l${j}`, value: `v${i}` })),
      samples: Array.from({ length: samples }, (_, k) => ({ value: k, timestampMs: k * 1000 })),
    })),
  });
  const cases: {
    name: string;
    req: WriteRequest;
    limits: object;
    limit: string;
    actual: number;
    allowed: number;
  }[] = [
    {
      name: "series",
      req: many(11, 1, 1),
      limits: { maxSeries: 10 },
      limit: "maxSeries",
      actual: 11,
      allowed: 10,
    },
    {
      name: "labels per series",
      req: many(1, 5, 1),
      limits: { maxLabelsPerSeries: 4 },
      limit: "maxLabelsPerSeries",
      actual: 5,
      allowed: 4,
    },
    {
      name: "samples",
      req: many(3, 1, 4),
      limits: { maxSamples: 11 },
      limit: "maxSamples",
      actual: 12,
      allowed: 11,
    },
    {
      name: "label name bytes",
      req: { timeseries: [{ labels: [{ name: "x".repeat(9), value: "v" }], samples: [] }] },
      limits: { maxLabelNameBytes: 8 },
      limit: "maxLabelNameBytes",
      actual: 9,
      allowed: 8,
    },
    {
      name: "label value bytes (UTF-8 bytes, not characters)",
      req: { timeseries: [{ labels: [{ name: "n", value: "ü".repeat(5) }], samples: [] }] },
      limits: { maxLabelValueBytes: 9 },
      limit: "maxLabelValueBytes",
      actual: 10,
      allowed: 9,
    },
  ];
  for (const c of cases) {
    it(`refuses too many/too long ${c.name} with which limit, actual and allowed`, () => {
      const body = encodeRemoteWriteBody(c.req);
      assert.throws(
        () => decodeRemoteWriteBody(body, c.limits),
        (e: unknown) => {
          assert.ok(e instanceof RemoteWriteDecodeError);
          assert.equal(e.limit, c.limit);
          assert.equal(e.actual, c.actual);
          assert.equal(e.allowed, c.allowed);
          assert.ok(e.isLimit);
          assert.match(e.message, new RegExp(`${c.limit} exceeded \\(${c.actual} > ${c.allowed}\\)`));
          return true;
        },
      );
      // At exactly the limit the same body is accepted (bounds are inclusive).
      const exact = Object.fromEntries(Object.entries(c.limits).map(([k]) => [k, c.actual]));
      assert.doesNotThrow(() => decodeRemoteWriteBody(body, exact));
    });
  }

  it("refuses a body above maxCompressedBytes before decompressing", () => {
    const body = encodeRemoteWriteBody(many(5, 2, 5));
    assert.throws(
      () => decodeRemoteWriteBody(body, { maxCompressedBytes: body.length - 1 }),
      (e: unknown) => e instanceof RemoteWriteDecodeError && e.limit === "maxCompressedBytes",
    );
  });
});

/** Snappy block: preamble for `declared`, then `count` copies of 64 bytes at offset 1 after a 1-byte literal. */
function snappyBomb(declared: number, copies: number): Uint8Array {
  const pre: number[] = [];
  let v = declared;
  while (v > 0x7f) {
    pre.push((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  pre.push(v);
  const out = new Uint8Array(pre.length + 2 + copies * 3);
  out.set(pre, 0);
  let p = pre.length;
  out[p++] = 0x00; // literal, length 1
  out[p++] = 0x61;
  for (let i = 0; i < copies; i++) {
    out[p++] = (63 << 2) | 2; // copy, 2-byte offset, length 64
    out[p++] = 1;
    out[p++] = 0;
  }
  return out;
}

describe("snappyDecompress() on hostile bodies", () => {
  const thirtyMB = 30_000_000;

  it("refuses a body that declares 30 MB but carries a few bytes, without allocating 30 MB", () => {
    const body = snappyBomb(thirtyMB, 10);
    const before = process.memoryUsage().arrayBuffers;
    assert.throws(
      () => decodeRemoteWriteBody(body),
      (e: unknown) => e instanceof RemoteWriteDecodeError && /can produce at most/.test(e.message),
    );
    assert.ok(process.memoryUsage().arrayBuffers - before < 1_000_000);
  });

  it("refuses a body that declares 30 MB and would expand to it when the limit is lower", () => {
    const body = snappyBomb(1 + Math.ceil((thirtyMB - 1) / 64) * 64, Math.ceil((thirtyMB - 1) / 64));
    assert.ok(body.length < 1_500_000);
    const before = process.memoryUsage().arrayBuffers;
    assert.throws(
      () => decodeRemoteWriteBody(body, { maxDecompressedBytes: 16 * 1024 * 1024 }),
      (e: unknown) =>
        e instanceof RemoteWriteDecodeError &&
        e.limit === "maxDecompressedBytes" &&
        e.allowed === 16 * 1024 * 1024,
    );
    assert.ok(process.memoryUsage().arrayBuffers - before < 10_000_000);
  });

  // The same refusals from the native decoder (when it loaded) and the JavaScript one.
  for (const [name, decompress] of [
    ["snappyDecompress", snappyDecompress],
    ["snappyDecompressJs", snappyDecompressJs],
  ] as const) {
    describe(`${name}()`, () => {
      it("decodes a hand-made block (literal + copy)", () => {
        // "abcabcabca": literal "abc", then copy length 7 at offset 3.
        const block = hex("0a 08 616263 0d 03");
        assert.equal(Buffer.from(decompress(block, 100)).toString(), "abcabcabca");
      });

      it("refuses a stream that falls short of its declared length (truncated)", () => {
        const body = snappyBomb(thirtyMB, Math.ceil(thirtyMB / 64) - 1000);
        assert.throws(
          () => decompress(body, 32 * 1024 * 1024),
          (e: unknown) => e instanceof RemoteWriteDecodeError && /preamble declares/.test(e.message),
        );
      });

      it("refuses a stream that produces more than its declared length", () => {
        assert.throws(() => decompress(hex("09 08 616263 0d 03"), 100), /more than the declared 9 bytes/);
      });

      it("refuses copy offsets before the start of the output", () => {
        assert.throws(() => decompress(hex("08 0d 05"), 100), /copy offset out of range/);
      });
    });
  }
});

describe("encodeSeriesColumns()", () => {
  // Every varint length of a timestamp (0 omitted, negative = 10 bytes, up to 2^53 - 1) and the
  // values the encoder special-cases (+0 omitted, -0 kept, the staleness marker's payload).
  const times = [
    0,
    1,
    127,
    128,
    16_383,
    16_384,
    2 ** 21,
    2 ** 28,
    2 ** 31,
    2 ** 32,
    2 ** 35,
    1_764_000_000_123,
  ];
  times.push(2 ** 42, 2 ** 49, Number.MAX_SAFE_INTEGER, -1, -1_000);
  // A Float64Array: a plain array would quiet the marker's NaN.
  const vals = Float64Array.from([0, -0, 1.5, 0, Number.POSITIVE_INFINITY, -2.25, 1e300]);
  vals[3] = staleNaN();

  it("writes the bytes encodeWriteRequest writes for the same series", () => {
    const timestampsMs: number[] = [];
    const values = new Float64Array(times.length * vals.length);
    const series: TimeSeries[] = [];
    for (const [k, t] of times.entries()) {
      const samples: Sample[] = [];
      for (const v of vals) {
        values[timestampsMs.length] = v;
        timestampsMs.push(t);
        samples.push({ value: values[timestampsMs.length - 1], timestampMs: t });
      }
      series.push({
        labels: [
          { name: "__name__", value: `m${k}` },
          { name: "vm", value: "v" },
        ],
        samples,
      });
    }
    const columns = series.map((s, k) => ({
      labelFields: encodeLabelFields(s.labels),
      samples: s.samples.map((_, j) => k * vals.length + j),
    }));
    const got = encodeSeriesColumns(columns, timestampsMs, values);
    assert.deepEqual(Buffer.from(got), Buffer.from(encodeWriteRequest({ timeseries: series })));
    // Into a reused buffer (dirty from before): a view of it with the same bytes; too small, a new array.
    const scratch = new Uint8Array(got.length + 10).fill(0xee);
    const into = encodeSeriesColumns(columns, timestampsMs, values, scratch);
    assert.equal(into.buffer, scratch.buffer);
    assert.deepEqual(Buffer.from(into), Buffer.from(got));
    const small = new Uint8Array(got.length - 1);
    assert.notEqual(encodeSeriesColumns(columns, timestampsMs, values, small).buffer, small.buffer);
    const back = decodeWriteRequest(got);
    assert.equal(bitsOf(back.timeseries[0].samples[3].value), bitsOf(staleNaN()));
    assert.equal(back.timeseries[times.length - 1].samples[0].timestampMs, -1_000);
  });

  it("refuses a timestamp that is not a safe integer", () => {
    const columns = [{ labelFields: encodeLabelFields([{ name: "__name__", value: "m" }]), samples: [0] }];
    assert.throws(() => encodeSeriesColumns(columns, [2 ** 53], new Float64Array(1)), RangeError);
  });
});

describe("snappy native and JavaScript", () => {
  // Remote-write-like bytes: repeated label strings, varints and doubles.
  const bodies = [0, 1, 7, 64, 1000, 100_000].map((n) => {
    const b = Buffer.alloc(n);
    for (let i = 0; i < n; i++)
      b[i] = i % 97 < 60 ? "svc_vm_cpu_seconds_total"[i % 24].charCodeAt(0) : (i * 31) & 0xff;
    return b;
  });

  it("each decompresses what the other compressed, from a view into a larger buffer too", () => {
    for (const raw of bodies) {
      for (const c of [snappyCompress(raw), snappyCompressJs(raw)]) {
        const inner = Buffer.concat([Buffer.from("xx"), c, Buffer.from("yy")]).subarray(2, 2 + c.length);
        for (const out of [snappyDecompress(inner, raw.length), snappyDecompressJs(inner, raw.length)]) {
          assert.ok(Buffer.from(out).equals(raw), `${raw.length} bytes`);
        }
      }
    }
  });

  it("is native on linux x64 with glibc (the lock carries the prebuilt binary)", (t) => {
    const glibc = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)
      ?.header?.glibcVersionRuntime;
    if (process.platform !== "linux" || process.arch !== "x64" || !glibc) return t.skip("other platform");
    assert.equal(snappyImplementation(), "native");
  });
});

describe("garbage and truncated input", () => {
  const body = encodeRemoteWriteBody(sampleRequest);
  const raw = encodeWriteRequest(sampleRequest);

  it("every truncated prefix of a body fails with RemoteWriteDecodeError", () => {
    for (let n = 0; n < body.length; n++) {
      assert.throws(() => decodeRemoteWriteBody(body.subarray(0, n)), RemoteWriteDecodeError, `prefix ${n}`);
    }
  });

  it("every truncated protobuf prefix decodes or fails with RemoteWriteDecodeError", () => {
    for (let n = 0; n < raw.length; n++) {
      try {
        decodeWriteRequest(raw.subarray(0, n));
      } catch (e) {
        assert.ok(e instanceof RemoteWriteDecodeError, `prefix ${n}: ${e}`);
      }
    }
  });

  it("random bytes and bit flips never escape as anything but RemoteWriteDecodeError", () => {
    let seed = 42;
    const rnd = () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed;
    };
    for (let i = 0; i < 3000; i++) {
      let input: Uint8Array;
      if (i % 2 === 0) {
        input = Uint8Array.from({ length: rnd() % 200 }, () => rnd() & 0xff);
      } else {
        input = raw.slice();
        for (let k = 0; k < 1 + (rnd() % 4); k++) input[rnd() % input.length] ^= 1 << (rnd() % 8);
      }
      for (const f of [decodeWriteRequest, decodeRemoteWriteBody]) {
        try {
          f(input);
        } catch (e) {
          assert.ok(e instanceof RemoteWriteDecodeError, `case ${i}: ${(e as Error).stack}`);
        }
      }
    }
  });

  it("refuses invalid UTF-8 in a label", () => {
    const bad = hex("0a 08 0a 06 0a 01 61 12 01 ff");
    assert.throws(() => decodeWriteRequest(bad), /not valid UTF-8/);
  });
});
