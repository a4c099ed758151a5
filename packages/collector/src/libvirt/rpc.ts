import { connect, type Socket } from "node:net";
import { XdrError, XdrReader, XdrWriter } from "./xdr.ts";

/**
 * libvirt's RPC framing (virnetprotocol.x): every message is a 4-byte total length, then a 24-byte
 * header (program, version, procedure, type, serial, status), then the XDR body. A call's reply
 * carries the same serial; status ERROR carries a remote_error instead of the return value.
 */
export const REMOTE_PROGRAM = 0x20008086;
export const REMOTE_PROTOCOL_VERSION = 1;
const HEADER_BYTES = 28;
/** One read from libvirtd's socket at most; a larger reply arrives over several reads. */
const READ_BUFFER_BYTES = 64 * 1024;
/** libvirt's own bound on one message (VIR_NET_MESSAGE_MAX, 32 MiB in recent releases). */
export const MAX_MESSAGE_BYTES = 32 * 1024 * 1024;

export const MessageType = { CALL: 0, REPLY: 1, MESSAGE: 2, STREAM: 3 } as const;
export const MessageStatus = { OK: 0, ERROR: 1, CONTINUE: 2 } as const;

export interface MessageHeader {
  readonly program: number;
  readonly version: number;
  readonly procedure: number;
  readonly type: number;
  readonly serial: number;
  readonly status: number;
}

/** A call the daemon answered with an error (its virErrorNumber in `code`), or a broken exchange. */
export class LibvirtError extends Error {
  constructor(
    message: string,
    readonly code?: number,
    readonly domain?: number,
  ) {
    super(message);
  }
}

/** A whole message: length, header, body. */
export function encodeMessage(h: MessageHeader, body: Uint8Array): Buffer {
  const w = new XdrWriter()
    .uint(HEADER_BYTES + body.length)
    .uint(h.program)
    .uint(h.version)
    .int(h.procedure)
    .int(h.type)
    .uint(h.serial)
    .int(h.status);
  return Buffer.concat([w.bytes(), body]);
}

/**
 * Splits a byte stream into messages. Returns the complete ones and the unconsumed rest; a length
 * outside [28, MAX_MESSAGE_BYTES] is a protocol error (the stream cannot be resynchronized).
 */
export function splitMessages(buf: Buffer): {
  messages: { header: MessageHeader; body: Buffer }[];
  rest: Buffer;
} {
  const messages: { header: MessageHeader; body: Buffer }[] = [];
  let off = 0;
  while (buf.length - off >= 4) {
    const len = buf.readUInt32BE(off);
    if (len < HEADER_BYTES || len > MAX_MESSAGE_BYTES) {
      throw new XdrError(`libvirt message length ${len} is outside [${HEADER_BYTES}, ${MAX_MESSAGE_BYTES}]`);
    }
    if (buf.length - off < len) break;
    const r = new XdrReader(buf, off + 4);
    const header: MessageHeader = {
      program: r.uint(),
      version: r.uint(),
      procedure: r.int(),
      type: r.int(),
      serial: r.uint(),
      status: r.int(),
    };
    messages.push({ header, body: buf.subarray(off + HEADER_BYTES, off + len) });
    off += len;
  }
  return { messages, rest: buf.subarray(off) };
}

/** remote_error: code, domain, message, level, then fields the collector does not read. */
export function decodeError(body: Buffer): LibvirtError {
  try {
    const r = new XdrReader(body);
    const code = r.int();
    const domain = r.int();
    const message = r.optionalString() ?? "unknown libvirt error";
    return new LibvirtError(message, code, domain);
  } catch {
    return new LibvirtError("libvirt answered with an undecodable error");
  }
}

