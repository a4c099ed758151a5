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
 * `now` is the clock (a test's own, so it does not depend on the machine's speed).
 */
export function slicer(
  sliceMs: number,
  open: () => boolean,
  now: () => number = () => performance.now(),
): Slicer {
  let since = now();
  return {
    due: () => now() - since >= sliceMs,
    yield: () =>
      new Promise<boolean>((resolve) =>
        setImmediate(() => {
          since = now();
          resolve(open());
        }),
      ),
  };
}
