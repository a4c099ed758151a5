/**
 * Protobuf JSON written straight into bytes, compiled once per message type.
 *
 * protobuf-es's `toJsonString` first builds a tree of plain objects (one per message, per list item,
 * per map), `JSON.stringify` walks it into a string, and Connect encodes that string to UTF-8. For a
 * 7-day QueryVMMonitoring answer (~2,000 points) that was ~18% of the server's CPU per request and a
 * good part of its young-generation garbage. Building the text by string concatenation instead was
 * barely faster and made more garbage (a rope node per piece), so this writer appends bytes to one
 * buffer: constant pieces are pre-encoded, numbers are formatted by JavaScript and copied, strings
 * are copied as they are when they need no escaping and go through `JSON.stringify` otherwise.
 *
 * The output is byte for byte the UTF-8 of `toJsonString(schema, message, options)` for the same
 * options (json-writer.test.ts checks it on every message of svc's contract and of descriptor.proto):
 * field order by number, names, presence rules, int64 as decimal strings, NaN/Infinity as strings,
 * map keys in the order `JSON.stringify` gives. Well-known types with a JSON form of their own
 * (Timestamp, Struct, Any…) are written by protobuf-es, for that sub-message only; a registry
 * (extensions) is refused.
 */
import {
  type DescEnum,
  type DescField,
  type DescMessage,
  type JsonWriteOptions,
  type Message,
  ScalarType,
  toJson,
} from "@bufbuild/protobuf";
import { base64Encode } from "@bufbuild/protobuf/wire";

/** Writes a message as JSON; the bytes are the caller's (a fresh buffer per call). */
export type JsonWriter = (message: Message) => Uint8Array;

/** The options this writer honours. */
export type JsonWriterOptions = Pick<
  Partial<JsonWriteOptions>,
  "alwaysEmitImplicit" | "enumAsInteger" | "useProtoFieldName"
>;

/** A growable output buffer. */
class Sink {
  buf: Uint8Array;
  n = 0;
  constructor(size: number) {
    this.buf = new Uint8Array(size);
  }
  reserve(k: number): void {
    if (this.n + k <= this.buf.length) return;
    const next = new Uint8Array(Math.max(this.buf.length * 2, this.n + k));
    next.set(this.buf.subarray(0, this.n));
    this.buf = next;
  }
  /** Pre-encoded bytes (short: a loop beats TypedArray.set's call overhead). */
  bytes(b: Uint8Array): void {
    this.reserve(b.length);
    const buf = this.buf;
    let n = this.n;
    for (let i = 0; i < b.length; i++) buf[n++] = b[i];
    this.n = n;
  }
  byte(c: number): void {
    this.reserve(1);
    this.buf[this.n++] = c;
  }
  /** A string known to be ASCII (formatted numbers, base64, escaped JSON of ASCII). */
  ascii(s: string): void {
    this.reserve(s.length);
    const buf = this.buf;
    let n = this.n;
    for (let i = 0; i < s.length; i++) buf[n++] = s.charCodeAt(i);
    this.n = n;
  }
  /** A JSON string literal of `s`, escaped exactly as JSON.stringify escapes it. */
  string(s: string): void {
    const len = s.length;
    this.reserve(len + 2);
    const buf = this.buf;
    let n = this.n;
    buf[n++] = 0x22;
    for (let i = 0; i < len; i++) {
      const c = s.charCodeAt(i);
      // Printable ASCII other than `"` and `\` is copied; anything else takes the general path.
      if (c < 0x20 || c > 0x7e || c === 0x22 || c === 0x5c) return this.utf8(JSON.stringify(s));
      buf[n++] = c;
    }
    buf[n++] = 0x22;
    this.n = n;
  }
  utf8(s: string): void {
    // At most 3 bytes per UTF-16 unit.
    this.reserve(s.length * 3);
    this.n += encoder.encodeInto(s, this.buf.subarray(this.n)).written;
  }
  take(): Uint8Array {
    return this.buf.subarray(0, this.n);
  }
}

const encoder = new TextEncoder();
const enc = (s: string) => encoder.encode(s);

type Write = (sink: Sink, value: unknown) => void;
/** Writes `"key":value` (after a comma unless first) or nothing; returns whether it wrote. */
type FieldWrite = (sink: Sink, message: Record<string, unknown>, first: boolean) => boolean;

interface Compiled {
  write: Write;
}

const compiledByOptions = new WeakMap<JsonWriterOptions, WeakMap<DescMessage, Compiled>>();

