import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, it } from "node:test";
import { gunzipSync, gzipSync } from "node:zlib";
import { create, type DescMessage, fromBinary, type MessageShape, toBinary } from "@bufbuild/protobuf";
import { OTLPMetricExporter } from "@opentelemetry/exporter-metrics-otlp-proto";
import { HostMetrics } from "@opentelemetry/host-metrics";
import { AggregationTemporality, MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
import { guestReadings, otlpBody } from "../../../../../bench/ingest/guest.ts";
import { referenceOtlpParts } from "../../../testing/otlp-reference.ts";
import { seededRandom } from "../../../testing/seeded-random.ts";
import { newMapResult } from "../guest-map.ts";
import { ExportMetricsServiceRequestSchema } from "./gen/opentelemetry/proto/collector/metrics/v1/metrics_service_pb.ts";
import {
  type AnyValue,
  AnyValueSchema,
  ArrayValueSchema,
  type KeyValue,
  KeyValueSchema,
} from "./gen/opentelemetry/proto/common/v1/common_pb.ts";
import {
  type AggregationTemporality as AggregationTemporalityPb,
  ExemplarSchema,
  GaugeSchema,
  type Metric,
  MetricSchema,
  type NumberDataPoint,
  NumberDataPointSchema,
  type ScopeMetrics,
  ScopeMetricsSchema,
} from "./gen/opentelemetry/proto/metrics/v1/metrics_pb.ts";
import { decodeOtlp, metricsOfMessage, OtlpBodyError, otlpParts } from "./otlp.ts";
import { ATTR_KEYS, decodeMetricsRequest, OtlpWireError } from "./wire.ts";

/**
 * wire.ts against protobuf-es: on the OpenTelemetry JS SDK's own exports, the bench's hostmetrics
 * bodies and seeded random messages (unknown fields of every wire type, merged repeats), the mapped
 * result is the old path's (fromBinary + the mapping over its message, testing/otlp-reference.ts);
 * damaged bodies are refused with the documented 400 and nothing else.
 */

/** The mapping of `bytes` both ways; equal when the decoders agree. */
function mapBoth(bytes: Uint8Array) {
  const oldOut = newMapResult();
  const old = referenceOtlpParts(fromBinary(ExportMetricsServiceRequestSchema, bytes), oldOut);
  const newOut = newMapResult();
  const fresh = otlpParts(decodeMetricsRequest(bytes), newOut);
  return { old: { ...old, out: oldOut }, fresh: { ...fresh, out: newOut } };
}

function assertSameMapping(bytes: Uint8Array, what: string): void {
  const { old, fresh } = mapBoth(bytes);
  assert.deepStrictEqual(fresh, old, what);
  // The JSON path's adapter over protobuf-es' message maps alike too.
  const viaMessage = newMapResult();
  const m = otlpParts(metricsOfMessage(fromBinary(ExportMetricsServiceRequestSchema, bytes)), viaMessage);
  assert.deepStrictEqual({ ...m, out: viaMessage }, old, `${what} (metricsOfMessage)`);
}

/** Collects on demand. */
class OnDemandReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

/** What the SDK's protobuf exporter POSTs for one collection of host metrics (+ fs and disk instruments). */
async function sdkBodies(): Promise<Buffer[]> {
  const bodies: Buffer[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      bodies.push(Buffer.concat(chunks));
      res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/metrics`;
  try {
    for (const temporality of [AggregationTemporality.CUMULATIVE, AggregationTemporality.DELTA]) {
      const reader = new OnDemandReader({ aggregationTemporalitySelector: () => temporality });
      const provider = new MeterProvider({ readers: [reader] });
      new HostMetrics({ meterProvider: provider, name: "svc-wire-test" }).start();
      const meter = provider.getMeter("svc-test-host");
      meter.createObservableUpDownCounter("system.filesystem.usage", { unit: "By" }).addCallback((r) => {
        for (const [mountpoint, device, mode] of [
          ["/", "/dev/vda1", "rw"],
          ["/boot", "/dev/vda2", "ro"],
          ["/proc", "proc", "rw"],
        ] as const) {
          const base = {
            "system.device": device,
            "system.filesystem.mountpoint": mountpoint,
            "system.filesystem.type": device === "proc" ? "proc" : "ext4",
            "system.filesystem.mode": mode,
          };
          r.observe(1000, { ...base, "system.filesystem.state": "used" });
          r.observe(2000, { ...base, "system.filesystem.state": "free" });
        }
      });
      meter.createObservableCounter("system.disk.io", { unit: "By" }).addCallback((r) => {
        r.observe(512, { "system.device": "vda", "disk.io.direction": "read" });
        r.observe(1024.5, { "system.device": "loop0", "disk.io.direction": "write" });
        r.observe(7, { "system.device": "vdb", "disk.io.direction": "sideways" });
      });
      for (let i = 0; i < 2; i++) {
        const { resourceMetrics } = await reader.collect();
        const exporter = new OTLPMetricExporter({ url });
        const result = await new Promise<{ code: number; error?: Error }>((r) =>
          exporter.export(resourceMetrics, r),
        );
        assert.equal(result.code, 0, String(result.error));
        await exporter.shutdown();
      }
      await provider.shutdown();
    }
  } finally {
    server.close();
  }
  assert.equal(bodies.length, 4);
  return bodies;
}

function benchBodies(n: number): Buffer[] {
  const end = Math.floor(Date.now() / 30_000) * 30_000;
  return guestReadings(7, n, end).map((r) => Buffer.from(otlpBody(r)));
}

// --- Seeded random messages ---

const NAMES = [
  "system.cpu.time",
  "system.memory.usage",
  "system.memory.limit",
  "system.filesystem.usage",
  "system.disk.io",
  "system.disk.operations",
  "system.network.io",
  "system.network.packets",
  "system.cpu.utilization",
  "process.cpu.time",
  "",
  "systém.ünïcode",
];
const VALUES = [
  "user",
  "idle",
  "wait",
  "used",
  "free",
  "cached",
  "slab_reclaimable",
  "shared",
  "reserved",
  "/",
  "/data",
  "/proc",
  "/dev/vda1",
  "vda",
  "loop0",
  "eth0",
  "lo",
  "ifb0",
  "read",
  "write",
  "receive",
  "transmit",
  "ro",
  "rw",
  "ext4",
  "tmpfs",
  "",
  "x".repeat(300),
  "\u00e9t\u00e9",
  "\ufeffbom",
];

function generator(seed: number) {
  const r = seededRandom(seed);
  const int = (n: number) => Math.floor(r() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
  const u64 = (): bigint => (BigInt(int(2 ** 32)) << 32n) | BigInt(int(2 ** 32));
  /** Unknown fields of every wire type (a group nests another). */
  const unknown = () =>
    r() < 0.3
      ? [
          { no: 900 + int(50), wireType: 0, data: new Uint8Array([0xff, 0xff, 0x01]) },
          { no: 950, wireType: 1, data: new Uint8Array(8).fill(0xab) },
          { no: 951, wireType: 2, data: new Uint8Array([3, 1, 2, 3]) },
          { no: 952, wireType: 5, data: new Uint8Array(4).fill(0xcd) },
          // group 953 holding a varint field 1 and group 2 (empty), then its end tag.
          { no: 953, wireType: 3, data: new Uint8Array([0x08, 0x05, 0x13, 0x14, 0xcc, 0x3b]) },
        ].filter(() => r() < 0.6)
      : undefined;
  const anyValue = (): AnyValue => {
    const k = int(10);
    const v = create(AnyValueSchema);
    if (k < 4) v.value = { case: "stringValue", value: pick(VALUES) };
    else if (k === 4)
      v.value = {
        case: "intValue",
        value: pick([0n, 3n, -1n, 2n ** 53n + 1n, -(2n ** 63n), 2n ** 63n - 1n, BigInt.asIntN(64, u64())]),
      };
    else if (k === 5) v.value = { case: "doubleValue", value: pick([0.5, -0, 1e21, Number.NaN, 3]) };
    else if (k === 6) v.value = { case: "boolValue", value: r() < 0.5 };
    else if (k === 7)
      v.value = {
        case: "arrayValue",
        value: create(ArrayValueSchema, { values: [{ value: { case: "stringValue", value: "a" } }] }),
      };
    else if (k === 8) v.value = { case: "bytesValue", value: new Uint8Array([1, 2]) };
    else if (r() < 0.5) v.value = { case: "stringValueStrindex", value: 4 };
    const u = unknown();
    if (u) v.$unknown = u;
    return v;
  };
  const keyValue = (): KeyValue => {
    const kv = create(KeyValueSchema, {
      key: r() < 0.85 ? pick(ATTR_KEYS) : pick(["host.name", "", "cpu.modeX", "stat"]),
      value: r() < 0.95 ? anyValue() : undefined,
    });
    const u = unknown();
    if (u) kv.$unknown = u;
    return kv;
  };
  const point = (): NumberDataPoint => {
    const dp = create(NumberDataPointSchema, {
      attributes: Array.from({ length: int(6) }, keyValue),
      startTimeUnixNano: u64(),
      timeUnixNano: pick([
        0n,
        1_700_000_000_123_456_789n,
        BigInt(int(2 ** 53)),
        u64(),
        2n ** 64n - 1n,
        999_999n,
        1_000_000n,
      ]),
      flags: pick([0, 0, 0, 1, 3, 2 ** 32 - 1]),
    });
    const k = int(5);
    if (k < 2)
      dp.value = { case: "asDouble", value: pick([1.5, -0, Number.NaN, Number.POSITIVE_INFINITY, 1e300]) };
    else if (k < 4)
      dp.value = {
        case: "asInt",
        value: pick([0n, 7n, -5n, 2n ** 53n + 1n, 2n ** 63n - 1n, -(2n ** 63n), BigInt.asIntN(64, u64())]),
      };
    if (r() < 0.2)
      dp.exemplars = [
        create(ExemplarSchema, { value: { case: "asDouble", value: 1 }, traceId: new Uint8Array(16) }),
      ];
    const u = unknown();
    if (u) dp.$unknown = u;
    return dp;
  };
  const metric = (): Metric => {
    const points = () => Array.from({ length: int(5) }, point);
    const k = int(7);
    const m = create(MetricSchema, {
      name: pick(NAMES),
      description: "d",
      unit: "By",
      data:
        k < 2
          ? {
              case: "sum",
              value: {
                dataPoints: points(),
                aggregationTemporality: pick([0, 1, 2, 7]) as AggregationTemporalityPb,
                isMonotonic: r() < 0.5,
              },
            }
          : k < 4
            ? { case: "gauge", value: { dataPoints: points() } }
            : k === 4
              ? {
                  case: "histogram",
                  value: { dataPoints: [{ count: 1n, bucketCounts: [1n] }, {}], aggregationTemporality: 2 },
                }
              : k === 5
                ? { case: "summary", value: { dataPoints: [{ count: 2n }] } }
                : { case: undefined },
    });
    const u = unknown();
    if (u) m.$unknown = u;
    return m;
  };
  /** A field's bytes: its tag and length-prefixed payload. */
  const field = (no: number, payload: Uint8Array): Uint8Array => {
    const head: number[] = [];
    for (let v = no * 8 + 2; ; v >>>= 7) {
      if (v < 0x80) {
        head.push(v);
        break;
      }
      head.push((v & 0x7f) | 0x80);
    }
    for (let v = payload.length; ; v >>>= 7) {
      if (v < 0x80) {
        head.push(v);
        break;
      }
      head.push((v & 0x7f) | 0x80);
    }
    return Buffer.concat([Uint8Array.from(head), payload]);
  };
  /** Two encodings of one message type back to back: protobuf reads them as one, merged. */
  const merged = <D extends DescMessage>(schema: D, a: MessageShape<D>, b: MessageShape<D>) =>
    Buffer.concat([toBinary(schema, a), toBinary(schema, b)]);
  return (): Uint8Array => {
    const req = create(ExportMetricsServiceRequestSchema, {
      resourceMetrics: Array.from({ length: 1 + int(2) }, () => ({
        resource: {
          attributes: [{ key: "host.name", value: { value: { case: "stringValue" as const, value: "h" } } }],
        },
        schemaUrl: "https://opentelemetry.io/schemas/1.9.0",
        scopeMetrics: Array.from({ length: 1 + int(3) }, () => {
          const sm: ScopeMetrics = create(ScopeMetricsSchema, {
            scope: { name: "scope" },
            metrics: Array.from({ length: int(5) }, metric),
          });
          // Merged repeats, as extra `metrics` fields (written after the known ones).
          const extra: Uint8Array[] = [];
          if (r() < 0.4) extra.push(field(2, merged(MetricSchema, metric(), metric())));
          if (r() < 0.4) {
            const m = metric();
            m.data = { case: "gauge", value: create(GaugeSchema) };
            const dp = merged(NumberDataPointSchema, point(), point());
            const kv = merged(KeyValueSchema, keyValue(), keyValue());
            const dp2 = Buffer.concat([toBinary(NumberDataPointSchema, point()), field(7, kv)]);
            extra.push(
              field(
                2,
                Buffer.concat([
                  toBinary(MetricSchema, m),
                  field(5, Buffer.concat([field(1, dp), field(1, dp2)])),
                ]),
              ),
            );
          }
          if (extra.length > 0) {
            sm.$unknown = [
              ...(sm.$unknown ?? []),
              ...extra.map((e) => ({ no: 2, wireType: 2, data: e.subarray(1) })),
            ];
          }
          return sm;
        }),
      })),
    });
    const u = unknown();
    if (u) req.$unknown = u;
    return toBinary(ExportMetricsServiceRequestSchema, req);
  };
}

describe("OTLP protobuf decoder (wire.ts) against protobuf-es", () => {
  it("maps the OpenTelemetry JS SDK's exports (cumulative and delta) and the bench's bodies as the old path did", async () => {
    const bodies = [...(await sdkBodies()), ...benchBodies(5).map((b) => Buffer.from(gunzipped(b)))];
    for (const [i, b] of bodies.entries()) {
      const { fresh } = mapBoth(b);
      assert.ok(fresh.dataPoints > 0, `body ${i} has data points`);
      assertSameMapping(b, `body ${i}`);
    }
    // Through decodeOtlp, gzip'd as the exporter sends it, too.
    const out = newMapResult();
    const viaGzip = otlpParts(decodeOtlp(gzipSync(bodies[0]!), "protobuf", "gzip", 1 << 24), out);
    assert.deepStrictEqual({ ...viaGzip, out }, mapBoth(bodies[0]!).old);
  });

  it("maps 3000 seeded random messages (unknown fields of every wire type, merged repeats) as the old path did", () => {
    const next = generator(45);
    let points = 0;
    for (let i = 0; i < 3000; i++) {
      const bytes = next();
      assertSameMapping(bytes, `message ${i} (seed 45)`);
      points += mapBoth(bytes).fresh.dataPoints;
    }
    assert.ok(points > 10_000, `${points} data points`);
  });

  it("answers damaged bodies (seeded flips, truncations, insertions) with the documented 400 and nothing else", async () => {
    const r = seededRandom(4545);
    const real = [...(await sdkBodies()), ...benchBodies(3).map((b) => Buffer.from(gunzipped(b)))];
    const next = generator(99);
    const sources = [...real, ...Array.from({ length: 20 }, () => Buffer.from(next()))];
    let refused = 0;
    let agreedAccepted = 0;
    for (let i = 0; i < 20_000; i++) {
      const src = sources[i % sources.length]!;
      let b = Buffer.from(src);
      const k = Math.floor(r() * 4);
      if (k === 0) b = b.subarray(0, Math.floor(r() * b.length));
      else if (k === 3) {
        const at = Math.floor(r() * b.length);
        b = Buffer.concat([b.subarray(0, at), Buffer.from([Math.floor(r() * 256)]), b.subarray(at)]);
      } else {
        for (let f = 0; f < 1 + Math.floor(r() * 3); f++)
          b[Math.floor(r() * b.length)] = Math.floor(r() * 256);
      }
      let fresh: unknown;
      try {
        fresh = decodeOtlp(b, "protobuf", undefined, 1 << 24);
      } catch (err) {
        assert.ok(err instanceof OtlpBodyError, `damage ${i}: ${String(err)}`);
        assert.equal(err.status, 400);
        assert.match(err.message, /^not an OTLP ExportMetricsServiceRequest \(protobuf\): /);
        refused++;
        continue;
      }
      // Accepted: where protobuf-es accepts the bytes too, the mapping is the same.
      let oldOk = true;
      try {
        fromBinary(ExportMetricsServiceRequestSchema, b);
      } catch {
        oldOk = false;
      }
      if (oldOk) {
        assertSameMapping(b, `damage ${i}`);
        agreedAccepted++;
      }
      assert.ok(Array.isArray(fresh));
    }
    assert.ok(
      refused > 5000 && agreedAccepted > 500,
      `${refused} refused, ${agreedAccepted} accepted by both`,
    );
  });

  it("refuses each kind of malformed body naming it", () => {
    const cases: [string, number[], RegExp][] = [
      ["a truncated varint", [0x0a, 0xff, 0xff], /truncated varint/],
      ["a varint of 11 bytes", [0x10, ...Array(10).fill(0xff), 0x01], /longer than 10 bytes/],
      ["a length past the end", [0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01], /past the end/],
      ["a nested length past its message", [0x0a, 0x02, 0x12, 0x05, 0, 0, 0, 0, 0], /past the end/],
      ["resource_metrics as a varint", [0x08, 0x01], /ExportMetricsServiceRequest field 1 has wire type 0/],
      ["a time as a varint", point([0x18, 0x01]), /NumberDataPoint field 3 has wire type 0, not 1/],
      ["a truncated double", point([0x21, 0, 0, 0]), /truncated 64-bit value/],
      ["field number 0", [0x02, 0x00], /illegal tag: field 0/],
      ["wire type 6", [0x0e], /wire type 6/],
      ["an end-group without its start", [0x14], /without its start/],
      ["a group without its end", [0x1b, 0x08, 0x01], /without its end/],
      ["a group ended by another field", [0x1b, 0x24], /ended by field 4/],
      [
        "groups nested too deep",
        [...Array(101).fill(0x1b), ...Array(101).fill(0x1c)],
        /nested deeper than 100/,
      ],
      ["invalid UTF-8 in a metric name", metricName([0xc3, 0x28]), /invalid UTF-8/],
    ];
    for (const [what, bytes, why] of cases) {
      assert.throws(() => decodeMetricsRequest(Uint8Array.from(bytes)), OtlpWireError, what);
      assert.throws(
        () => decodeOtlp(Buffer.from(bytes), "protobuf", undefined, 1 << 24),
        (err: unknown) =>
          err instanceof OtlpBodyError &&
          err.status === 400 &&
          /^not an OTLP ExportMetricsServiceRequest \(protobuf\): /.test(err.message) &&
          why.test(err.message),
        what,
      );
    }
    // protobuf-es refuses the deep groups and the bad UTF-8 as well.
    assert.throws(() =>
      fromBinary(ExportMetricsServiceRequestSchema, Uint8Array.from(metricName([0xc3, 0x28]))),
    );
    // 100 nested groups are skipped; a metric name with a BOM keeps it, as protobuf-es does.
    decodeMetricsRequest(Uint8Array.from([...Array(100).fill(0x1b), ...Array(100).fill(0x1c)]));
    const bom = decodeMetricsRequest(Uint8Array.from(metricName([0xef, 0xbb, 0xbf, 0x61])));
    assert.equal(bom[0]?.name, "\ufeffa");
  });
});

/** A request with one metric whose gauge has one point with these field bytes. */
function point(fields: number[]): number[] {
  const dp = [0x0a, fields.length, ...fields];
  const gauge = [0x2a, dp.length, ...dp];
  return metric(gauge);
}

function metricName(name: number[]): number[] {
  return metric([0x0a, name.length, ...name]);
}

function metric(fields: number[]): number[] {
  const sm = [0x12, fields.length, ...fields];
  const rm = [0x12, sm.length, ...sm];
  return [0x0a, rm.length, ...rm];
}

function gunzipped(b: Uint8Array): Uint8Array {
  return gunzipSync(b);
}
