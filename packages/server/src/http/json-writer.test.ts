import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  create,
  type DescField,
  type DescFile,
  type DescMessage,
  type Message,
  ScalarType,
  toJsonString,
} from "@bufbuild/protobuf";
import {
  DescriptorProtoSchema,
  FeatureSetSchema,
  FileDescriptorSetSchema,
  file_google_protobuf_descriptor,
  file_google_protobuf_struct,
  file_google_protobuf_type,
} from "@bufbuild/protobuf/wkt";
import { file_google_rpc_error_details } from "@svc/sdk/gen/google/rpc/error_details_pb";
import { file_svc_admin_v1_admin } from "@svc/sdk/gen/svc/admin/v1/admin_pb";
import { file_svc_iam_v1_automation } from "@svc/sdk/gen/svc/iam/v1/automation_pb";
import { file_svc_iam_v1_key } from "@svc/sdk/gen/svc/iam/v1/key_pb";
import { file_svc_iam_v1_service_account } from "@svc/sdk/gen/svc/iam/v1/service_account_pb";
import { file_svc_iam_v1_session } from "@svc/sdk/gen/svc/iam/v1/session_pb";
import {
  file_svc_monitoring_v1_monitoring,
  QueryVMMonitoringResponseSchema,
} from "@svc/sdk/gen/svc/monitoring/v1/monitoring_pb";
import { compileJsonWriter, type JsonWriterOptions } from "./json-writer.ts";

const text = (b: Uint8Array) => new TextDecoder().decode(b);

/** A deterministic generator (mulberry32), so that a failure repeats. */
function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const STRINGS = [
  "",
  "a",
  'quote " and \\ backslash',
  "line\nbreak\ttab\u0000nul",
  "é ü 日本 😀",
  "\ud800 lone",
  "__proto__",
  "1",
  "10",
  "</script>",
];
const DOUBLES = [
  0,
  -0,
  1,
  -1.5,
  0.1,
  1e21,
  1e-7,
  5e-324,
  Number.MAX_VALUE,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
  123456.789,
];
const INT64 = [0n, 1n, -1n, 9007199254740993n, -9223372036854775808n, 9223372036854775807n];

/** A message of `desc` with every kind of field set, left empty or left unset at random. */
function randomMessage(desc: DescMessage, r: () => number, depth = 0): Message {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
  const scalar = (f: DescField & { scalar: ScalarType }): unknown => {
    switch (f.scalar) {
      case ScalarType.STRING:
        return pick(STRINGS);
      case ScalarType.BOOL:
        return r() < 0.5;
      case ScalarType.DOUBLE:
        return pick(DOUBLES);
      case ScalarType.FLOAT:
        return Math.fround(pick(DOUBLES));
      case ScalarType.BYTES:
        return new Uint8Array(Math.floor(r() * 5)).map(() => Math.floor(r() * 256));
      case ScalarType.INT64:
      case ScalarType.SINT64:
      case ScalarType.SFIXED64:
        return pick(INT64);
      case ScalarType.UINT64:
      case ScalarType.FIXED64:
        return pick(INT64.filter((x) => x >= 0n));
      case ScalarType.UINT32:
      case ScalarType.FIXED32:
        return pick([0, 1, 4294967295]);
      default:
        return pick([0, 1, -1, 2147483647, -2147483648]);
    }
  };
  const value = (f: DescField, kind: string): unknown => {
    if (kind === "message") {
      const m = (f as { message: DescMessage }).message;
      return randomMessage(m, r, depth + 1);
    }
    if (kind === "enum") {
      const e = (f as { enum: { values: { number: number }[] } }).enum;
      return r() < 0.1 ? 99 : pick(e.values).number;
    }
    return scalar(f as DescField & { scalar: ScalarType });
  };
  const init: Record<string, unknown> = {};
  for (const f of desc.fields) {
    if (r() < 0.2) continue; // unset: the zero value, or absent for explicit presence
    const deep = depth > 3;
    switch (f.fieldKind) {
      case "list":
        if (deep && f.listKind === "message") break;
        init[f.localName] = Array.from({ length: Math.floor(r() * 4) }, () => value(f, f.listKind));
        break;
      case "map": {
        if (deep && f.mapKind === "message") break;
        const o: Record<string, unknown> = {};
        const n = Math.floor(r() * 4);
        for (let i = 0; i < n; i++)
          o[f.mapKey === ScalarType.STRING ? pick(STRINGS) : String(i)] = value(f, f.mapKind);
        init[f.localName] = o;
        break;
      }
      default:
        if (f.oneof) {
          if (r() < 0.5 && !(deep && f.fieldKind === "message"))
            init[f.oneof.localName] = { case: f.localName, value: value(f, f.fieldKind) };
          break;
        }
        if (deep && f.fieldKind === "message") break;
        init[f.localName] = value(f, f.fieldKind);
    }
  }
  return create(desc, init as never);
}

