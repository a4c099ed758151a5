import type { QueryResult } from "../../promql/index.ts";
import type { LabelMatcher, Querier, Queryable, SeriesData } from "../../storage/interface.ts";

/**
 * Evaluates a (tenant-scoped) query with svc's own, synchronous engine over samples that must first
 * be fetched from a remote engine. The engine's selectors do not depend on the data, so a dry run
 * over an empty store names every select the evaluation will make, with the exact range the engine
 * computes (lookback, `offset`, `@`, subqueries); those are fetched at once, in parallel, and the
 * evaluation runs over them (inline or in the worker pool, which reads a store synchronously). A
 * select the dry run did not foresee fails that run and is fetched for another round.
 */
export async function evaluatePrefetched(deps: {
  /** The evaluation over an empty store, on this thread: only its selects matter. */
  dryRun: (q: Queryable) => unknown;
  /** The evaluation itself over the fetched samples. */
  run: (q: Queryable) => Promise<QueryResult>;
  /** Reads one select's samples from the remote engine. */
  fetch: (matchers: readonly LabelMatcher[], mintMs: number, maxtMs: number) => Promise<SeriesData[]>;
}): Promise<QueryResult> {
  const fetched = new Map<string, SeriesData[]>();
  let wanted = new Map<string, Select>();
  deps.dryRun({ querier: () => recorder(wanted) });
  for (let round = 0; ; round++) {
    const todo = [...wanted.entries()].filter(([k]) => !fetched.has(k));
    const got = await Promise.all(todo.map(([, s]) => deps.fetch(s.matchers, s.mintMs, s.maxtMs)));
    for (let i = 0; i < todo.length; i++) fetched.set(todo[i][0], got[i]);
    wanted = new Map();
    try {
      return await deps.run({ querier: () => replayer(fetched, wanted) });
    } catch (err) {
      if (!(err instanceof UnforeseenSelectError) || round >= MAX_ROUNDS) throw err;
    }
  }
}

/** Rounds of fetching after the dry run before an unforeseen select is an error. */
const MAX_ROUNDS = 3;

interface Select {
  readonly matchers: readonly LabelMatcher[];
  readonly mintMs: number;
  readonly maxtMs: number;
}

/** The evaluation asked for samples the dry run had not named (internal to this module). */
class UnforeseenSelectError extends Error {
  override readonly name = "UnforeseenSelectError";
}

function keyOf(matchers: readonly LabelMatcher[], mintMs: number, maxtMs: number): string {
  return JSON.stringify([matchers.map((m) => [m.type, m.name, m.value]), mintMs, maxtMs]);
}

const notRead = () => {
  throw new Error("the engine reads only samples");
};

function recorder(wanted: Map<string, Select>): Querier {
  return {
    select(matchers, mintMs, maxtMs) {
      wanted.set(keyOf(matchers, mintMs, maxtMs), { matchers, mintMs, maxtMs });
      return [];
    },
    labelNames: notRead,
    labelValues: notRead,
  };
}

function replayer(fetched: ReadonlyMap<string, SeriesData[]>, missed: Map<string, Select>): Querier {
  return {
    select(matchers, mintMs, maxtMs) {
      const key = keyOf(matchers, mintMs, maxtMs);
      const data = fetched.get(key);
      if (data) return data;
      missed.set(key, { matchers, mintMs, maxtMs });
      throw new UnforeseenSelectError(`select ${key} was not foreseen`);
    },
    labelNames: notRead,
    labelValues: notRead,
  };
}
