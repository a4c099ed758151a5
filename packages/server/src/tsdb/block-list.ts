/**
 * The store's list of blocks: kept in time order, the newest blocks' rollups held in memory within
 * TsdbOptions.rollupMemoryBytes, and readers' holds, so a block a merge or retention replaced is
 * deleted once no reader holds it rather than under a query that is reading it.
 */
import type { Block } from "./block.ts";

export class BlockList {
  #blocks: Block[] = [];
  /**
   * Readers holding blocks (an iteration, a query worker reading them itself), per block: a block a
   * merge or retention replaced is deleted once no reader holds it, not when every reader has ended,
   * so a steady stream of overlapping queries cannot keep replaced blocks on disk.
   */
  readonly #holds = new Map<Block, number>();
  readonly #doomed = new Set<Block>();
  readonly #sizes = new WeakMap<Block, number>();
  readonly #rollupMemoryBytes: number;
  #closed = false;

  constructor(rollupMemoryBytes: number) {
    this.#rollupMemoryBytes = rollupMemoryBytes;
  }

  /** The blocks, oldest first (the list itself: copy it to keep it across a compaction step). */
  get all(): readonly Block[] {
    return this.#blocks;
  }

  get length(): number {
    return this.#blocks.length;
  }

  /** Puts `merged` in place of `replaced` (retired: deleted once no reader holds them). */
  replace(replaced: readonly Block[], merged: readonly Block[]): void {
    this.#blocks = this.#blocks.filter((b) => !replaced.includes(b)).concat(merged);
    this.#sort();
    for (const b of replaced) this.#retire(b);
  }

  /** Adds blocks (a cut, or those found at open). */
  add(...blocks: Block[]): void {
    this.#blocks.push(...blocks);
    this.#sort();
  }

  /** Retires every block whose max time is below `limit`; returns how many. */
  dropBefore(limit: number): number {
    const keep: Block[] = [];
    let dropped = 0;
    for (const b of this.#blocks) {
      if (b.meta.maxTime < limit) {
        this.#retire(b);
        dropped++;
      } else keep.push(b);
    }
    this.#blocks = keep;
    // Memory the dropped blocks held may now fit older blocks' rollups.
    if (dropped > 0) this.#sort();
    return dropped;
  }

  /** Holds `blocks` for a reader; the function returned releases them (once, however often called). */
  readonly hold = (blocks: readonly Block[]): (() => void) => {
    for (const b of blocks) this.#holds.set(b, (this.#holds.get(b) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      for (const b of blocks) {
        const n = (this.#holds.get(b) ?? 1) - 1;
        if (n > 0) {
          this.#holds.set(b, n);
          continue;
        }
        this.#holds.delete(b);
        if (this.#doomed.delete(b)) b.delete();
      }
    };
  };

  /** Bytes of the blocks' files; blocks are immutable, so each is stat'ed once, not on every scrape. */
  sizeBytes(): number {
    let bytes = 0;
    for (const b of this.#blocks) {
      let size = this.#sizes.get(b);
      if (size === undefined) {
        size = b.sizeBytes();
        this.#sizes.set(b, size);
      }
      bytes += size;
    }
    return bytes;
  }

  /** Block figures for TsdbStats (bytes stat'ed now: stats() is not read per scrape). */
  stats(): { blocks: number; blockSamples: number; blockBytes: number; rollupHeldBytes: number } {
    let blockSamples = 0;
    let blockBytes = 0;
    let rollupHeldBytes = 0;
    for (const b of this.#blocks) {
      blockSamples += b.meta.numSamples;
      blockBytes += b.sizeBytes();
      if (b.rollupsHeld) rollupHeldBytes += b.rollupsBytes();
    }
    return { blocks: this.#blocks.length, blockSamples, blockBytes, rollupHeldBytes };
  }

  /** Tells `add` the encoded chunk bytes of each value of label `name`, block by block. */
  chunkBytesByLabel(name: string, add: (value: string, bytes: number) => void): void {
    for (const b of this.#blocks)
      for (const v of b.labelValues(name)) add(v, b.chunkBytesOf(b.postings(name, v)));
  }

  /** Closes every block and deletes those replaced while a reader held them. */
  close(): void {
    this.#closed = true;
    for (const b of this.#blocks) b.close();
    // A crash here instead leaves them for the next open (merge sources) or the next retention pass.
    for (const b of this.#doomed) b.delete();
    this.#doomed.clear();
  }

  /** Deletes a block no longer in the list, now or once no reader holds it. */
  #retire(b: Block): void {
    if (this.#holds.has(b) && !this.#closed) this.#doomed.add(b);
    else b.delete();
  }

  /** Keeps the list in time order and the newest blocks' rollups in memory, within budget. */
  #sort(): void {
    this.#blocks.sort((a, b) => a.meta.minTime - b.meta.minTime || a.meta.coversBefore - b.meta.coversBefore);
    let budget = this.#rollupMemoryBytes;
    for (let i = this.#blocks.length - 1; i >= 0; i--) {
      const b = this.#blocks[i];
      const size = b.rollupsBytes();
      if (size > 0 && size <= budget) {
        b.holdRollups();
        budget -= size;
      } else {
        b.releaseRollups();
        // Newest first without holes: an older block never holds memory a newer one could not get.
        if (size > 0) budget = 0;
      }
    }
  }
}
