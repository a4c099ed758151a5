export {
  type CompactWriteRequest,
  compactWriteRequest,
  type LabelKeyNumbering,
  labelKeyBytesHash,
  labelKeyHash,
  labelsOfKey,
  labelsOfKeyBytes,
} from "./compact.ts";
export { crc32 } from "./crc32.ts";
export {
  decodeRemoteWriteBody,
  decodeRemoteWriteBodyCompact,
  decodeWriteRequest,
  decodeWriteRequestCompact,
} from "./decode.ts";
export {
  type ColumnSeries,
  encodeLabelFields,
  encodeRemoteWriteBody,
  encodeSeriesColumns,
  encodeSeriesRuns,
  encodeWriteRequest,
} from "./encode.ts";
export { type DecodeLimitName, RemoteWriteDecodeError, RemoteWritePushError } from "./errors.ts";
export { httpPost } from "./http-post.ts";
export { createLogger, type Logger, type LogLevel } from "./log.ts";
export { type DecodeLimits, defaultDecodeLimits, resolveDecodeLimits } from "./options.ts";
export { type FetchLike, type PushOptions, type PushResult, pushRemoteWrite } from "./push.ts";
export { SendLoop, type SendLoopOptions } from "./send-loop.ts";
export { stopOnSignals } from "./shutdown.ts";
export { readSnappyLength, snappyCompress, snappyDecompress, snappyImplementation } from "./snappy.ts";
export { Spool, type SpoolCounters, type SpoolOptions, type SpoolRecord } from "./spool.ts";
export {
  type Label,
  type MetricMetadata,
  MetricType,
  type Sample,
  type TimeSeries,
  type WriteRequest,
} from "./types.ts";
