import type { CompiledQuery } from "kysely";
import type { Db } from "../db/database.ts";
import type { KeyPrincipal } from "./principal.ts";

/**
 * Key principals, cached per process under the database's auth revision (docs/decisions.md, "Key
 * principals cached under the database's auth revision").
 *
 * Authenticating an API key took two reads (the key by its secret's hash, then its service account or
 * its owner's role) on every request. The database bumps `auth_revision` in the same transaction as any
 * change that can narrow an existing key (triggers of migration 0015_auth_revision: the key's row, its
 * service account, any membership), so a request reads that one row instead, and uses the principal
 * cached under the same revision. A revocation committed on any replica before a request began is seen
 * by it, as with the two reads: revocation stays immediate. What depends on the clock (the key's expiry,
 * a revocation scheduled for later by a rotation) is kept with the entry and checked on every request.
 */
export interface CachedKey {
  readonly principal: KeyPrincipal;
  readonly expireTime: number;
  readonly revokeTime: number | null;
  /** The revision read before the rows this principal was built from. */
  readonly revision: number;
}

/** Keys of a fleet's agents and dashboards fit; beyond, the oldest entry goes. */
const CAPACITY = 10_000;

export class KeyPrincipalCache {
  readonly #entries = new Map<string, CachedKey>();
  /** The revision last read: entries under another one are dropped together. */
  #revision = -1;
  #revisionQuery: CompiledQuery | undefined;

  constructor(private readonly db: Db) {}

  /** The database's auth revision now: one read by primary key, built once. */
  async revision(): Promise<number> {
    this.#revisionQuery ??= this.db
      .selectFrom("auth_revision")
      .select("revision")
      .where("id", "=", 1)
      .compile();
    const { rows } = await this.db.executeQuery<{ revision: number | string }>(this.#revisionQuery);
    const r = Number(rows[0]?.revision ?? Number.NaN);
    // Any other revision than the last one seen empties the cache: a newer one (a change), or an older
    // one (a database restored from a backup, whose counter went back).
    if (r !== this.#revision) {
      this.#entries.clear();
      this.#revision = r;
    }
    return r;
  }

  /** The entry for `secretHash` built under `revision`, if any. */
  get(secretHash: string, revision: number): CachedKey | undefined {
    const e = this.#entries.get(secretHash);
    return e?.revision === revision ? e : undefined;
  }

  set(secretHash: string, entry: CachedKey): void {
    // Built under a revision already superseded (a change committed while its rows were read): not kept.
    if (entry.revision !== this.#revision || Number.isNaN(entry.revision)) return;
    if (this.#entries.size >= CAPACITY && !this.#entries.has(secretHash)) {
      const oldest = this.#entries.keys().next().value;
      if (oldest !== undefined) this.#entries.delete(oldest);
    }
    this.#entries.set(secretHash, entry);
  }

  get size(): number {
    return this.#entries.size;
  }
}

const caches = new WeakMap<Db, KeyPrincipalCache>();
let enabled = true;

/** Turns the cache on or off (benches compare the two; on by default); returns the setting. */
export function keyPrincipalCaching(on?: boolean): boolean {
  if (on !== undefined) enabled = on;
  return enabled;
}

/** The cache of the process's connection `db` (each replica, each test app, has its own). */
export function keyCacheOf(db: Db): KeyPrincipalCache | undefined {
  if (!enabled) return undefined;
  let c = caches.get(db);
  if (!c) {
    c = new KeyPrincipalCache(db);
    caches.set(db, c);
  }
  return c;
}
