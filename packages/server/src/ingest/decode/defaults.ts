import { availableParallelism } from "node:os";

/**
 * The decode pool's defaults (apart from pool.ts, so the configuration reads them without loading the
 * pool). Workers: one per core beyond the event loop's, at most 4 (on 2 cores, one). Inline threshold:
 * docs/decisions.md "Ingest on both cores" (bodies below it cost less to decode than to hand off).
 */
export const DEFAULT_DECODE_WORKERS = Math.min(4, Math.max(0, availableParallelism() - 1));
export const DEFAULT_INLINE_BYTES = 1024;