interface Pending {
  resolve(body: Buffer): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

/**
 * One connection to libvirtd's unix socket: calls are matched to replies by serial, so several may be
 * in flight. Messages the daemon sends unasked (events, keepalive; the collector registers for
 * neither) are ignored. A closed or broken socket fails every pending call.
 */
export class RpcConnection {
  readonly #socket: Socket;
  readonly #pending = new Map<number, Pending>();
  #serial = 0;
  #rest: Buffer = Buffer.alloc(0);
  #closed: Error | undefined;
  readonly #timeoutMs: number;

  private constructor(socket: Socket, timeoutMs: number) {
    this.#socket = socket;
    this.#timeoutMs = timeoutMs;
    socket.on("error", (err) => this.#fail(new LibvirtError(`libvirt socket: ${err.message}`)));
    socket.on("close", () => this.#fail(new LibvirtError("libvirt closed the connection")));
  }

  static open(path: string, timeoutMs: number): Promise<RpcConnection> {
    return new Promise((resolve, reject) => {
      let conn: RpcConnection | undefined;
      // `onread`: the bytes come straight to the parser in one reused buffer, without a readable
      // stream's per-chunk events and ticks (most of a small reply's cost in Node.js).
      const readBuffer = Buffer.allocUnsafe(READ_BUFFER_BYTES);
      const s = connect({
        path,
        onread: {
          buffer: readBuffer,
          callback: (n: number, buf: Uint8Array) => {
            conn?.onBytes(buf, n);
            return true; // keep reading
          },
        },
      });
      const onError = (err: Error) => reject(new LibvirtError(`cannot connect to ${path}: ${err.message}`));
      s.once("error", onError);
      s.once("connect", () => {
        s.off("error", onError);
        conn = new RpcConnection(s, timeoutMs);
        resolve(conn);
      });
    });
  }

  get closed(): boolean {
    return this.#closed !== undefined;
  }

  call(procedure: number, body: Uint8Array = Buffer.alloc(0), timeoutMs = this.#timeoutMs): Promise<Buffer> {
    if (this.#closed) return Promise.reject(this.#closed);
    const serial = ++this.#serial >>> 0;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(serial);
        reject(new LibvirtError(`libvirt did not answer procedure ${procedure} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#pending.set(serial, { resolve, reject, timer });
      this.#socket.write(
        encodeMessage(
          {
            program: REMOTE_PROGRAM,
            version: REMOTE_PROTOCOL_VERSION,
            procedure,
            type: MessageType.CALL,
            serial,
            status: MessageStatus.OK,
          },
          body,
        ),
      );
    });
  }

  close(): void {
    this.#fail(new LibvirtError("connection closed by the collector"));
    this.#socket.destroy();
  }

  /** `n` new bytes at the start of `buf`, which the socket reuses for its next read (internal). */
  private onBytes(buf: Uint8Array, n: number): void {
    const chunk = Buffer.from(buf.buffer, buf.byteOffset, n);
    this.#rest = this.#rest.length === 0 ? chunk : Buffer.concat([this.#rest, chunk]);
    let messages: ReturnType<typeof splitMessages>["messages"];
    try {
      ({ messages, rest: this.#rest } = splitMessages(this.#rest));
    } catch (err) {
      this.#fail(new LibvirtError((err as Error).message));
      this.#socket.destroy();
      return;
    }
    for (const { header, body } of messages) {
      if (header.program !== REMOTE_PROGRAM || header.type !== MessageType.REPLY) continue;
      const p = this.#pending.get(header.serial);
      if (!p) continue;
      this.#pending.delete(header.serial);
      clearTimeout(p.timer);
      if (header.status === MessageStatus.OK) p.resolve(Buffer.from(body));
      else p.reject(decodeError(body));
    }
    // An incomplete message left in the read buffer is copied out before the next read overwrites it.
    if (this.#rest.length > 0 && this.#rest.buffer === buf.buffer) this.#rest = Buffer.from(this.#rest);
  }

  #fail(err: Error): void {
    this.#closed ??= err;
    for (const p of this.#pending.values()) {
      clearTimeout(p.timer);
      p.reject(err);
    }
    this.#pending.clear();
  }
}
