/** Which decode limit a body broke; `malformed` when the bytes are not a valid body at all. */
export type DecodeLimitName =
  | "maxCompressedBytes"
  | "maxDecompressedBytes"
  | "maxSeries"
  | "maxLabelsPerSeries"
  | "maxSamples"
  | "maxLabelNameBytes"
  | "maxLabelValueBytes"
  | "maxMetadata"
  | "maxMetadataTextBytes";

/**
 * A remote-write body was refused: over a limit (`limit`, `actual`, `allowed` set) or malformed
 * (`limit` undefined). The message never contains body bytes beyond small numbers.
 */
export class RemoteWriteDecodeError extends Error {
  override readonly name = "RemoteWriteDecodeError";
  readonly limit: DecodeLimitName | undefined;
  readonly actual: number | undefined;
  readonly allowed: number | undefined;

  constructor(message: string, detail?: { limit: DecodeLimitName; actual: number; allowed: number }) {
    super(detail ? `${message}: ${detail.limit} exceeded (${detail.actual} > ${detail.allowed})` : message);
    this.limit = detail?.limit;
    this.actual = detail?.actual;
    this.allowed = detail?.allowed;
  }

  /** True when the body broke a size/count limit (HTTP 413-ish) rather than being malformed (400). */
  get isLimit(): boolean {
    return this.limit !== undefined;
  }
}

/** The receiver could not be reached or did not answer in time (no HTTP status). */
export class RemoteWritePushError extends Error {
  override readonly name = "RemoteWritePushError";
}