/** The compiled writer of `schema` for these options (cached per options object and schema). */
export function compileJsonWriter(schema: DescMessage, options: JsonWriterOptions = {}): JsonWriter {
  if ((options as Partial<JsonWriteOptions>).registry !== undefined)
    throw new Error("compileJsonWriter: extensions (a registry) are not supported");
  let cache = compiledByOptions.get(options);
  if (cache === undefined) {
    cache = new WeakMap();
    compiledByOptions.set(options, cache);
  }
  const o: Required<JsonWriterOptions> = {
    alwaysEmitImplicit: options.alwaysEmitImplicit ?? false,
    enumAsInteger: options.enumAsInteger ?? false,
    useProtoFieldName: options.useProtoFieldName ?? false,
  };
  const compiled = messageWriter(schema, o, cache);
  // Start at the size of the last answer, so that a steady stream of similar answers never regrows.
  let lastSize = 256;
  return (message) => {
    const sink = new Sink(lastSize + 64);
    compiled.write(sink, message);
    lastSize = sink.n;
    return sink.take();
  };
}

const OWN_JSON_FORM: ReadonlySet<string> = new Set(
  [
    "Any",
    "Timestamp",
    "Duration",
    "FieldMask",
    "Struct",
    "Value",
    "ListValue",
    "DoubleValue",
    "FloatValue",
    "Int64Value",
    "UInt64Value",
    "Int32Value",
    "UInt32Value",
    "BoolValue",
    "StringValue",
    "BytesValue",
  ].map((name) => `google.protobuf.${name}`),
);

function messageWriter(
  desc: DescMessage,
  o: Required<JsonWriterOptions>,
  cache: WeakMap<DescMessage, Compiled>,
): Compiled {
  const cached = cache.get(desc);
  if (cached !== undefined) return cached;
  if (OWN_JSON_FORM.has(desc.typeName)) {
    const wkt: Compiled = { write: (sink, m) => sink.utf8(JSON.stringify(toJson(desc, m as Message, o))) };
    cache.set(desc, wkt);
    return wkt;
  }
  const fields: FieldWrite[] = [];
  const compiled: Compiled = {
    write(sink, value) {
      const m = value as Record<string, unknown>;
      if (m.$typeName !== desc.typeName) throw new Error(`cannot write ${m.$typeName} as ${desc.typeName}`);
      sink.byte(0x7b);
      let first = true;
      for (let i = 0; i < fields.length; i++) if (fields[i](sink, m, first)) first = false;
      sink.byte(0x7d);
    },
  };
  // Registered before the fields compile, so that a recursive type finds itself.
  cache.set(desc, compiled);
  for (const f of [...desc.fields].sort((a, b) => a.number - b.number)) fields.push(fieldWriter(f, o, cache));
  return compiled;
}

function fieldWriter(
  f: DescField,
  o: Required<JsonWriterOptions>,
  cache: WeakMap<DescMessage, Compiled>,
): FieldWrite {
  const key = JSON.stringify(o.useProtoFieldName ? f.name : f.jsonName);
  const head = enc(`${key}:`);
  const next = enc(`,${key}:`);
  const local = f.localName;
  switch (f.fieldKind) {
    case "list": {
      const item = valueWriter(f, f.listKind, o, cache);
      return (sink, m, first) => {
        const list = m[local] as ArrayLike<unknown>;
        if (list.length === 0 && !o.alwaysEmitImplicit) return false;
        sink.bytes(first ? head : next);
        sink.byte(0x5b);
        for (let i = 0; i < list.length; i++) {
          if (i > 0) sink.byte(0x2c);
          item(sink, list[i]);
        }
        sink.byte(0x5d);
        return true;
      };
    }
    case "map": {
      const item = valueWriter(f, f.mapKind, o, cache);
      return (sink, m, first) => {
        const record = m[local] as Record<string, unknown>;
        const keys = Object.keys(record);
        if (keys.length === 0 && !o.alwaysEmitImplicit) return false;
        sink.bytes(first ? head : next);
        sink.byte(0x7b);
        for (let i = 0; i < keys.length; i++) {
          if (i > 0) sink.byte(0x2c);
          sink.string(keys[i]);
          sink.byte(0x3a);
          item(sink, record[keys[i]]);
        }
        sink.byte(0x7d);
        return true;
      };
    }
  }
  const write = valueWriter(f, f.fieldKind, o, cache);
  const emit = (sink: Sink, first: boolean, v: unknown) => {
    sink.bytes(first ? head : next);
    write(sink, v);
    return true;
  };
  if (f.oneof !== undefined) {
    const group = f.oneof.localName;
    return (sink, m, first) => {
      const c = m[group] as { case: string | undefined; value?: unknown };
      return c.case === local && emit(sink, first, c.value);
    };
  }
  if (f.presence !== IMPLICIT) {
    const required = f.presence === LEGACY_REQUIRED;
    return (sink, m, first) => {
      const v = m[local];
      // Explicit presence: proto2 defaults live on the prototype, so only an own value counts.
      if (v !== undefined && Object.hasOwn(m, local)) return emit(sink, first, v);
      if (required) throw new Error(`cannot encode ${f} to JSON: required field not set`);
      return false;
    };
  }
  if (o.alwaysEmitImplicit) return (sink, m, first) => emit(sink, first, m[local]);
  const isZero = zeroTest(f);
  return (sink, m, first) => {
    const v = m[local];
    return !isZero(v) && emit(sink, first, v);
  };
}