function allMessages(files: DescFile[]): DescMessage[] {
  const out: DescMessage[] = [];
  const walk = (m: DescMessage) => {
    out.push(m);
    m.nestedMessages.forEach(walk);
  };
  for (const f of files) f.messages.forEach(walk);
  return out;
}

const OPTIONS: JsonWriterOptions[] = [
  {},
  { alwaysEmitImplicit: true },
  { useProtoFieldName: true, enumAsInteger: true },
];

describe("compileJsonWriter()", () => {
  const svcFiles = [
    file_svc_monitoring_v1_monitoring,
    file_svc_iam_v1_automation,
    file_svc_iam_v1_session,
    file_svc_iam_v1_key,
    file_svc_iam_v1_service_account,
    file_svc_admin_v1_admin,
    file_google_rpc_error_details,
  ];
  // descriptor.proto and type.proto bring what svc's contract barely uses: proto2 presence and
  // required fields, enums, bytes, recursion, and fields of well-known types (Any, Struct).
  const otherFiles = [
    file_google_protobuf_descriptor,
    file_google_protobuf_type,
    file_google_protobuf_struct,
  ];

  it("writes what protobuf-es's toJsonString writes, for every message of the contract and of descriptor.proto", () => {
    const r = rng(42);
    let compared = 0;
    for (const desc of allMessages([...svcFiles, ...otherFiles])) {
      for (const options of OPTIONS) {
        const write = compileJsonWriter(desc, options);
        for (let i = 0; i < 40; i++) {
          const m = randomMessage(desc, r);
          let expected: string;
          try {
            expected = toJsonString(desc, m, options);
          } catch (err) {
            // protobuf-es refuses it (a required field left unset): so must the writer.
            assert.throws(() => write(m), `${desc.typeName}: ${(err as Error).message}`);
            continue;
          }
          assert.equal(text(write(m)), expected, `${desc.typeName} ${JSON.stringify(options)}`);
          compared++;
        }
      }
    }
    assert.ok(compared > 5000, `only ${compared} messages compared`);
  });

  it("writes a 7-day answer with absent steps exactly as protobuf-es does", () => {
    const points = [];
    for (let i = 0; i < 337; i++)
      if (i % 7 !== 3) points.push({ timeUnix: BigInt(1_700_000_000 + i * 1800), value: i / 3 });
    const m = create(QueryVMMonitoringResponseSchema, {
      startTimeUnix: 1_700_000_000n,
      endTimeUnix: 1_700_604_800n,
      stepSeconds: 1800,
      series: [
        {
          metricId: "cpu_utilization",
          unit: "percent",
          labels: { device: "vda" },
          source: "HYPERVISOR",
          points,
        },
      ],
      quality: { series: [{ metricId: "cpu_utilization", gaps: [{ startTimeUnix: 1n, endTimeUnix: 2n }] }] },
    });
    const o = { alwaysEmitImplicit: true };
    assert.equal(
      text(compileJsonWriter(QueryVMMonitoringResponseSchema, o)(m)),
      toJsonString(QueryVMMonitoringResponseSchema, m, o),
    );
  });

  it("refuses a message of another type, a wrong value type and a registry", () => {
    const write = compileJsonWriter(FeatureSetSchema);
    assert.throws(() => write(create(DescriptorProtoSchema)), /cannot write google.protobuf.DescriptorProto/);
    const bad = create(DescriptorProtoSchema, { name: "x" });
    (bad as unknown as { name: unknown }).name = 3;
    assert.throws(
      () => compileJsonWriter(DescriptorProtoSchema)(bad),
      /cannot encode field google.protobuf.DescriptorProto.name/,
    );
    assert.throws(
      () => compileJsonWriter(FileDescriptorSetSchema, { registry: {} } as JsonWriterOptions),
      /registry/,
    );
  });
});
