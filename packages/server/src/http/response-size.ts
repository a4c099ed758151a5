/**
 * Upper bounds of an RPC answer's encoded size, declared by the handler that builds it, so that the
 * response limit (server.ts) encodes an answer to measure it only when it could be over the limit.
 * Measuring by encoding cost a 7-day QueryVMMonitoring answer as much as Connect's own encoding of it.
 *
 * A bound covers both encodings a client may ask for: Connect's JSON with svc's options (every field
 * emitted) and binary, before compression. It is kept beside the message (a WeakMap), not in it, so the
 * message stays a plain protobuf-es message.
 */
const bounds = new WeakMap<object, number>();

/** Declares that `message` encodes to at most `bytes` bytes; returns the message. */
export function withSizeBound<T extends object>(message: T, bytes: number): T {
  bounds.set(message, bytes);
  return message;
}

/** The declared bound of `message`, or undefined when its handler declared none. */
export function sizeBoundOf(message: object): number | undefined {
  return bounds.get(message);
}

/**
 * The most one message's own fields and punctuation take, strings and nested messages aside: the
 * JSON keys (the longest of svc's messages is under 30 characters), an int64 as a quoted decimal
 * (22 characters with its sign), a double (24: -2.2250738585072014e-308), an int32 (11), a bool (5),
 * and in binary a tag and a length of at most 6 bytes per field. Generous by design: a bound only
 * has to be cheap and never too small.
 */
export const MESSAGE_BOUND_BYTES = 320;

/**
 * A string's most in JSON (quoted; a control character is escaped as \u00XX, 6 bytes, as is a lone
 * surrogate; any other UTF-16 unit is at most 3 bytes of UTF-8) and in binary (3 bytes per unit
 * plus tag and length), plus the separators around it as a field or map key.
 */
export function stringBoundBytes(s: string): number {
  return 6 * s.length + 16;
}

/** A map<string, string>'s most: each key and value as strings, and the braces. */
export function labelsBoundBytes(labels: Readonly<Record<string, string>>): number {
  let n = 2;
  for (const k in labels) n += stringBoundBytes(k) + stringBoundBytes(labels[k]);
  return n;
}

/**
 * A point of a series, {"timeUnix":"-9223372036854775808","value":-2.2250738585072014e-308} and its
 * comma (69 bytes), or 22 bytes in binary.
 */
export const POINT_BOUND_BYTES = 72;
