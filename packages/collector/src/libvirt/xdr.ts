/**
 * XDR (RFC 4506), the encoding of libvirt's remote protocol: big-endian 4-byte units, strings and
 * variable opaques as a length then bytes padded to a multiple of 4, 64-bit integers as "hyper".
 * Only what the collector's procedures use.
 */
export class XdrError extends Error {}

export class XdrWriter {
  #buf = Buffer.alloc(256);
  #len = 0;

  #room(n: number): void {
    if (this.#len + n <= this.#buf.length) return;
    const next = Buffer.alloc(Math.max(this.#buf.length * 2, this.#len + n));
    this.#buf.copy(next, 0, 0, this.#len);
    this.#buf = next;
  }

  int(v: number): this {
    this.#room(4);
    this.#buf.writeInt32BE(v, this.#len);
    this.#len += 4;
    return this;
  }

  uint(v: number): this {
    this.#room(4);
    this.#buf.writeUInt32BE(v >>> 0, this.#len);
    this.#len += 4;
    return this;
  }

  bool(v: boolean): this {
    return this.int(v ? 1 : 0);
  }

  /** Fixed-length opaque (e.g. a 16-byte UUID): no length prefix. */
  fixedOpaque(bytes: Uint8Array): this {
    const padded = (bytes.length + 3) & ~3;
    this.#room(padded);
    this.#buf.set(bytes, this.#len);
    this.#buf.fill(0, this.#len + bytes.length, this.#len + padded);
    this.#len += padded;
    return this;
  }

  string(s: string): this {
    const b = Buffer.from(s, "utf8");
    this.uint(b.length);
    return this.fixedOpaque(b);
  }

  /** libvirt's `remote_string`: an optional string (XDR pointer: present flag, then the string). */
  optionalString(s: string | undefined): this {
    this.bool(s !== undefined);
    return s === undefined ? this : this.string(s);
  }

  bytes(): Buffer {
    return this.#buf.subarray(0, this.#len);
  }
}

export class XdrReader {
  readonly #buf: Buffer;
  #pos: number;

  constructor(buf: Buffer, offset = 0) {
    this.#buf = buf;
    this.#pos = offset;
  }

  get remaining(): number {
    return this.#buf.length - this.#pos;
  }

  #need(n: number, what: string): void {
    if (this.#pos + n > this.#buf.length) {
      throw new XdrError(
        `truncated XDR: ${what} needs ${n} bytes at offset ${this.#pos}, ${this.remaining} left`,
      );
    }
  }

  // int and uint from the bytes: the bounds are checked by #need, and a stats reply reads hundreds of
  // them per cycle, where Buffer's read methods add a call and a second check each.
  int(): number {
    this.#need(4, "int");
    const b = this.#buf;
    const p = this.#pos;
    this.#pos = p + 4;
    return (b[p] << 24) | (b[p + 1] << 16) | (b[p + 2] << 8) | b[p + 3];
  }

  uint(): number {
    this.#need(4, "unsigned int");
    const b = this.#buf;
    const p = this.#pos;
    this.#pos = p + 4;
    return ((b[p] << 24) | (b[p + 1] << 16) | (b[p + 2] << 8) | b[p + 3]) >>> 0;
  }

  bool(): boolean {
    const v = this.int();
    if (v !== 0 && v !== 1) throw new XdrError(`bad XDR bool ${v}`);
    return v === 1;
  }

  /** Signed 64-bit, as a bigint (CPU nanoseconds pass 2^53 after ~104 days of one vCPU). */
  hyper(): bigint {
    this.#need(8, "hyper");
    const v = this.#buf.readBigInt64BE(this.#pos);
    this.#pos += 8;
    return v;
  }

  uhyper(): bigint {
    this.#need(8, "unsigned hyper");
    const v = this.#buf.readBigUInt64BE(this.#pos);
    this.#pos += 8;
    return v;
  }

  double(): number {
    this.#need(8, "double");
    const v = this.#buf.readDoubleBE(this.#pos);
    this.#pos += 8;
    return v;
  }

  fixedOpaque(n: number): Buffer {
    const padded = (n + 3) & ~3;
    this.#need(padded, "opaque");
    const b = this.#buf.subarray(this.#pos, this.#pos + n);
    this.#pos += padded;
    return b;
  }

  /** A length-prefixed string, at most `max` bytes (libvirt's bound for the field). */
  string(max = 4 * 1024 * 1024): string {
    const n = this.uint();
    if (n > max) throw new XdrError(`XDR string of ${n} bytes exceeds its bound ${max}`);
    const padded = (n + 3) & ~3;
    this.#need(padded, "string");
    // Decoded in place: no Buffer view per string (a stats reply holds hundreds of field names).
    const v = this.#buf.toString("utf8", this.#pos, this.#pos + n);
    this.#pos += padded;
    return v;
  }

  optionalString(): string | undefined {
    return this.bool() ? this.string() : undefined;
  }

  /** A variable-length array's count, checked against its bound. */
  count(max: number, what: string): number {
    const n = this.uint();
    if (n > max) throw new XdrError(`XDR array ${what} of ${n} entries exceeds its bound ${max}`);
    return n;
  }
}
