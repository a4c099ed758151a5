/** A pacer for long store work on the event loop (block cuts, checkpoints, merges). */

export interface Slicer {
  /** A slice has passed since the last yield (or since the slicer was made). */
  due(): boolean;
  /** Gives the event loop back to requests; resolves false when the store is closing. */
  yield(): Promise<boolean>;
}

/**
 * A slicer of `sliceMs` (TsdbOptions.compactionSliceMs): the work checks `due()` between series and
 * awaits `yield()` when it is, stopping when that resolves false (`open()` said the store closes).
 */
export function slicer(sliceMs: number, open: () => boolean): Slicer {
  let since = performance.now();
  return {
    due: () => performance.now() - since >= sliceMs,
    yield: () =>
      new Promise<boolean>((resolve) =>
        setImmediate(() => {
          since = performance.now();
          resolve(open());
        }),
      ),
  };
}
