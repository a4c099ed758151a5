import { type Kysely, PostgresAdapter, sql } from "kysely";

/**
 * One counter, `auth_revision`, that the database itself bumps in the same transaction as any change
 * that can narrow what an existing API key may do: a key's row (revoked, expired, its capabilities,
 * project or owner; deleted), its service account's state or permissions, and any membership (a
 * personal key acts with its owner's role). Key principals are cached per process under the revision
 * read before they were (iam/principal-cache.ts); a request reads the revision once, so a change
 * committed on any replica before the request began is seen by it (docs/decisions.md, "Key principals
 * cached under the database's auth revision"). Triggers, not calls in the code, so no writer (another
 * replica's build, a repair by hand in psql or sqlite3) can change a grant without the bump.
 *
 * Not bumped by a key's last use (`last_used_*`, written once a minute per key): the triggers name the
 * columns they watch.
 */
const KEY_COLUMNS =
  "project_id, kind, service_account_id, owner_user_id, capabilities, secret_hash, expire_time, revoke_time";
const ACCOUNT_COLUMNS = "project_id, state, permissions";

export async function up(db: Kysely<unknown>): Promise<void> {
  // Kysely hands a migration no dialect; the adapter tells PostgreSQL from SQLite.
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  await db.schema
    .createTable("auth_revision")
    .addColumn("id", "integer", (c) => c.primaryKey())
    .addColumn("revision", "bigint", (c) => c.notNull())
    .execute();
  await sql`insert into auth_revision (id, revision) values (1, 0)`.execute(db);
  const watched: [table: string, event: string][] = [
    ["api_keys", `update of ${KEY_COLUMNS}`],
    ["api_keys", "delete"],
    ["service_accounts", `update of ${ACCOUNT_COLUMNS}`],
    ["service_accounts", "delete"],
    ["memberships", "insert"],
    ["memberships", "update"],
    ["memberships", "delete"],
  ];
  if (postgres) {
    await sql`create function svc_bump_auth_revision() returns trigger language plpgsql as $$
      begin
        update auth_revision set revision = revision + 1 where id = 1;
        return null;
      end $$`.execute(db);
    for (const [i, [table, event]] of watched.entries()) {
      // Once per statement: a statement that changes many rows bumps once (and one that matched no
      // row bumps too, which only costs a cache miss).
      await sql
        .raw(
          `create trigger auth_revision_${i} after ${event} on ${table} for each statement execute function svc_bump_auth_revision()`,
        )
        .execute(db);
    }
  } else {
    for (const [i, [table, event]] of watched.entries()) {
      await sql
        .raw(
          `create trigger auth_revision_${i} after ${event} on ${table} begin update auth_revision set revision = revision + 1 where id = 1; end`,
        )
        .execute(db);
    }
  }
}