// FeatureSet_FieldPresence of descriptor.proto, as protobuf-es's reflection reports it.
const LEGACY_REQUIRED = 3;
const IMPLICIT = 2;

/** The zero value test of an implicit-presence field, as protobuf-es's writer applies it. */
function zeroTest(f: DescField & { fieldKind: "scalar" | "enum" | "message" }): (v: unknown) => boolean {
  if (f.fieldKind === "enum") {
    const zero = f.enum.values[0].number;
    return (v) => v === zero;
  }
  if (f.fieldKind === "message") return (v) => v === undefined;
  switch (f.scalar) {
    case ScalarType.BOOL:
      return (v) => v === false;
    case ScalarType.STRING:
      return (v) => v === "";
    case ScalarType.BYTES:
      return (v) => v instanceof Uint8Array && v.byteLength === 0;
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      // -0 is not the zero value: it is written.
      return (v) => Object.is(v, 0);
    default:
      // 0, 0n and "0" (an int64 may be held as a string).
      // biome-ignore lint/suspicious/noDoubleEquals: the loose comparison is the point
      return (v) => v == 0;
  }
}

const TRUE = enc("true");
const FALSE = enc("false");
const NULL = enc("null");

function valueWriter(
  f: DescField,
  kind: "scalar" | "enum" | "message",
  o: Required<JsonWriterOptions>,
  cache: WeakMap<DescMessage, Compiled>,
): Write {
  if (kind === "message") {
    const desc = (f as { message: DescMessage }).message;
    let compiled: Compiled | undefined;
    // Resolved on first use: the field's type may be the one being compiled.
    return (sink, v) => {
      compiled ??= messageWriter(desc, o, cache);
      compiled.write(sink, v);
    };
  }
  const bad = (v: unknown): never => {
    throw new Error(`cannot encode ${f} to JSON: unexpected ${typeof v}`);
  };
  if (kind === "enum") {
    const desc = (f as { enum: DescEnum }).enum;
    const names = new Map(desc.values.map((v) => [v.number, enc(JSON.stringify(v.jsonName))]));
    const isNull = desc.typeName === "google.protobuf.NullValue";
    return (sink, v) => {
      if (typeof v !== "number") return bad(v);
      const name = o.enumAsInteger ? undefined : names.get(v);
      if (isNull) sink.bytes(NULL);
      else if (name !== undefined) sink.bytes(name);
      else sink.ascii(`${v}`);
    };
  }
  switch ((f as { scalar: ScalarType }).scalar) {
    case ScalarType.INT32:
    case ScalarType.SFIXED32:
    case ScalarType.SINT32:
    case ScalarType.FIXED32:
    case ScalarType.UINT32:
      // JSON.stringify's form: a NaN that slipped in is null, as protobuf-es would write it.
      return (sink, v) => (typeof v === "number" ? sink.ascii(JSON.stringify(v)) : bad(v));
    case ScalarType.FLOAT:
    case ScalarType.DOUBLE:
      return (sink, v) => {
        if (typeof v !== "number") return bad(v);
        sink.ascii(
          Number.isFinite(v) ? `${v}` : Number.isNaN(v) ? '"NaN"' : v > 0 ? '"Infinity"' : '"-Infinity"',
        );
      };
    case ScalarType.STRING:
      return (sink, v) => (typeof v === "string" ? sink.string(v) : bad(v));
    case ScalarType.BOOL:
      return (sink, v) => (typeof v === "boolean" ? sink.bytes(v ? TRUE : FALSE) : bad(v));
    case ScalarType.BYTES:
      return (sink, v) => (v instanceof Uint8Array ? sink.ascii(`"${base64Encode(v)}"`) : bad(v));
    default:
      // 64-bit integers: decimal strings.
      return (sink, v) => {
        if (typeof v === "bigint" || (typeof v === "number" && Number.isInteger(v))) sink.ascii(`"${v}"`);
        else if (typeof v === "string") sink.string(v);
        else bad(v);
      };
  }
}
