import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { Client } from "pg";
import { SvcError } from "../errors.ts";
import {
  type ConcurrencyOptions,
  createProjectLimiter,
  type ProjectLimiter,
  resolveConcurrencyOptions,
  tooManyQueries,
} from "../metrics/concurrency.ts";

export interface SharedProjectLimiterOptions extends ConcurrencyOptions {
  /** Pause between two tries for a slot while every slot is taken elsewhere, ms. */
  readonly pollMs: number;
  /**
   * Keepalive asked of the server for the slot connection, s: a replica that vanishes without
   * closing its socket (power, network) loses its slots after about idle + 3 × interval.
   */
  readonly keepaliveIdleSeconds: number;
  readonly keepaliveIntervalSeconds: number;
}

export const defaultSharedProjectLimiterOptions = Object.freeze({
  pollMs: 50, // ms
  keepaliveIdleSeconds: 30, // s
  keepaliveIntervalSeconds: 10, // s
});

/** A {@link ProjectLimiter} whose cap holds across replicas; close() ends its connection. */
export interface SharedProjectLimiter extends ProjectLimiter {
  close(): Promise<void>;
}

/** Slot locks live in the two-int advisory lock space: (project key, slot number). */
export function projectLockKey(projectId: string): number {
  return createHash("sha256").update(`svc.query-slots:${projectId}`).digest().readInt32BE(0);
}

/** One connection and the slots this replica holds on it (a new connection holds none). */
interface Session {
  readonly client: Client;
  readonly held: Map<number, Set<number>>;
  dead: boolean;
}

/**
 * Per-project query concurrency across replicas on one PostgreSQL. A slot is a session advisory
 * lock (project key, n) for n in 0..cap−1, held on one dedicated connection per replica: taken
 * with pg_try_advisory_lock, given back with pg_advisory_unlock, and dropped by the server when the
 * connection ends, so a replica that dies cannot keep slots. The in-process limiter stays in front,
 * so a replica runs at most cap queries of a project and asks the database only for those; its
 * queue and wait bounds are the caller's, and a query that finds every slot taken elsewhere tries
 * again every pollMs until the same deadline, then is refused (429, Retry-After) as in one process.
 *
 * Advisory locks are re-entrant per session, so a replica never asks for a slot it holds: it keeps
 * its own slots per project and tries only the others, one statement for the lot (the first free
 * one wins), one try at a time on the connection.
 */
export function createSharedProjectLimiter(
  connectionString: string,
  overrides: Partial<SharedProjectLimiterOptions> = {},
): SharedProjectLimiter {
  const o = Object.freeze({
    ...defaultSharedProjectLimiterOptions,
    ...resolveConcurrencyOptions(overrides),
    ...overrides,
  });
  const local = createProjectLimiter(o);
  const slotNumbers = Array.from({ length: o.maxConcurrent }, (_, i) => i);
  let session: Promise<Session> | undefined;
  let current: Session | undefined;
  let turn: Promise<unknown> = Promise.resolve();
  let closed = false;

  const unavailable = (cause: unknown) =>
    new SvcError("unavailable", "query slots are unavailable: the database did not answer", { cause });

  /** A session the server ended holds nothing any more; the next try opens another. */
  const lost = (s: Session) => {
    s.dead = true;
    if (current === s) {
      current = undefined;
      session = undefined;
    }
  };

  const open = async (): Promise<Session> => {
    const { default: pg } = await import("pg");
    const client = new pg.Client({ connectionString, application_name: "svc query slots" });
    const s: Session = { client, held: new Map(), dead: false };
    // The server ended the session (restart, pg_terminate_backend): its slots are gone with it.
    client.on("error", () => lost(s));
    client.on("end", () => lost(s));
    await client.connect();
    await client.query(
      `set tcp_keepalives_idle = ${Math.trunc(o.keepaliveIdleSeconds)}; set tcp_keepalives_interval = ${Math.trunc(o.keepaliveIntervalSeconds)}; set tcp_keepalives_count = 3`,
    );
    current = s;
    return s;
  };

  /** Runs fn after the previous try or release: the held sets stay true to what the server has. */
  const inTurn = <T>(fn: () => Promise<T>): Promise<T> => {
    const r = turn.then(fn, fn);
    turn = r.catch(() => {});
    return r;
  };

  const tryTake = (key: number) =>
    inTurn(async () => {
      if (closed) throw unavailable(new Error("closed"));
      session ??= open().catch((err: unknown) => {
        session = undefined;
        throw err;
      });
      let s: Session;
      try {
        s = await session;
      } catch (err) {
        throw unavailable(err);
      }
      const held = s.held.get(key) ?? new Set<number>();
      const free = slotNumbers.filter((n) => !held.has(n));
      let rows: { n: number }[];
      try {
        ({ rows } = await s.client.query<{ n: number }>(
          "select n from unnest($2::int[]) as n where pg_try_advisory_lock($1::int, n) limit 1",
          [key, free],
        ));
      } catch (err) {
        lost(s);
        s.client.end().catch(() => {});
        throw unavailable(err);
      }
      if (rows.length === 0) return undefined;
      held.add(rows[0].n);
      s.held.set(key, held);
      return { s, n: rows[0].n };
    });

  const giveBack = (key: number, taken: { s: Session; n: number }) =>
    inTurn(async () => {
      const { s, n } = taken;
      // A lost session's locks went with it.
      if (!s.dead)
        await s.client.query("select pg_advisory_unlock($1::int, $2::int)", [key, n]).catch(() => {});
      const held = s.held.get(key);
      held?.delete(n);
      if (held?.size === 0) s.held.delete(key);
    });

  return {
    run(projectId, fn) {
      const deadline = Date.now() + o.maxWaitMs;
      const key = projectLockKey(projectId);
      return local.run(projectId, async () => {
        let taken = await tryTake(key);
        while (!taken) {
          if (Date.now() + o.pollMs > deadline)
            throw tooManyQueries(o, `waited ${o.maxWaitMs} ms for a slot`);
          await sleep(o.pollMs);
          taken = await tryTake(key);
        }
        try {
          return await fn();
        } finally {
          await giveBack(key, taken);
        }
      });
    },
    stats: (projectId) => local.stats(projectId),
    async close() {
      closed = true;
      const s = await session?.catch(() => undefined);
      session = undefined;
      await turn;
      await s?.client.end().catch(() => {});
    },
  };
}
