/** Domain errors of the embedded TSDB; the HTTP edges map them to wire errors. */

/** A label set is not acceptable (bad name, missing or invalid `__name__`, duplicate names). */
export class InvalidLabelsError extends Error {
  constructor(detail: string) {
    super(`invalid labels: ${detail}`);
    this.name = "InvalidLabelsError";
  }
}

/** A sample is older than retention or too far in the future. */
export class SampleOutOfBoundsError extends Error {
  constructor(readonly timestampMs: number) {
    super(`sample timestamp ${timestampMs} is out of bounds`);
    this.name = "SampleOutOfBoundsError";
  }
}

/** A sample is older than its series' out-of-order window allows. */
export class SampleTooOldError extends Error {
  constructor(readonly timestampMs: number) {
    super(`sample timestamp ${timestampMs} is too old for the out-of-order window`);
    this.name = "SampleTooOldError";
  }
}

/** An on-disk structure (WAL record, block index) failed its checksum or could not be parsed. */
export class CorruptionError extends Error {
  constructor(
    readonly path: string,
    detail: string,
  ) {
    super(`corrupt ${path}: ${detail}`);
    this.name = "CorruptionError";
  }
}

/** The store was used after close(), or the WAL failed and the store refuses further writes. */
export class TsdbClosedError extends Error {
  constructor(detail = "tsdb is closed") {
    super(detail);
    this.name = "TsdbClosedError";
  }
}

/** A regex matcher does not compile under RE2 syntax. */
export class InvalidMatcherError extends Error {
  constructor(detail: string) {
    super(`invalid matcher: ${detail}`);
    this.name = "InvalidMatcherError";
  }
}
