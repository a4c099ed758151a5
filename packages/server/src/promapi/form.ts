/**
 * A request's parameters as Prometheus (Go's net/http `Request.ParseForm` and `FormValue`) reads
 * them: the body's values when it is a form (`application/x-www-form-urlencoded` or
 * `multipart/form-data`), then the URL query's. Any other body, and a body under any content type
 * that is empty, is ignored. Unlike Go's `FormValue`, a malformed form or escape is a 400, not a
 * silently missing value: svc names what is wrong (Prometheus does so for `series` and `labels`).
 */
import type { Readable } from "node:stream";
import { ApiError } from "./errors.ts";

export type FormKind = "urlencoded" | "multipart" | "ignored";

/** Which body a request carries, from its Content-Type (parameters and case as MIME allows). */
export function formKind(contentType: string | undefined): FormKind {
  const media = (contentType ?? "").split(";", 1)[0]?.trim().toLowerCase();
  if (media === "application/x-www-form-urlencoded") return "urlencoded";
  if (media === "multipart/form-data") return "multipart";
  return "ignored";
}

function formError(why: string): ApiError {
  return new ApiError("bad_data", `error parsing form values: ${why}`);
}

/**
 * Go's url.QueryUnescape over a string of bytes (one char per byte, as latin1 reads them): `+` is a
 * space, `%XX` a byte, the result UTF-8; a bad escape is an error naming it.
 */
function queryUnescape(s: string): string {
  if (/^[^%+\u0080-\u00ff]*$/.test(s)) return s;
  const bytes: number[] = [];
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x25) {
      const hex = s.slice(i + 1, i + 3);
      if (!/^[0-9a-fA-F]{2}$/.test(hex)) {
        throw formError(`invalid URL escape ${JSON.stringify(s.slice(i, i + 3).slice(0, 3))}`);
      }
      bytes.push(Number.parseInt(hex, 16));
      i += 2;
    } else if (c === 0x2b) {
      bytes.push(0x20);
    } else {
      bytes.push(c & 0xff);
    }
  }
  return Buffer.from(bytes).toString("utf8");
}

/**
 * Go's url.ParseQuery, strict: pairs split on `&`, a `;` inside one is refused (Go ≥ 1.17), an empty
 * pair skipped, a pair without `=` a key with the empty value.
 */
export function parseUrlEncoded(text: string): Record<string, string[]> {
  const out: Record<string, string[]> = Object.create(null);
  for (const pair of text.split("&")) {
    if (pair === "") continue;
    if (pair.includes(";")) throw formError("invalid semicolon separator in query");
    const eq = pair.indexOf("=");
    const key = queryUnescape(eq < 0 ? pair : pair.slice(0, eq));
    const value = eq < 0 ? "" : queryUnescape(pair.slice(eq + 1));
    let list = out[key];
    if (!list) {
      list = [];
      out[key] = list;
    }
    list.push(value);
  }
  return out;
}

/** The URL's query string as parameters (strictly, as the body); Node keeps `req.url` as sent. */
export function queryParams(url: string): Record<string, string[]> {
  const q = url.indexOf("?");
  return q < 0 ? Object.create(null) : parseUrlEncoded(Buffer.from(url.slice(q + 1)).toString("latin1"));
}

/**
 * Reads a stream up to `maxBytes`. Past that, a 400 naming the limit at once; the rest of the body
 * is still read and dropped, so the answer reaches the client and the connection stays usable.
 */
function readAll(stream: Readable, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    stream.on("data", (chunk: Buffer) => {
      if (over) return;
      size += chunk.length;
      if (size <= maxBytes) {
        chunks.push(chunk);
        return;
      }
      over = true;
      chunks.length = 0;
      reject(
        new ApiError("bad_data", `request body exceeds the limit of ${maxBytes} bytes [REQUEST_TOO_LARGE]`),
      );
    });
    stream.on("end", () => resolve(Buffer.concat(chunks)));
    stream.on("error", (err) => reject(formError(err.message)));
  });
}

/** Drains a body svc does not read, so the connection can carry the next request. */
export function drain(stream: Readable): Promise<void> {
  return new Promise((resolve) => {
    stream.on("error", () => resolve());
    stream.on("end", () => resolve());
    stream.on("close", () => resolve());
    stream.resume();
  });
}

/** The values of a form body (file parts of a multipart form are not parameters, as in Go). */
export async function readFormBody(
  stream: Readable,
  contentType: string,
  kind: Exclude<FormKind, "ignored">,
  maxBytes: number,
): Promise<Record<string, string[]>> {
  const body = await readAll(stream, maxBytes);
  if (body.length === 0) return Object.create(null);
  if (kind === "urlencoded") return parseUrlEncoded(body.toString("latin1"));
  let data: FormData;
  try {
    data = await new Response(body, { headers: { "content-type": contentType } }).formData();
  } catch (err) {
    throw formError(err instanceof Error ? err.message : "malformed multipart body");
  }
  const out: Record<string, string[]> = Object.create(null);
  for (const [k, v] of data.entries()) {
    if (typeof v !== "string") continue;
    let list = out[k];
    if (!list) {
      list = [];
      out[k] = list;
    }
    list.push(v);
  }
  return out;
}
