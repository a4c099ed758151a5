/**
 * The store's blocks as a query worker sees them (Querier.selectParts): blocks are immutable, so a
 * worker reads their chunks itself instead of the event loop reading them for it. Each block's
 * index is parsed once per worker and kept while the store still lists the block; chunks are read
 * through the store's own descriptors, lent for one query (the store holds those blocks until the
 * query ends), so a worker opens no file it would have to close — one terminated at a query's
 * deadline leaks nothing.
 */
import { isColumns, seriesOfColumns } from "../storage/columns.ts";
import type { LabelMatcher, SelectParts, SeriesColumns, SeriesData } from "../storage/interface.ts";
import { Block } from "./block.ts";
import { selectFromBlocks } from "./querier.ts";

export class BlockSet {
  readonly #blocks = new Map<string, Block>();
  readonly #lent = new Set<Block>();
  #live: ReadonlySet<string> | undefined;

  /**
   * `select` over the lent blocks and `rest` (the store's other samples, in any order), a series at
   * a time in label order.
   */
  select(
    parts: Pick<SelectParts, "blocks" | "liveBlockDirs"> & {
      readonly rest: readonly SeriesData[] | SeriesColumns;
    },
    matchers: readonly LabelMatcher[],
    mintMs: number,
    maxtMs: number,
  ): Generator<SeriesData, void, undefined> {
    this.#live = new Set(parts.liveBlockDirs);
    const blocks = parts.blocks.map(({ dir, fd }) => {
      let b = this.#blocks.get(dir);
      if (!b) {
        b = new Block(dir, { borrower: true });
        this.#blocks.set(dir, b);
      }
      b.lend(fd);
      this.#lent.add(b);
      return b;
    });
    const rest = isColumns(parts.rest) ? seriesOfColumns(parts.rest) : parts.rest;
    return selectFromBlocks(blocks, matchers, mintMs, maxtMs, rest);
  }

  /** After a query: gives the descriptors back and forgets the blocks the store no longer lists. */
  endQuery(): void {
    for (const b of this.#lent) b.lend(-1);
    this.#lent.clear();
    const live = this.#live;
    if (live) for (const dir of this.#blocks.keys()) if (!live.has(dir)) this.#blocks.delete(dir);
  }

  /** Blocks whose index this worker holds. */
  get size(): number {
    return this.#blocks.size;
  }
}
